"""Count pre-tokens into a count file (`cs336-count-words`, or `python -m cs336_basics.commands.count_cli`).

    cs336-count-words data/part-*.txt -o counts.bin                      # this machine, every core
    cs336-count-words s3://bucket/owt/*.txt -o counts.bin --cluster tcp://scheduler:8786
    cs336-train-bpe auto out --counts counts.bin other.bin -v 32000    # count files add up

The inputs are counted as if concatenated (see `cs336_basics.ingest.word_counts`, which also documents the
file format), pre-tokenized by `--pattern` (GPT-2's by default; the file records it, and training
from it takes that pattern, or refuses another) with the character classes of `--unicode`'s version
(the installed regex's by default; recorded too: training by another version's classes is refused
where the words hold a character the two class differently). Count files of inputs split at
document boundaries add up to the counts of the whole.

Exit status, the same for every command of the package (cs336-train-bpe, cs336-count-words):
    0    done
    1    the run failed: out of memory, a file could not be read or written (a full disk), a Dask
         task failed or the cluster could not start; one line, no traceback
    2    bad arguments or input, found before the long work: a missing, unreadable or damaged input,
         an output that cannot be written (its directory, or a directory by its name), a busy output
         directory
    130  interrupted by SIGINT (Ctrl-C); 143 by SIGTERM (the trainer): "interrupted", nothing written
         (a signal once the count file is in place is only noted: the run has succeeded, exit 0)
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from ..ingest.cluster import MAX_TASK_BYTES, ClusterTaskError
from ..ingest.route import count_inputs
from ..ingest.sources import expand_inputs
from ..outputs.serialization import check_output_dir
from ..rules.contract import BPEInputError, check_num_workers
from ..rules.pattern import GPT2, TOOLS_UNICODE, installed_unicode, resolve_pattern
from .command_line import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    InterruptHandling,
    add_cluster_argument,
    add_format_arguments,
    add_pattern_argument,
    add_special_tokens_argument,
    add_unicode_argument,
    human_bytes,
    output_path_argument,
)


def _check_output(output: Path) -> None:
    """Refuse, before counting, an output that cannot be written: bad input (2), as in the trainer."""
    if output.is_dir():
        raise BPEInputError(f"cannot write {output}: it is a directory")
    check_output_dir(output.parent)


def task_bytes_option(task_mb: int | None) -> int | None:
    """`--task-mb` as bytes, None for the default; refused (bad input) outside 1 ... MAX_TASK_BYTES, as
    --help says, rather than 0 silently meaning the default or 99999 a task no worker should hold."""
    if task_mb is None:
        return None
    limit = MAX_TASK_BYTES >> 20
    if not 1 <= task_mb <= limit:
        raise BPEInputError(f"--task-mb must be from 1 to {limit} (MiB per counting task), got {task_mb}")
    return task_mb << 20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cs336-count-words",
        description="Count pre-tokens (GPT-2's pattern unless --pattern) of UTF-8 text into a binary count file, "
        "for cs336-train-bpe --counts.",
    )
    parser.add_argument(
        "data",
        nargs="+",
        help="input files (text, compressed, JSON lines, Parquet), directories, globs or fsspec URLs, read as if "
        "concatenated",
    )
    add_format_arguments(parser)
    parser.add_argument("-o", "--output", type=output_path_argument, required=True, help="the count file to write")
    add_special_tokens_argument(parser)
    add_pattern_argument(parser)
    add_unicode_argument(
        parser,
        f"the installed regex's; train --like rustbpe, nanochat or hf* from counts made with {TOOLS_UNICODE}",
    )
    add_cluster_argument(parser)
    parser.add_argument(
        "--task-mb",
        type=int,
        default=None,
        help=f"MiB per counting task, 1 to {MAX_TASK_BYTES >> 20} (Dask default: a worker's share, at most that)",
    )
    parser.add_argument("--workers", type=int, default=None, help="threads on this machine; -1 = all (default)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with InterruptHandling() as interrupts:
            code = _count(args, interrupts)
    except KeyboardInterrupt as interrupt:  # SIGINT or SIGTERM: the count file is written whole or not at all
        print("interrupted", file=sys.stderr)
        return 128 + getattr(interrupt, "signum", signal.SIGINT)
    note = interrupts.late_note()
    if note is not None:
        print(note, file=sys.stderr)
    return code


def _count(args: argparse.Namespace, interrupts: InterruptHandling) -> int:
    started = time.perf_counter()
    try:
        task_bytes = task_bytes_option(args.task_mb)
        pattern = resolve_pattern(args.pattern)
        _check_output(args.output)
        args.data = expand_inputs(args.data)
        counts = count_inputs(
            args.data,
            args.special,
            cluster=args.cluster,
            cluster_timeout=args.cluster_timeout,
            num_workers=check_num_workers(args.workers, "--workers"),
            task_bytes=task_bytes,
            progress=not args.quiet,
            format=args.format,
            text_field=args.text_field,
            skip_bad_records=args.skip_bad_records,
            pattern=pattern,
            unicode=args.unicode,
        )
        counted = time.perf_counter()
        try:
            path = counts.save(args.output, on_commit=interrupts.output_in_place)
        except OSError as error:
            # Writing failed after the work was done (a full disk): the run failed, as in the trainer.
            print(f"error: cannot write {args.output}: {error.strerror or error}", file=sys.stderr)
            return EXIT_FAILED
    except (BPEInputError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ClusterTaskError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except MemoryError:
        print("error: out of memory while counting (try fewer --workers or fewer inputs at once)", file=sys.stderr)
        return EXIT_FAILED
    rows = [
        ("inputs", f"{len(args.data)} file(s), {human_bytes(counts.source_bytes)}"),
        ("words", f"{len(counts):,} distinct, {counts.total_words:,} in all"),
        *([("pattern", counts.pattern_label)] if pattern.name != GPT2 else []),
        *([("unicode", f"{counts.unicode}'s character classes")] if counts.unicode != installed_unicode() else []),
        ("count", f"{counted - started:,.2f} s ({counts.source_bytes / max(counted - started, 1e-9) / 1e6:,.1f} MB/s)"),
        ("wrote", f"{path} ({human_bytes(path.stat().st_size)})"),
    ]
    for name, value in rows:
        print(f"{name:<8} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
