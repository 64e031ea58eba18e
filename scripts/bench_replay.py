#!/usr/bin/env python3
"""The merge phase of a run that goes on from a base (SuperBPE's second stage: the base's merges
replayed on line-long words, then the new merges): best of --rounds, with a digest of the merges, so
that two checkouts compare side by side (run it with PYTHONPATH=<checkout> for each).

    python scripts/bench_replay.py TEXT --transition 24000 -v 32000 [--workers 1] [--pattern superword]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

# The checkout it lies in, after PYTHONPATH: PYTHONPATH=<another checkout> measures that one.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from benchmark import cpu_model  # noqa: E402  beside this script: scripts/ is on sys.path

from cs336_basics.trainers import train  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", type=Path)
    parser.add_argument("--transition", type=int, required=True, help="the base: a plain run to this size")
    parser.add_argument("-v", "--vocab-size", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--pattern", default="superword", help="the second run's pattern (superword)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    specials = ["<|endoftext|>"]
    first = train(args.text, args.transition, specials, trainer="bpe_v7")
    best = None
    for _ in range(args.rounds):
        result = train(
            args.text, args.vocab_size, specials, trainer="bpe_v7", start_from=(first.vocab, first.merges),
            pattern=args.pattern, num_workers=args.workers,
        )  # fmt: skip
        seconds = result.seconds["merge"]
        best = seconds if best is None else min(best, seconds)
    digest = hashlib.sha1(repr(result.merges).encode()).hexdigest()[:12]
    print(f"{cpu_model()}; {args.workers} thread(s): merge phase best of {args.rounds}: {best:.2f} s; merges {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
