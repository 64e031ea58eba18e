#!/usr/bin/env python3
"""One-thread encoding against the peers, interleaved: each round builds a fresh tokenizer of every
encoder, encodes the text once cold (empty pre-token cache) and once warm, by this thread's CPU
time; the table shows each encoder's best over the rounds, the ratios are ours over each peer's.
Ids are checked equal to tiktoken's (or to ours when tiktoken is missing) before any figure counts.

    python scripts/bench_encode_interleaved.py TEXT FIXTURES --rounds 5

TEXT is a UTF-8 file (e.g. 10 MB of real_mix); FIXTURES holds gpt2_vocab.json and gpt2_merges.txt.
Peers run when installed: tiktoken (built from the fixtures), gigatoken (from a tokenizer.json
written from them, GPT-2's stock ByteLevel pre-tokenizer). The str's UTF-8 copy is made before
the first round, so no encoder pays for the conversion.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from bench_tokenizer import hf_tokenizer_json  # noqa: E402

from cs336_basics.outputs.serialization import load_merges, load_vocab  # noqa: E402
from cs336_basics.rules.contract import ENDOFTEXT, GPT2_SPLIT_PATTERN  # noqa: E402
from cs336_basics.tokenizer import Tokenizer  # noqa: E402


def encoders(vocab: dict, merges: list) -> dict:
    """name -> (make, encode)."""
    found = {
        "ours, encode_array": (
            lambda: Tokenizer(vocab, merges, [ENDOFTEXT], native=True),
            lambda tokenizer, text: tokenizer.encode_array(text),
        )
    }
    try:
        import tiktoken
    except ImportError:
        print("tiktoken is not installed (skipping it)")
    else:
        ranks = {token: token_id for token_id, token in vocab.items() if token != ENDOFTEXT.encode()}
        found["tiktoken"] = (
            lambda: tiktoken.Encoding(
                name="gpt2-from-fixtures",
                pat_str=GPT2_SPLIT_PATTERN,
                mergeable_ranks=ranks,
                special_tokens={ENDOFTEXT: 50256},
            ),
            lambda encoding, text: encoding.encode(text, allowed_special="all"),
        )
    try:
        import gigatoken
    except ImportError:
        print("gigatoken is not installed (pip install gigatoken; skipping it)")
    else:
        hf_json = hf_tokenizer_json(vocab, merges)
        found["gigatoken"] = (
            lambda: gigatoken.Tokenizer.from_json(hf_json),
            lambda tokenizer, text: tokenizer.encode(text),
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", type=Path)
    parser.add_argument("fixtures", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip", nargs="*", default=[], help="encoders to leave out (e.g. tiktoken: slow)")
    args = parser.parse_args(argv)
    text = args.text.read_bytes().decode("utf-8", errors="ignore")
    text.encode("utf-8")
    size_mb = len(text.encode("utf-8")) / 1e6
    vocab = load_vocab(args.fixtures / "gpt2_vocab.json")
    merges = load_merges(args.fixtures / "gpt2_merges.txt")
    found = {name: pair for name, pair in encoders(vocab, merges).items() if name not in args.skip}
    # CPython's UTF-8 copy made once for every encoder (the peers read it, ours uses it when present).
    Tokenizer(vocab, merges, [ENDOFTEXT], native=True).encode_array(text)
    reference = None
    best = {name: [float("inf"), float("inf")] for name in found}
    for round_index in range(args.rounds):
        for name, (make, encode) in found.items():
            tokenizer = make()
            for which in (0, 1):
                started = time.thread_time()
                ids = encode(tokenizer, text)
                best[name][which] = min(best[name][which], time.thread_time() - started)
            if round_index == 0:
                ids = [int(token) for token in ids]
                if reference is None or name == "tiktoken":
                    if reference is not None and ids != reference:
                        raise SystemExit(f"{name}'s ids differ from ours")
                    reference = ids
                elif ids != reference:
                    raise SystemExit(f"{name}'s ids differ")
            del ids, tokenizer
    print(f"{args.text.name}: {size_mb:.1f} MB, {args.rounds} rounds, best MB/s by thread CPU time, ids equal")
    print("| encoder | cold MB/s | warm MB/s |\n|---|---:|---:|")
    for name, (cold, warm) in best.items():
        print(f"| {name} | {size_mb / cold:.1f} | {size_mb / warm:.1f} |")
    ours = best["ours, encode_array"]
    for name, (cold, warm) in best.items():
        if name != "ours, encode_array":
            print(f"ours / {name}: cold {cold / ours[0]:.2f}x, warm {warm / ours[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
