#!/usr/bin/env python3
"""Encode throughput with the GPT-2 vocabulary: our pure-Python and compiled paths against tiktoken,
gigatoken and fastokens (each when installed), on the same text in the same run, with the ids
checked to agree.

    python scripts/bench_tokenizer.py ../shared/corpus/real_mix.txt.gz ../shared/fixtures --repeat 3

CORPUS is a UTF-8 text file or a .gz of one; FIXTURES holds gpt2_vocab.json and gpt2_merges.txt
(tiktoken is built from them, so nothing is downloaded). Each encoder turns the whole text into a
Python list of ids, as `encode` returns; "ours (array)" is the compiled path without that list. The
first repetition of each starts with an empty pre-token cache; the table shows the best and the
first run by wall clock, and the best by CPU time. The pure path runs once (`--pure-mb` limits it
to a prefix: it is some 30x slower).

A second table compares the compiled encoders per thread count (--threads, default 1 and 2): the
text is cut at pre-token boundaries into one piece per thread, each Python thread encoding its piece
with its own tokenizer (so an encoder that holds the GIL shows no gain). Our own parallel entry
points run on their own threads instead: "encode_batch" gets the text in 64 pieces,
"encode_file" the text written to a temporary file. "cold" is the best of --repeat runs each on
freshly built tokenizers (building not timed), "warm" the best of --repeat runs on tokenizers that
have encoded the text once already. gigatoken and fastokens load a HuggingFace tokenizer.json
written from the fixture files, so nothing is downloaded. MB are 10^6 bytes of UTF-8.

The text's conversion to UTF-8 is part of every figure the first time a str is encoded: tiktoken,
gigatoken and fastokens then leave CPython's UTF-8 copy inside the str (PyUnicode_AsUTF8), which
later runs on the same str, by any encoder, use for free; ours uses that copy when it exists but
never creates it, transcoding the str itself otherwise. With one thread the second table encodes
the very str the first table gave to tiktoken.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from cs336_basics.outputs import export  # noqa: E402
from cs336_basics.outputs.serialization import load_merges, load_vocab  # noqa: E402
from cs336_basics.rules.contract import ENDOFTEXT  # noqa: E402
from cs336_basics.rules.pattern import GPT2_SPLIT_PATTERN  # noqa: E402
from cs336_basics.tokenizer import Tokenizer, native_available  # noqa: E402


def read_corpus(path: Path, head_bytes: int | None) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as file:
        data = file.read(head_bytes) if head_bytes else file.read()
    return data.decode("utf-8", errors="ignore")  # a cut may end inside a character


def timed(encode: Callable[[str], object], text: str, repeat: int) -> tuple[list[tuple[float, float]], object]:
    """(wall, CPU) seconds of each run, and the last result. On a shared machine the CPU time is the
    steadier measure of a single-threaded encoder; wall time includes waiting for a core."""
    seconds = []
    result = None
    for _ in range(repeat):
        result = None  # free the previous ids before timing the next run
        wall, cpu = time.perf_counter(), time.process_time()
        result = encode(text)
        seconds.append((time.perf_counter() - wall, time.process_time() - cpu))
    return seconds, result


def hf_tokenizer_json(vocab: dict, merges: list) -> str:
    """Our HuggingFace export of the GPT-2 vocabulary, with GPT-2's stock ByteLevel pre-tokenizer in
    place of the export's Split step on our pattern (the same pre-tokens): the peers recognise the
    stock one and take their fast scanner on it."""
    document = export.hf_tokenizer_json(vocab, merges, [ENDOFTEXT])
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    document["pre_tokenizer"] = document["decoder"] = byte_level
    return json.dumps(document, ensure_ascii=False)


def split_at_pretokens(text: str, parts: int) -> list[str]:
    """`text` in `parts` pieces cut before a space or newline that follows a non-space character:
    no GPT-2 pre-token crosses such a place, so the pieces' ids concatenate to the whole's."""
    pieces, start = [], 0
    for part in range(1, parts):
        cut = max(start, len(text) * part // parts)
        while cut < len(text) and not (text[cut] in " \n" and cut > 0 and not text[cut - 1].isspace()):
            cut += 1
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


@dataclass
class Peer:
    """How to run one encoder: `make` builds a tokenizer; `encode(tokenizer, work, threads)` encodes
    `work` to ids. `runs`: "piece" (each Python thread encodes its piece of the text, `threads`
    unused), "batch" (a list of pieces, the encoder's own threads) or "file" (a path, ditto)."""

    make: Callable[[], object]
    encode: Callable[[object, object, int], object]
    runs: str = "piece"


BATCH_PIECES = 64


def peer_encoders(vocab: dict, merges: list) -> dict[str, Peer]:
    encoders: dict[str, Peer] = {}
    if native_available():
        def ours() -> Tokenizer:
            return Tokenizer(vocab, merges, [ENDOFTEXT], native=True)

        encoders["ours, encode_array"] = Peer(ours, lambda tokenizer, text, _: tokenizer.encode_array(text))
        encoders["ours, encode (list)"] = Peer(ours, lambda tokenizer, text, _: tokenizer.encode(text))
        encoders["ours, encode_batch"] = Peer(
            ours, lambda tokenizer, texts, threads: tokenizer.encode_batch(texts, num_threads=threads), "batch"
        )
        encoders["ours, encode_file"] = Peer(
            ours, lambda tokenizer, path, threads: tokenizer.encode_file(path, num_threads=threads), "file"
        )
    try:
        import tiktoken
    except ImportError:
        print("tiktoken is not installed (skipping it)")
    else:
        ranks = {token: token_id for token_id, token in vocab.items() if token != ENDOFTEXT.encode()}
        encoders["tiktoken"] = Peer(
            lambda: tiktoken.Encoding(
                name="gpt2-from-fixtures",
                pat_str=GPT2_SPLIT_PATTERN,
                mergeable_ranks=ranks,
                special_tokens={ENDOFTEXT: 50256},
            ),
            lambda encoding, text, _: encoding.encode(text, allowed_special="all"),
        )
    hf_json = hf_tokenizer_json(vocab, merges)
    try:
        import gigatoken
    except ImportError:
        print("gigatoken is not installed (pip install gigatoken; skipping it)")
    else:
        encoders["gigatoken"] = Peer(
            lambda: gigatoken.Tokenizer.from_json(hf_json), lambda tokenizer, text, _: tokenizer.encode(text)
        )
    try:
        import fastokens
    except ImportError:
        print("fastokens is not installed (pip install fastokens; skipping it)")
    else:
        encoders["fastokens"] = Peer(
            lambda: fastokens.Tokenizer.from_json_str(hf_json), lambda tokenizer, text, _: tokenizer.encode(text).ids
        )
    return encoders


def compare_threads(
    encoders: dict[str, Peer], text: str, threads: list[int], repeat: int, reference: list[int] | None
) -> None:
    size_mb = len(text.encode("utf-8")) / 1e6
    batch = split_at_pretokens(text, BATCH_PIECES)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "text.txt"
        path.write_text(text, encoding="utf-8")
        # "cores busy": CPU time over wall time of the best warm run, which shows an encoder that uses
        # more threads of its own than it was given (or fewer, when it holds the GIL).
        print("\n| encoder | threads | cold MB/s | warm MB/s | warm MB/s per thread | cores busy | ids |")
        print("|---|---:|---:|---:|---:|---:|---|")
        speeds: dict[tuple[str, int], tuple[float, float]] = {}  # (cold, warm) MB/s, for the ratios
        for name, peer in encoders.items():
            for count in threads:
                if peer.runs == "piece":
                    pieces = split_at_pretokens(text, count)
                    calls = len(pieces)
                else:
                    work = batch if peer.runs == "batch" else path
                    pieces, calls = [work], 1

                def run(tokenizers: list[object], peer: Peer = peer, pieces: list = pieces, count: int = count):
                    return list(pool.map(peer.encode, tokenizers, pieces, [count] * len(pieces)))

                with ThreadPoolExecutor(calls) as pool:
                    cold = []
                    for _ in range(repeat):
                        tokenizers = [peer.make() for _ in range(calls)]
                        started = time.perf_counter()
                        run(tokenizers)
                        cold.append(time.perf_counter() - started)
                    warm = []  # (wall, CPU of the whole process)
                    for _ in range(repeat):
                        started, cpu = time.perf_counter(), time.process_time()
                        results = run(tokenizers)
                        warm.append((time.perf_counter() - started, time.process_time() - cpu))
                if peer.runs == "batch":
                    results = results[0]
                ids = [int(token) for result in results for token in result]
                if reference is None:
                    reference = ids
                verdict = "==" if ids == reference else "DIFFER"
                wall, cpu = min(warm)
                speeds[(name, count)] = (size_mb / min(cold), size_mb / wall)
                print(
                    f"| {name} | {count} | {size_mb / min(cold):.1f} | {size_mb / wall:.1f} "
                    f"| {size_mb / wall / count:.1f} | {cpu / wall:.2f} | {verdict} |"
                )
                del ids, results
    # Issue 24's ratios, in this run: encode_array on one thread against each peer on one thread.
    ours = speeds.get(("ours, encode_array", 1))
    for peer in ("gigatoken", "fastokens", "tiktoken"):
        theirs = speeds.get((peer, 1))
        if ours and theirs:
            print(f"encode_array / {peer}, 1 thread: cold {ours[0] / theirs[0]:.2f}x, warm {ours[1] / theirs[1]:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="text file or .gz")
    parser.add_argument("fixtures", type=Path, help="directory with gpt2_vocab.json and gpt2_merges.txt")
    parser.add_argument("--head-mb", type=float, default=None, help="use only the first N MB of the corpus")
    parser.add_argument("--pure-mb", type=float, default=None, help="run the pure path on the first N MB only")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the compiled path and tiktoken (best wins)")
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2], help="thread counts of the second table")
    parser.add_argument("--peers-only", action="store_true", help="print only the second table")
    args = parser.parse_args(argv)

    text = read_corpus(args.corpus, int(args.head_mb * 1e6) if args.head_mb else None)
    size_mb = len(text.encode("utf-8")) / 1e6
    vocab = load_vocab(args.fixtures / "gpt2_vocab.json")
    merges = load_merges(args.fixtures / "gpt2_merges.txt")
    print(f"corpus: {args.corpus} ({size_mb:.1f} MB), GPT-2 vocabulary, special token {ENDOFTEXT}")

    if args.peers_only:
        compare_threads(peer_encoders(vocab, merges), text, args.threads, args.repeat, None)
        return 0

    rows: list[tuple[str, float, list[tuple[float, float]]]] = []  # (encoder, MB, (wall, CPU) per run)
    reference = native = None
    if native_available():
        native = Tokenizer(vocab, merges, [ENDOFTEXT], native=True)
        seconds, reference = timed(native.encode, text, args.repeat)
        rows.append(("ours, compiled", size_mb, seconds))
        fresh = Tokenizer(vocab, merges, [ENDOFTEXT], native=True)
        seconds, array_ids = timed(fresh.encode_array, text, args.repeat)
        rows.append(("ours, compiled (array)", size_mb, seconds))
        assert array_ids.tolist() == reference, "encode_array differs from encode"
        del array_ids
    else:
        print("the compiled encoder is not built: pip install -e . (skipping it)")

    try:
        import tiktoken
    except ImportError:
        print("tiktoken is not installed (skipping it)")
    else:
        ranks = {token: token_id for token_id, token in vocab.items() if token != ENDOFTEXT.encode()}
        encoding = tiktoken.Encoding(
            name="gpt2-from-fixtures",
            pat_str=GPT2_SPLIT_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={ENDOFTEXT: 50256},
        )
        seconds, ids = timed(lambda value: encoding.encode(value, allowed_special="all"), text, args.repeat)
        rows.append(("tiktoken", size_mb, seconds))
        if reference is not None:
            print(f"tiktoken ids {'==' if ids == reference else '!='} ours")
        del ids

    pure = Tokenizer(vocab, merges, [ENDOFTEXT], native=False)
    pure_text = text
    if args.pure_mb:
        pure_text = text.encode("utf-8")[: int(args.pure_mb * 1e6)].decode("utf-8", errors="ignore")
    seconds, ids = timed(pure.encode, pure_text, 1)
    rows.append(("ours, pure Python", len(pure_text.encode("utf-8")) / 1e6, seconds))
    if reference is not None:
        same = ids == (reference if pure_text is text else native.encode(pure_text))
        print(f"pure ids {'==' if same else '!='} compiled ids")
    del ids

    print("\n| encoder | MB | best MB/s (wall) | best MB/s (CPU) | first run MB/s (wall) |")
    print("|---|---:|---:|---:|---:|")
    for name, megabytes, seconds in rows:
        walls, cpus = [wall for wall, _ in seconds], [cpu for _, cpu in seconds]
        print(
            f"| {name} | {megabytes:.1f} | {megabytes / min(walls):.2f} | {megabytes / min(cpus):.2f} "
            f"| {megabytes / walls[0]:.2f} |"
        )
    if args.threads:
        compare_threads(peer_encoders(vocab, merges), text, args.threads, args.repeat, reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
