"""Count pre-tokens into a count file (`cs336-count-words`, or `python -m cs336_basics.count_cli`).

    cs336-count-words data/part-*.txt -o counts.bin                      # this machine, every core
    cs336-count-words s3://bucket/owt/*.txt -o counts.bin --cluster tcp://scheduler:8786
    cs336-train-bpe auto out --counts counts.bin other.bin -v 32000    # count files add up

The inputs are counted as if concatenated (see `cs336_basics.word_counts`, which also documents the
file format). Count files of inputs split at document boundaries add up to the counts of the whole.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._common import BPEInputError, check_num_workers
from .cli import add_cluster_argument, add_special_tokens_argument, human_bytes
from .word_counts import LOCAL_TASK_BYTES, WordCounts, count_words


def count_inputs(
    paths: list[str],
    special_tokens: list[str],
    *,
    cluster: str | None = None,
    num_threads: int | None = None,
    task_bytes: int | None = None,
    progress: bool = False,
) -> WordCounts:
    """The inputs' word counts, read as if concatenated: on the Dask cluster `cluster` names
    (`local`, `local:N`, `tcp://...`), else on this machine's threads."""
    if cluster:
        from .cluster import connect, count_words_on_cluster

        with connect(cluster) as client:
            return count_words_on_cluster(
                client, paths, special_tokens, task_bytes=task_bytes, progress=progress
            )
    return count_words(
        paths, special_tokens, num_threads=num_threads, task_bytes=task_bytes or LOCAL_TASK_BYTES, progress=progress
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cs336-count-words",
        description="Count GPT-2 pre-tokens of UTF-8 text into a binary count file, for cs336-train-bpe --counts.",
    )
    parser.add_argument("data", nargs="+", help="input files (or fsspec URLs), read as if concatenated")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the count file to write")
    add_special_tokens_argument(parser)
    add_cluster_argument(parser)
    parser.add_argument(
        "--task-mb", type=int, default=None, help="MiB per counting task (Dask: a worker's share, at most 4096)"
    )
    parser.add_argument("--workers", type=int, default=None, help="threads on this machine; -1 = all (default)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        counts = count_inputs(
            args.data,
            args.special,
            cluster=args.cluster,
            num_threads=check_num_workers(args.workers, "--workers"),
            task_bytes=args.task_mb << 20 if args.task_mb else None,
            progress=not args.quiet,
        )
        counted = time.perf_counter()
        path = counts.save(args.output)
    except (BPEInputError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = [
        ("inputs", f"{len(args.data)} file(s), {human_bytes(counts.source_bytes)}"),
        ("words", f"{len(counts):,} distinct, {counts.total_words:,} in all"),
        ("count", f"{counted - started:,.2f} s ({counts.source_bytes / max(counted - started, 1e-9) / 1e6:,.1f} MB/s)"),
        ("wrote", f"{path} ({human_bytes(path.stat().st_size)})"),
    ]
    for name, value in rows:
        print(f"{name:<8} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
