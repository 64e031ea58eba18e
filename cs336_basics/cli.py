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
import sys
from pathlib import Path

from . import TRAINERS, BPEInputError, TrainerUnavailable, train
from ._common import ENDOFTEXT
from .demo import write_demo_corpus
from .serialization import check_output_dir, save_tokenizer

DEFAULT_DATA = "data/owt_train.txt"
MISSING_DATA_HELP = """\
The training file {path} does not exist.
Download the data as the CS336 assignment describes, for example:
    mkdir -p data && cd data
    wget https://huggingface.co/datasets/stanford-cs336/owt-sample/resolve/main/owt_train.txt.gz
    gunzip owt_train.txt.gz
or train on the built-in demo corpus instead:
    python cs336_basics/test_trainer.py {trainer} {out} --demo"""


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
    parser.add_argument("-d", "--data", type=Path, default=None, help=f"training text, UTF-8 ({DEFAULT_DATA})")
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
            data = args.data or Path(DEFAULT_DATA)
            if not data.exists():
                print(MISSING_DATA_HELP.format(path=data, trainer=args.trainer, out=args.out_dir), file=sys.stderr)
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
    for name, value in rows:
        print(f"{name:<13} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
