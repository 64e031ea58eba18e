"""Counting through Dask against v7's own counting, on one corpus split into files.

    python scripts/bench_cluster.py CORPUS [--files 16] [--workers 2] [--repeat 3] [--task-mb MB]

Splits CORPUS into --files files at document boundaries (special-token starts) in a temporary
directory, then times, best of --repeat rounds (each round runs every method once, so that all see
the same changes of load on a shared machine):
  v7 whole file    bpe_v7.pretokenize_and_count on CORPUS with --workers threads (counts stay in C++)
  v7 + to_dict     the same, plus turning the counts into a Python dict (what the Dask path once
                   paid for every table)
  local, N files   counting.count_words on the files, --workers threads
  dask, N files    cluster.count_words_on_cluster on a LocalCluster of --workers single-threaded
                   worker processes (started once, outside the timing; its start-up time is printed),
                   tasks of --task-mb MiB (default: the cluster module's, one task per worker)
and checks that every method gives the same counts. Timings on a shared machine are noisy; the CPU
seconds (least of the rounds, all processes and threads: client, scheduler, workers) are less so.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from cs336_basics import bpe_v7
from cs336_basics.commands.count_cli import task_bytes_option
from cs336_basics.ingest.cluster import count_words_on_cluster
from cs336_basics.ingest.counting import count_words
from cs336_basics.phases import CountParallelism
from cs336_basics.rules.contract import BPEInputError


def split_at_documents(corpus: Path, num_files: int, directory: Path, special: bytes) -> list[Path]:
    data = corpus.read_bytes()
    cuts = [0]
    for index in range(1, num_files):
        found = data.find(special, len(data) * index // num_files)
        if found == -1:
            break
        if found > cuts[-1]:
            cuts.append(found)
    cuts.append(len(data))
    paths = []
    for index, (start, end) in enumerate(zip(cuts, cuts[1:])):
        path = directory / f"part-{index:03d}.txt"
        path.write_bytes(data[start:end])
        paths.append(path)
    return paths


def scheduler_task_count(dask_scheduler) -> int:
    return len(dask_scheduler.tasks)


def cpu_seconds() -> float:
    """CPU time of this process, all its threads, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--task-mb", type=int, default=None)
    parser.add_argument("--special", default="<|endoftext|>")
    args = parser.parse_args()
    try:
        task_bytes = task_bytes_option(args.task_mb)  # cs336-count-words' rule: 1 to 4096
    except BPEInputError as error:
        parser.error(str(error))
    specials = [args.special]
    options = CountParallelism(num_workers=args.workers)
    size = args.corpus.stat().st_size
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as directory:
        parts = split_at_documents(args.corpus, args.files, Path(directory), args.special.encode())
        started = time.perf_counter()
        with (
            LocalCluster(
                n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            startup = time.perf_counter() - started

            def cluster_cpu_seconds() -> list[float]:
                # The client's process (first) also runs the LocalCluster's scheduler.
                return [cpu_seconds(), *client.run(cpu_seconds).values()]

            dask_split: list[float] = []  # the CPU seconds of the Dask round that used least

            def on_dask():
                # Tasks are pure: a repeat would reuse results the scheduler still holds.
                while client.run_on_scheduler(scheduler_task_count):
                    time.sleep(0.01)
                before = cluster_cpu_seconds()
                started = time.perf_counter()
                counts = count_words_on_cluster(client, parts, specials, task_bytes=task_bytes)
                seconds = time.perf_counter() - started
                used = [after - earlier for after, earlier in zip(cluster_cpu_seconds(), before)]
                if not dask_split or sum(used) < sum(dask_split):
                    dask_split[:] = used
                return seconds, sum(used), counts

            def timed(run):
                cpu, started = cpu_seconds(), time.perf_counter()
                result = run()
                return time.perf_counter() - started, cpu_seconds() - cpu, result

            methods = {
                "v7 whole file": lambda: timed(lambda: bpe_v7.pretokenize_and_count(args.corpus, specials, options)),
                "v7 + to_dict": lambda: timed(
                    lambda: bpe_v7.pretokenize_and_count(args.corpus, specials, options).to_dict()
                ),
                f"local, {len(parts)} files": lambda: timed(
                    lambda: count_words(parts, specials, num_workers=args.workers)
                ),
                f"dask, {len(parts)} files": on_dask,
            }
            # Rounds of every method in turn, so that all see the same changes of load.
            best = dict.fromkeys(methods, float("inf"))
            least_cpu = dict.fromkeys(methods, float("inf"))
            results = {}
            for _ in range(args.repeat):
                for name, run in methods.items():
                    seconds, cpu, results[name] = run()
                    best[name] = min(best[name], seconds)
                    least_cpu[name] = min(least_cpu[name], cpu)
        reference = results["v7 whole file"].to_dict()
        assert results[f"local, {len(parts)} files"].counts == reference, "local counting differs from v7"
        assert results[f"dask, {len(parts)} files"].counts == reference, "Dask counting differs from v7"

    print(
        f"corpus {args.corpus.name}: {size / 1e6:,.1f} MB, {len(reference):,} distinct words, "
        f"{args.workers} workers, tasks of {args.task_mb or '(default)'} MiB, best of {args.repeat}, "
        f"cpus {os.cpu_count()}"
    )
    base = best["v7 whole file"]
    for name, seconds in best.items():
        print(
            f"  {name:<18} {seconds:7.2f} s  {size / seconds / 1e6:7.1f} MB/s  "
            f"{size / seconds / args.workers / 1e6:6.1f} MB/s per worker  {seconds / base - 1:+7.1%} vs v7   "
            f"CPU {least_cpu[name]:6.2f} s {least_cpu[name] / least_cpu['v7 whole file'] - 1:+7.1%}"
        )
    client_cpu, *worker_cpu = dask_split
    print(
        f"  (Dask's least CPU: client and scheduler {client_cpu:.2f} s, workers "
        + " / ".join(f"{seconds:.2f}" for seconds in worker_cpu)
        + f" s; LocalCluster start-up, not included: {startup:.2f} s)"
    )


if __name__ == "__main__":
    main()
