#!/usr/bin/env python3
"""`cs336-encode-dataset` on 1 and 2 threads (or --threads), whole commands, interleaved: each round
runs every configuration once; the table shows the best of the rounds of the command's own MB/s
(its "throughput" line, encoding and writing without loading the tokenizer), the best wall time of
the whole command, and the CPU time of the best run; outputs are checked identical.

    python scripts/bench_encode_dataset.py TEXT FIXTURES --rounds 3 [--checkout OTHER_CHECKOUT]

TEXT is a UTF-8 file (e.g. 50 MB of real_mix), FIXTURES holds gpt2_vocab.json and gpt2_merges.txt;
`--checkout` adds the same runs from another checkout's package (A/B in one run).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run(checkout: Path, text: Path, fixtures: Path, threads: int, out: Path) -> tuple[float, float, float]:
    """(the command's MB/s, wall seconds, CPU seconds) of one run."""
    command = [
        sys.executable, "-m", "cs336_basics.commands.encode_cli", str(text), str(out), "-q", "--threads", str(threads),
        "--vocab", str(fixtures / "gpt2_vocab.json"), "--merges", str(fixtures / "gpt2_merges.txt"),
        "--special-token", "<|endoftext|>",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(checkout)}
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    speed = float(re.search(r"throughput: ([0-9.]+) MB/s", done.stdout).group(1))
    return speed, wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", type=Path)
    parser.add_argument("fixtures", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--checkout", type=Path, default=None, help="another checkout to run beside this one")
    args = parser.parse_args(argv)
    checkouts = {"this": HERE} | ({"other": args.checkout.resolve()} if args.checkout else {})
    configs = [(name, path, threads) for name, path in checkouts.items() for threads in args.threads]
    best: dict[tuple[str, int], tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        reference = None
        for _ in range(args.rounds):
            for name, path, threads in configs:
                out = Path(directory) / f"{name}-{threads}.npy"
                speed, wall, cpu = run(path, args.text, args.fixtures, threads, out)
                if reference is None:
                    reference = out
                elif not filecmp.cmp(reference, out, shallow=False):
                    raise SystemExit(f"{name} on {threads} threads wrote different ids")
                old = best.get((name, threads))
                if old is None or speed > old[0]:
                    best[(name, threads)] = (speed, min(wall, old[1]) if old else wall, cpu)
                elif wall < old[1]:
                    best[(name, threads)] = (old[0], wall, old[2])
    size_mb = args.text.stat().st_size / 1e6
    print(f"{args.text.name}: {size_mb:.1f} MB, {args.rounds} rounds, best of each; outputs identical")
    print("| checkout | threads | command MB/s | whole command s | CPU s (best run) |\n|---|---:|---:|---:|---:|")
    for (name, threads), (speed, wall, cpu) in best.items():
        print(f"| {name} | {threads} | {speed:.1f} | {wall:.2f} | {cpu:.2f} |")
    for name in checkouts:
        if (name, 1) in best and (name, 2) in best:
            print(f"{name}: 2 threads / 1: {best[(name, 2)][0] / best[(name, 1)][0]:.2f}x (command MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
