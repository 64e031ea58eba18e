"""Train a BPE tokenizer from the command line (`cs336-train-bpe`, `python -m cs336_basics.cli`, or the
assignment's entry point `python cs336_basics/test_trainer.py`, which only calls `main` here).

    python cs336_basics/test_trainer.py bpe_v7 out -v 32000 -d data/owt_train.txt
    python -m cs336_basics.cli auto out --demo        # no download: a built-in corpus
    python -m cs336_basics.cli auto out -d part-*.txt --cluster local:2 --export hf,tiktoken
    python -m cs336_basics.cli auto out --counts counts-*.bin      # from cs336-count-words output

Several `-d` files are trained on as if concatenated (see `word_counts`): their words are counted by
the shared counter (native when built), on this machine or with `--cluster` on Dask, and the chosen
version runs its merge phase on the counts, which gives exactly what it gives on the concatenated file.

Shows progress bars for pre-tokenization and merges, prints how long each phase took and the peak
memory of the whole run (saving included), and writes vocab.json, merges.txt, vocab.pkl, merges.pkl
and the run's metadata bpe_run.json into OUT_DIR as one unit (see `serialization`): an interrupted
or failed run leaves the previous set in place, and two runs cannot write one directory at once.

Exit status: 0 done; 1 the run failed (out of memory, a file could not be read or written);
2 bad arguments or input, or OUT_DIR busy; 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM.
Either signal ends the run the same way: the message "interrupted", no output written.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from . import TRAINERS, BPEInputError, TrainerUnavailable, train
from ._common import ENDOFTEXT, MAX_WORKERS_PER_CORE, check_num_workers
from .demo import write_demo_corpus
from .serialization import OutputDirectory
from .trainers import TrainingResult, peak_rss_bytes

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

MISSING_DATA_HELP = """\
error: the training file {path} does not exist{where}.
Pass the UTF-8 text to train on with -d PATH, for example
    {prog} {trainer} {out} -d data/TinyStoriesV2-GPT4-train.txt
or train on the built-in demo corpus, no download needed:
    {prog} {trainer} {out} --demo
(the README's "Training data" section has the download commands for the assignment's datasets)"""


def how_invoked() -> str:
    """The command as the user typed it, to repeat it in advice: `python path/file.py` or the script name."""
    program = sys.argv[0] if sys.argv and sys.argv[0] else "cs336-train-bpe"
    return f"python {program}" if program.endswith(".py") else Path(program).name


def human_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.2f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def add_special_tokens_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--special",
        nargs="*",
        default=[ENDOFTEXT],
        metavar="TOKEN",
        help=f"special tokens, in vocabulary order ({ENDOFTEXT}); give none to use none",
    )


def add_cluster_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", metavar="SPEC", help="count on Dask: local, local:N or tcp://host:8786")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cs336-train-bpe",
        description="Train a byte-level BPE tokenizer with one of the cs336_basics trainer versions.",
    )
    parser.add_argument("trainer", choices=[*TRAINERS, "auto"], help="trainer version; auto = the fastest here")
    parser.add_argument("out_dir", type=Path, help="where vocab.pkl, merges.pkl, vocab.json, merges.txt go")
    parser.add_argument("-v", "--vocab-size", type=int, default=10_000, help="final vocabulary size (10000)")
    parser.add_argument(
        "-d",
        "--data",
        nargs="+",
        default=None,
        metavar="FILE",
        help="training text, UTF-8 (or --demo); several files are trained on as if concatenated",
    )
    parser.add_argument("--counts", nargs="+", metavar="FILE", help="train from count files (cs336-count-words)")
    add_cluster_argument(parser)
    parser.add_argument(
        "--export",
        default="",
        metavar="FORMATS",
        help="also write hf (tokenizer.json) and/or tiktoken (tokenizer.tiktoken), comma-separated",
    )
    add_special_tokens_argument(parser)
    parser.add_argument("--demo", action="store_true", help="train on the built-in demo corpus (made in OUT_DIR)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes (v3-v6) or threads (v7): a count, or -1 = all cores, -2 = all but one (all)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if sum(option is not None and option is not False for option in (args.demo, args.data, args.counts)) > 1:
        parser.error("--demo, --data and --counts exclude each other")
    if not args.demo and args.data is None and not args.counts:
        # No default file: a guessed path that happens to be missing explains less than this.
        parser.error("say what to train on: -d PATH (UTF-8 text), --counts FILE, or --demo (a built-in corpus)")
    if args.counts and args.cluster:
        parser.error("--cluster counts text; --counts files are already counted")
    args.export = [name.strip() for name in args.export.split(",") if name.strip()]
    unknown = sorted(set(args.export) - set(EXPORTS))
    if unknown:
        parser.error(f"--export: unknown format(s) {unknown}; choose from {', '.join(EXPORTS)}")
    return args


EXPORTS = ("hf", "tiktoken")


def export_files(out_dir: Path, formats: list[str], vocab, merges, special_tokens: list[str]) -> dict[str, Path]:
    from .export import save_hf_tokenizer_json, save_tiktoken_ranks

    paths = {}
    if "hf" in formats:
        paths["tokenizer.json"] = save_hf_tokenizer_json(out_dir / "tokenizer.json", vocab, merges, special_tokens)
    if "tiktoken" in formats:
        paths["tokenizer.tiktoken"] = save_tiktoken_ranks(out_dir / "tokenizer.tiktoken", vocab, special_tokens)
    return paths


def train_from_sources(
    args: argparse.Namespace, trainer: str | None, data: list[str], num_workers: int | None
) -> tuple[TrainingResult, str]:
    """Training on count files, or on several files / a cluster by counting first; returns the
    result and a description of the data."""
    from .count_cli import count_inputs
    from .trainers import train_from_counts
    from .word_counts import WordCounts

    started = time.perf_counter()
    if args.counts:
        counts = WordCounts.load_all(args.counts)
        described = f"{len(args.counts)} count file(s) of {human_bytes(counts.source_bytes)} of text"
    else:
        progress = not args.quiet
        counts = count_inputs(data, args.special, cluster=args.cluster, num_threads=num_workers, progress=progress)
        where = f"counted on {args.cluster}" if args.cluster else "read as concatenated"
        described = f"{len(data)} file(s), {human_bytes(counts.source_bytes)}, {where}"
    counted = time.perf_counter()
    result = train_from_counts(counts, args.vocab_size, args.special, trainer=trainer, progress=not args.quiet)
    first_phase = "read counts" if args.counts else "count"
    result.seconds = {
        first_phase: counted - started,
        "merge": result.seconds["merge"],
        "total": time.perf_counter() - started,
    }
    return result, described


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptHandling:
    """While active, SIGINT and SIGTERM raise `Interrupted` in the main thread, and are remembered:
    an exception raised where Python ignores it (in a `__del__`, say) cannot let the run carry on,
    because the driver calls `check()` between phases. A second signal ends the process at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> InterruptHandling:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.received = signum
        raise Interrupted(signum)

    def check(self) -> None:
        if self.received is not None:
            raise Interrupted(self.received)


