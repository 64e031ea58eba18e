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
memory, and writes vocab.pkl, merges.pkl, vocab.json and merges.txt into OUT_DIR (each written to a
temporary file and renamed, so an interrupted run leaves no half-written output).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cs336_basics import TRAINERS, BPEInputError, TrainerUnavailable, train
from cs336_basics._common import ENDOFTEXT
from cs336_basics.demo import write_demo_corpus
from cs336_basics.serialization import check_output_dir, save_tokenizer
from cs336_basics.trainers import TrainingResult

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
    parser.add_argument(
        "-d",
        "--data",
        nargs="+",
        default=None,
        metavar="FILE",
        help=f"training text, UTF-8 ({DEFAULT_DATA}); several files are trained on as if concatenated",
    )
    parser.add_argument("--counts", nargs="+", metavar="FILE", help="train from count files (cs336-count-words)")
    parser.add_argument("--cluster", metavar="SPEC", help="count on Dask: local, local:N or tcp://host:8786")
    parser.add_argument(
        "--export",
        default="",
        metavar="FORMATS",
        help="also write hf (tokenizer.json) and/or tiktoken (tokenizer.tiktoken), comma-separated",
    )
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
    if sum(option is not None and option is not False for option in (args.demo, args.data, args.counts)) > 1:
        parser.error("--demo, --data and --counts exclude each other")
    if args.counts and args.cluster:
        parser.error("--cluster counts text; --counts files are already counted")
    args.export = [name.strip() for name in args.export.split(",") if name.strip()]
    unknown = sorted(set(args.export) - set(EXPORTS))
    if unknown:
        parser.error(f"--export: unknown format(s) {unknown}; choose from {', '.join(EXPORTS)}")
    return args


EXPORTS = ("hf", "tiktoken")


def export_files(out_dir: Path, formats: list[str], vocab, merges, special_tokens: list[str]) -> dict[str, Path]:
    from cs336_basics.export import save_hf_tokenizer_json, save_tiktoken_ranks

    paths = {}
    if "hf" in formats:
        paths["tokenizer.json"] = save_hf_tokenizer_json(out_dir / "tokenizer.json", vocab, merges, special_tokens)
    if "tiktoken" in formats:
        paths["tokenizer.tiktoken"] = save_tiktoken_ranks(out_dir / "tokenizer.tiktoken", vocab, special_tokens)
    return paths


def train_from_sources(args: argparse.Namespace, trainer: str | None, data: list[str]) -> tuple[TrainingResult, str]:
    """Training on count files, or on several files / a cluster by counting first; returns the
    result and a description of the data."""
    from cs336_basics.trainers import train_from_counts
    from cs336_basics.word_counts import WordCounts, count_words

    started = time.perf_counter()
    if args.counts:
        counts = WordCounts.load_all(args.counts)
        described = f"{len(args.counts)} count file(s) of {human_bytes(counts.source_bytes)} of text"
    elif args.cluster:
        from cs336_basics.cluster import connect, count_words_on_cluster

        with connect(args.cluster) as client:
            counts = count_words_on_cluster(client, data, args.special, progress=not args.quiet)
        described = f"{len(data)} file(s), {human_bytes(counts.source_bytes)}, counted on {args.cluster}"
    else:
        counts = count_words(data, args.special, num_threads=args.workers, progress=not args.quiet)
        described = f"{len(data)} file(s), {human_bytes(counts.source_bytes)}, read as concatenated"
    counted = time.perf_counter()
    result = train_from_counts(counts, args.vocab_size, args.special, trainer=trainer, progress=not args.quiet)
    first_phase = "read counts" if args.counts else "count"
    result.seconds = {
        first_phase: counted - started,
        "merge": result.seconds["merge"],
        "total": time.perf_counter() - started,
    }
    return result, described


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trainer = None if args.trainer == "auto" else args.trainer
    try:
        out_dir = check_output_dir(args.out_dir)  # fail before training, not after
        data: Path | None = None
        if args.demo:
            data = out_dir / "demo_corpus.txt"
            if not data.exists():
                write_demo_corpus(data)
        elif not args.counts:
            sources = args.data or [DEFAULT_DATA]
            for source in sources:
                if "://" not in source and not Path(source).exists():
                    print(
                        MISSING_DATA_HELP.format(path=source, trainer=args.trainer, out=args.out_dir), file=sys.stderr
                    )
                    return 2
            data = Path(sources[0])
        if args.counts or args.cluster or (args.data and len(args.data) > 1):
            result, described = train_from_sources(args, trainer, args.data or ([str(data)] if data else []))
        else:
            options = {} if args.workers is None else {"num_workers": args.workers}
            result = train(data, args.vocab_size, args.special, trainer=trainer, progress=not args.quiet, **options)
            described = f"{data} ({human_bytes(data.stat().st_size)})"
        paths = save_tokenizer(out_dir, result.vocab, result.merges)
        paths.update(export_files(out_dir, args.export, result.vocab, result.merges, args.special))
    except (BPEInputError, TrainerUnavailable, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

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
        ("peak memory", human_bytes(result.peak_rss_bytes)),
        ("wrote", ", ".join(str(path) for path in paths.values())),
    ]
    for name, value in rows:
        print(f"{name:<13} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
