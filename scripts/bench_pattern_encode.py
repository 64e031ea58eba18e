"""Encoding under each named pattern: the compiled encoder beside the Python one and tiktoken.

For each pattern, trains a vocabulary with bpe_v7 on FILE (`<|endoftext|>` special), then encodes the
whole file as one text with `Tokenizer(..., native=True)` and with `tiktoken.Encoding(pat_str=<the
pattern>, mergeable_ranks=<ours>)`, and its first `--python-mb` MB with the Python path. The ids are
compared (all three on the head, compiled and tiktoken on the whole) before any time is taken; a
mismatch stops the run. Prints MB/s (best of `--repeat`, wall clock) and the ratios from the same run.

    python scripts/bench_pattern_encode.py REAL_MIX_50M o200k cl100k gpt2

Needs tiktoken (the `bench` extra).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import tiktoken

from cs336_basics import Tokenizer, train_bpe
from cs336_basics.rules.pattern import NAMED_PATTERNS, resolve_pattern

SPECIAL = "<|endoftext|>"


def best_seconds(work: Callable[[str], object], text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("patterns", nargs="+", choices=sorted(NAMED_PATTERNS))
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--python-mb", type=float, default=5.0, help="MB the Python path encodes (it is slow)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with open(args.file, encoding="utf-8") as source:
        text = source.read()
    head = text[: int(args.python_mb * 1e6)]
    megabytes = len(text.encode("utf-8")) / 1e6
    head_megabytes = len(head.encode("utf-8")) / 1e6
    for name in args.patterns:
        vocab, merges = train_bpe(args.file, args.vocab_size, [SPECIAL], trainer="bpe_v7", pattern=name)
        special_id = next(token_id for token_id, token in vocab.items() if token == SPECIAL.encode())
        ranks = {token: token_id for token_id, token in vocab.items() if token_id != special_id}
        reference = tiktoken.Encoding(
            "ours", pat_str=resolve_pattern(name).regex, mergeable_ranks=ranks, special_tokens={SPECIAL: special_id}
        )
        compiled = Tokenizer(vocab, merges, [SPECIAL], pattern=name, native=True)
        python = Tokenizer(vocab, merges, [SPECIAL], pattern=name, native=False)
        head_ids = compiled.encode(head)
        if not head_ids == python.encode(head) == reference.encode(head, allowed_special="all"):
            raise SystemExit(f"{name}: the ids differ on the first {head_megabytes:.1f} MB")
        ids = compiled.encode(text)
        if ids != reference.encode(text, allowed_special="all"):
            raise SystemExit(f"{name}: the compiled encoder's ids differ from tiktoken's on the whole file")
        compiled_s = best_seconds(compiled.encode, text, args.repeat)
        tiktoken_s = best_seconds(partial(reference.encode, allowed_special="all"), text, args.repeat)
        python_s = best_seconds(python.encode, head, 1) * megabytes / head_megabytes
        print(
            f"{name}: ids equal ({len(ids)} ids); compiled {megabytes / compiled_s:.1f} MB/s, "
            f"tiktoken {megabytes / tiktoken_s:.1f} MB/s, Python {megabytes / python_s:.2f} MB/s "
            f"(first {head_megabytes:.1f} MB); compiled/tiktoken {tiktoken_s / compiled_s:.2f}x, "
            f"compiled/Python {python_s / compiled_s:.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
