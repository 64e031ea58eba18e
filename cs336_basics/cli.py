"""Train a BPE tokenizer from the command line (`cs336-train-bpe`, `python -m cs336_basics.cli`, or the
assignment's entry point `python cs336_basics/test_trainer.py`, which only calls `main` here).

    python cs336_basics/test_trainer.py bpe_v7 out -v 32000 -d data/owt_train.txt
    python -m cs336_basics.cli auto out --demo        # no download: a built-in corpus

Shows progress bars for pre-tokenization and merges, prints how long each phase took and the peak
memory, and writes vocab.pkl, merges.pkl, vocab.json and merges.txt into OUT_DIR (each written to a
temporary file and renamed, so an interrupted run leaves no half-written output).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import TRAINERS, BPEInputError, TrainerUnavailable, train
from ._common import ENDOFTEXT
from .demo import write_demo_corpus
from .serialization import check_output_dir, save_tokenizer

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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cs336-train-bpe",
        description="Train a byte-level BPE tokenizer with one of the cs336_basics trainer versions.",
    )
    parser.add_argument("trainer", choices=[*TRAINERS, "auto"], help="trainer version; auto = the fastest here")
    parser.add_argument("out_dir", type=Path, help="where vocab.pkl, merges.pkl, vocab.json, merges.txt go")
    parser.add_argument("-v", "--vocab-size", type=int, default=10_000, help="final vocabulary size (10000)")
    parser.add_argument("-d", "--data", type=Path, default=None, help="training text, UTF-8 (or --demo)")
    parser.add_argument(
        "--special",
        nargs="*",
        default=[ENDOFTEXT],
        metavar="TOKEN",
        help=f"special tokens, in vocabulary order ({ENDOFTEXT}); give none to use none",
    )
    parser.add_argument("--demo", action="store_true", help="train on the built-in demo corpus (made in OUT_DIR)")
    parser.add_argument("--workers", type=int, default=None, help="processes (v3-v6) or threads (v7); -1 = all")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.demo and args.data is not None:
        parser.error("--demo and --data exclude each other")
    if not args.demo and args.data is None:
        # No default file: a guessed path that happens to be missing explains less than this.
        parser.error("say what to train on: -d PATH (a UTF-8 text file), or --demo for the built-in corpus")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trainer = None if args.trainer == "auto" else args.trainer
    try:
        out_dir = check_output_dir(args.out_dir)  # fail before training, not after
        if args.demo:
            data = out_dir / "demo_corpus.txt"
            if not data.exists():
                write_demo_corpus(data)
        else:
            data = args.data
            if not data.exists():
                where = "" if data.is_absolute() else f" (looked in {Path.cwd()})"
                prog = how_invoked()
                print(
                    MISSING_DATA_HELP.format(path=data, where=where, prog=prog, trainer=args.trainer, out=args.out_dir),
                    file=sys.stderr,
                )
                return 2
        options = {} if args.workers is None else {"num_workers": args.workers}
        result = train(data, args.vocab_size, args.special, trainer=trainer, progress=not args.quiet, **options)
        paths = save_tokenizer(out_dir, result.vocab, result.merges)
    except (BPEInputError, TrainerUnavailable, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    rows = [
        ("trainer", result.trainer),
        ("data", f"{data} ({human_bytes(data.stat().st_size)})"),
        ("vocab", f"{len(result.vocab):,} ({len(result.merges):,} merges)"),
        ("words", f"{result.num_words:,} distinct pre-tokens"),
        *(
            [("note", f"stopped early: no pair left to merge after {len(result.merges):,} merges")]
            if len(result.vocab) < args.vocab_size
            else []
        ),
        *((phase, f"{seconds:,.2f} s") for phase, seconds in result.seconds.items()),
        ("peak memory", human_bytes(result.peak_rss_bytes)),
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
