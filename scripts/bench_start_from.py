"""Time going on from a base tokenizer against training from scratch, on the same text, in one run.

    python scripts/bench_start_from.py --corpus real_mix.txt \\
        --start-from gpt2_vocab.json gpt2_merges.txt --new 10000 --rounds 3

Each round trains `--new` merges from scratch (vocab 256 + specials + new), then the base plus `--new`
merges, alternately, both end to end (counting included) with the same trainer and threads; prints
each pair's times and the ratios (base + new) / scratch, wall and CPU, and the medians. docs/START_FROM.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from cs336_basics.rules.start_from import load_base, num_new_merges, run_special_tokens  # noqa: E402
from cs336_basics.trainers import default_trainer, train  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--start-from", nargs="+", required=True, metavar="PATH", help="as the command takes it")
    parser.add_argument("--new", type=int, default=10_000, help="merges to add (and to train from scratch)")
    parser.add_argument("--special", nargs="*", default=["<|endoftext|>"])
    parser.add_argument("--trainer", default=None, help="a trainer version (default: the fastest here)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()

    start = args.start_from[0] if len(args.start_from) == 1 else tuple(args.start_from)
    base = load_base(start, args.special)
    specials = run_special_tokens(base, args.special)
    trainer = args.trainer or default_trainer()
    scratch_size = 256 + len(specials) + args.new
    extended_size = len(base.vocab) + len(specials) - len(base.special_tokens) + args.new
    assert num_new_merges(base, extended_size, specials) == args.new
    options = {} if args.workers is None else {"num_workers": args.workers}
    print(f"{trainer} on {args.corpus.name} ({args.corpus.stat().st_size / 1e6:.1f} MB), {cpu_model()}, "
          f"{os.cpu_count()} cores; base {base.source}: {len(base.vocab):,} tokens")  # fmt: skip
    ratios, cpu_ratios, scratch_times, extended_times = [], [], [], []
    for round_number in range(1, args.rounds + 1):
        began, began_cpu = time.perf_counter(), time.process_time()
        scratch = train(args.corpus, scratch_size, specials, trainer=trainer, **options)
        middle, middle_cpu = time.perf_counter(), time.process_time()
        extended = train(args.corpus, extended_size, specials, trainer=trainer, start_from=base, **options)
        ended, ended_cpu = time.perf_counter(), time.process_time()
        assert len(scratch.merges) == args.new and len(extended.merges) == len(base.merges) + args.new
        scratch_times.append(middle - began)
        extended_times.append(ended - middle)
        ratios.append(extended_times[-1] / scratch_times[-1])
        cpu_ratios.append((ended_cpu - middle_cpu) / (middle_cpu - began_cpu))  # all threads' CPU seconds
        print(f"round {round_number}: scratch {scratch_times[-1]:.2f} s (merge {scratch.seconds['merge']:.2f}), "
              f"base + {args.new:,} {extended_times[-1]:.2f} s (merge {extended.seconds['merge']:.2f}), "
              f"ratio {ratios[-1]:.2f}, CPU ratio {cpu_ratios[-1]:.2f}")  # fmt: skip
        sys.stdout.flush()
    print(f"median: scratch {statistics.median(scratch_times):.2f} s, base + {args.new:,} "
          f"{statistics.median(extended_times):.2f} s, ratio {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}), CPU ratio {statistics.median(cpu_ratios):.2f} "
          f"({min(cpu_ratios):.2f}-{max(cpu_ratios):.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
