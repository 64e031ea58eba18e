#!/usr/bin/env python3
"""Single-thread encode throughput with the GPT-2 vocabulary: our pure-Python and compiled paths
against tiktoken, on the same text in the same run, with the ids checked to agree.

    python scripts/bench_tokenizer.py ../shared/corpus/real_mix.txt.gz ../shared/fixtures --repeat 3

CORPUS is a UTF-8 text file or a .gz of one; FIXTURES holds gpt2_vocab.json and gpt2_merges.txt
(tiktoken is built from them, so nothing is downloaded). Each encoder turns the whole text into a
Python list of ids, as `encode` returns; "ours (array)" is the compiled path without that list. The
first repetition of each starts with an empty pre-token cache; the table shows the best and the
first run by wall clock, and the best by CPU time. The pure path runs once (`--pure-mb` limits it
to a prefix: it is some 30x slower).
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from cs336_basics._common import ENDOFTEXT, GPT2_SPLIT_PATTERN  # noqa: E402
from cs336_basics.serialization import load_merges, load_vocab  # noqa: E402
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="text file or .gz")
    parser.add_argument("fixtures", type=Path, help="directory with gpt2_vocab.json and gpt2_merges.txt")
    parser.add_argument("--head-mb", type=float, default=None, help="use only the first N MB of the corpus")
    parser.add_argument("--pure-mb", type=float, default=None, help="run the pure path on the first N MB only")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the compiled path and tiktoken (best wins)")
    args = parser.parse_args(argv)

    text = read_corpus(args.corpus, int(args.head_mb * 1e6) if args.head_mb else None)
    size_mb = len(text.encode("utf-8")) / 1e6
    vocab = load_vocab(args.fixtures / "gpt2_vocab.json")
    merges = load_merges(args.fixtures / "gpt2_merges.txt")
    print(f"corpus: {args.corpus} ({size_mb:.1f} MB), GPT-2 vocabulary, special token {ENDOFTEXT}")

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