def _workers_option(requested: int | None) -> dict[str, int]:
    """`--workers` as the trainers' option, checked before any work; a capped count is reported."""
    workers = check_num_workers(requested, "--workers")
    if workers is None:
        return {}
    if requested is not None and requested > workers:
        print(f"note: --workers {requested} capped at {workers} ({MAX_WORKERS_PER_CORE} per core)", file=sys.stderr)
    return {"num_workers": workers}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with InterruptHandling() as interrupts:
        try:
            return _run(args, interrupts)
        except KeyboardInterrupt as interrupt:
            print("interrupted", file=sys.stderr)
            return 128 + getattr(interrupt, "signum", signal.SIGINT)


def _run(args: argparse.Namespace, interrupts: InterruptHandling) -> int:
    trainer = None if args.trainer == "auto" else args.trainer
    data: Path | None = None
    try:
        options = _workers_option(args.workers)
        with OutputDirectory(args.out_dir) as output:  # checked and locked before training, not after
            if args.demo:
                data = output.path / "demo_corpus.txt"
                if not data.exists():
                    write_demo_corpus(data)
            elif not args.counts:
                sources = args.data
                for source in sources:
                    if "://" not in source and not Path(source).exists():
                        where = "" if Path(source).is_absolute() else f" (looked in {Path.cwd()})"
                        advice = MISSING_DATA_HELP.format(
                            path=source, where=where, prog=how_invoked(), trainer=args.trainer, out=args.out_dir
                        )
                        print(advice, file=sys.stderr)
                        return EXIT_BAD_INPUT
                data = Path(sources[0])
            if args.counts or args.cluster or (args.data and len(args.data) > 1):
                sources = args.data or ([str(data)] if data else [])
                result, described = train_from_sources(args, trainer, sources, options.get("num_workers"))
            else:
                result = train(data, args.vocab_size, args.special, trainer=trainer, progress=not args.quiet, **options)
                described = f"{data} ({human_bytes(data.stat().st_size)})"
            interrupts.check()
            paths = output.save(result.vocab, result.merges, args.special, details={"trainer": result.trainer})
            paths.update(export_files(output.path, args.export, result.vocab, result.merges, args.special))
    except (BPEInputError, TrainerUnavailable, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        advice = "try fewer --workers, a smaller vocabulary or a smaller input"
        print(f"error: out of memory while training on {data} ({advice})", file=sys.stderr)
        return EXIT_FAILED
    except OSError as error:
        name = f"{error.filename}: " if error.filename else ""
        print(f"error: {name}{error.strerror or error}", file=sys.stderr)
        return EXIT_FAILED

    rows = [
        ("trainer", result.trainer),
        ("data", described),
        ("vocab", f"{len(result.vocab):,} ({len(result.merges):,} merges)"),
        ("words", f"{result.num_words:,} distinct pre-tokens"),
        *(
            [("note", f"stopped early: no pair left to merge after {len(result.merges):,} merges")]
            if len(result.vocab) < args.vocab_size
            else []
        ),
        *((phase, f"{seconds:,.2f} s") for phase, seconds in result.seconds.items()),
        ("peak memory", human_bytes(peak_rss_bytes())),  # now, so that saving counts too
        ("wrote", ", ".join(str(path) for path in paths.values())),
    ]
    try:
        for name, value in rows:
            print(f"{name:<13} {value}")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (`| head`); everything is saved, so stop quietly as other tools do. Python
        # would flush stdout again at exit and fail there too: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
