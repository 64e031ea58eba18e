"""The merge phase with the default workers against --workers 1, beside CPU-bound loops, alternated.

    python scripts/bench_busy_machine.py --corpus real_mix.txt --vocab 10000 --loads 1 --rounds 7
    python scripts/bench_busy_machine.py --corpus real_mix.txt --loads 0   # no load of ours

Starts `--loads` processes that spin (`while True: pass`) and stops exactly those when done; then
each round runs `cs336-train-bpe bpe_v7 OUT -d CORPUS -v VOCAB` once with the default workers (A)
and once with `--workers 1` (B), in turn, and reads the merge phase's seconds from what the command
prints. Prints each pair, then the median, min and max of A's and B's merge times and of the ratio
A/B pair by pair (the ratio holds when the machine's speed drifts), and the load average before and
after: on a shared machine the other jobs are part of the conditions. docs/PERFORMANCE.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmark import cpu_model  # beside this script: run as a file, scripts/ is on sys.path

MERGE_LINE = re.compile(r"^merge\s+([0-9.]+) s$", re.MULTILINE)


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def merge_seconds(command: list[str]) -> tuple[float, float]:
    """The merge phase's seconds as the command prints them, and the whole command's wall seconds."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    found = MERGE_LINE.search(done.stdout)
    if found is None:
        sys.exit(f"no merge time in the output of {' '.join(command)}")
    return float(found.group(1)), wall


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=1, help="CPU-bound loops to start beside it (1)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    loads = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.loads)]
    try:
        time.sleep(0.5 if loads else 0)  # the loops running before the first round
        print(f"{args.corpus.name} ({args.corpus.stat().st_size / 1e6:.1f} MB) -> {args.vocab}, {cpu_model()}, "
              f"{os.cpu_count()} cores, {args.loads} loop(s) of ours beside it; load average {load_average()}")
        with tempfile.TemporaryDirectory() as scratch:
            base = [sys.executable, "-m", "cs336_basics.commands.cli", "bpe_v7", scratch, "-d", str(args.corpus),
                    "-v", str(args.vocab), "-q"]  # fmt: skip
            default_times, one_times, ratios = [], [], []
            for round_number in range(1, args.rounds + 1):
                default_merge, default_wall = merge_seconds(base)
                one_merge, one_wall = merge_seconds([*base, "--workers", "1"])
                default_times.append(default_merge)
                one_times.append(one_merge)
                ratios.append(default_merge / one_merge)
                print(f"round {round_number}: merge default {default_merge:.3f} s (command {default_wall:.2f}), "
                      f"--workers 1 {one_merge:.3f} s (command {one_wall:.2f}), ratio {ratios[-1]:.3f}")
        print(f"merge, default workers: {spread(default_times)} s")
        print(f"merge, --workers 1:     {spread(one_times)} s")
        print(f"ratio default / one, pair by pair: {spread(ratios)}; load average {load_average()}")
    finally:
        for load in loads:
            load.kill()
            load.wait()


if __name__ == "__main__":
    main()
