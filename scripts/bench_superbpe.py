#!/usr/bin/env python3
"""SuperBPE against plain BPE of the same size, side by side in one run: the training command's
time and peak memory for each (its own summary lines, best of --rounds, runs alternated), then both
tokenizers on held-out text: tokens, bytes per token, and one thread's encoding MB/s.

    python scripts/bench_superbpe.py TRAIN.txt HELDOUT.txt -v 32000 --superbpe 24000 [--trainer bpe_v7]

TRAIN and HELDOUT are UTF-8 files (e.g. real_mix's first 50 MB and the 2 MB after them:
`zcat real_mix.txt.gz | head -c 52000000 | tail -c 2000000`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmark import cpu_model  # beside this script: run as a file, scripts/ is on sys.path

HERE = Path(__file__).resolve().parent.parent


def train(trainer: str, data: Path, out: Path, vocab_size: int, transition: int | None) -> tuple[float, str]:
    """(the run's total seconds, its peak memory) from the command's summary."""
    command = [sys.executable, "-m", "cs336_basics.commands.cli", trainer, str(out), "-v", str(vocab_size)]
    command += ["-d", str(data), "-q", *([] if transition is None else ["--superbpe", str(transition)])]
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(HERE)}
    )
    seconds = float(re.search(r"^total\s+([0-9.,]+) s", done.stdout, re.M).group(1).replace(",", ""))
    peak = re.search(r"^peak memory\s+(.+)$", done.stdout, re.M).group(1)
    return seconds, peak


def encode(out: Path, text: str) -> tuple[int, float]:
    """(tokens, MB/s on one thread) of the tokenizer in `out` on `text`."""
    sys.path.insert(0, str(HERE))
    from cs336_basics import Tokenizer

    tokenizer = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    started = time.perf_counter()
    ids = tokenizer.encode(text)
    seconds = time.perf_counter() - started
    assert tokenizer.decode(ids) == text
    return len(ids), len(text.encode()) / seconds / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("heldout", type=Path)
    parser.add_argument("-v", "--vocab-size", type=int, required=True)
    parser.add_argument("--superbpe", type=int, required=True, metavar="T")
    parser.add_argument("--trainer", default="bpe_v7")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    configs = {"plain": None, f"superbpe T={args.superbpe:,}": args.superbpe}
    best: dict[str, tuple[float, str]] = {}
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(args.rounds):
            for name, transition in configs.items():
                figures = train(args.trainer, args.train, Path(directory) / name, args.vocab_size, transition)
                best[name] = min(best.get(name, figures), figures)
        text = args.heldout.read_text(encoding="utf-8")
        held = {name: encode(Path(directory) / name, text) for name in configs}
    size, held_bytes = args.train.stat().st_size, len(text.encode())
    print(f"{cpu_model()}; {args.trainer}; {size / 1e6:,.1f} MB -> {args.vocab_size:,}", end="")
    print(f"; held-out {held_bytes / 1e6:,.1f} MB")
    print(f"{'':<20} {'train s':>9} {'peak':>10} {'held-out tokens':>16} {'bytes/token':>12} {'encode MB/s':>12}")
    plain_tokens = held["plain"][0]
    for name in configs:
        seconds, peak = best[name]
        tokens, speed = held[name]
        fewer = "" if name == "plain" else f"  ({1 - tokens / plain_tokens:+.1%} fewer)"
        print(f"{name:<20} {seconds:>9.2f} {peak:>10} {tokens:>16,} {held_bytes / tokens:>12.3f} {speed:>12.2f}{fewer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
