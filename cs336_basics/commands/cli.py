"""Train a BPE tokenizer from the command line (`cs336-train-bpe`, `python -m cs336_basics.commands.cli`, or the
assignment's entry point `python cs336_basics/test_trainer.py`, which only calls `main` here).

    python cs336_basics/test_trainer.py bpe_v7 out -v 32000 -d data/owt_train.txt
    python -m cs336_basics.commands.cli auto out --demo        # no download: a built-in corpus
    python -m cs336_basics.commands.cli auto out -d part-*.txt --cluster local:2 --export hf,tiktoken
    python -m cs336_basics.commands.cli auto out --counts counts-*.bin      # from cs336-count-words output

Several `-d` files are trained on as if concatenated (see `word_counts`): their words are counted by
the shared counter (native when built), on this machine or with `--cluster` on Dask, and the chosen
version runs its merge phase on the counts, which gives exactly what it gives on the concatenated file.

Shows progress bars for pre-tokenization and merges, prints how long each phase took and the peak
memory of the whole run (saving included), and writes vocab.json, merges.txt, vocab.pkl, merges.pkl
and the run's metadata bpe_run.json into OUT_DIR as one unit (see `serialization`): an interrupted
or failed run leaves the previous set in place, and two runs cannot write one directory at once.

Exit status: 0 done; 1 the run failed (out of memory, a file could not be read or written);
2 bad arguments or input, or OUT_DIR busy; 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM.
Either signal ends the run the same way: the message "interrupted", no output written. Once the
output is in place the run has succeeded: a signal that comes later ends it with exit status 0 and
a note saying so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import TRAINERS, BPEInputError, TrainerUnavailable, train
from ..ingest.cluster import ClusterTaskError  # Dask itself is imported only for --cluster
from ..ingest.plan import plan_inputs
from ..ingest.route import Route, count_plan_by_route, route
from ..ingest.sources import expand_inputs, is_url
from ..native.backend import threads_that_fit
from ..outputs.export import check_exportable, export_files, export_formats, export_row
from ..outputs.serialization import OutputDirectory, large_tokens_note, run_rules
from ..rules.contract import ENDOFTEXT, MAX_WORKERS_PER_CORE, check_num_workers
from ..rules.merge_limits import MergeLimits
from ..rules.pattern import GPT2, installed_unicode, pattern_label
from ..rules.presets import PRESETS, TrainingRules, preset_special_tokens, refuse_by_lines, resolve_rules
from ..rules.start_from import Base, load_base, num_new_merges, run_special_tokens
from ..rules.tie_break import CS336
from ..superbpe import check_transition, superbpe_record, superword_rules, train_in_two_stages
from ..trainers import TrainingResult, peak_rss_bytes, train_after_counting
from .command_line import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    InterruptHandling,
    add_cluster_argument,
    add_format_arguments,
    add_rule_arguments,
    add_special_tokens_argument,
    broken_link_message,
    how_invoked,
    human_bytes,
    output_path_argument,
)
from .demo import write_demo_corpus

if TYPE_CHECKING:
    from ..ingest.word_counts import WordCounts
from ..rules.vocab_layout import CS336_LAYOUT

MISSING_DATA_HELP = """\
error: the training file {path} does not exist{where}.
Pass the UTF-8 text to train on with -d PATH, for example
    {prog} {trainer} {out} -d data/TinyStoriesV2-GPT4-train.txt
or train on the built-in demo corpus, no download needed:
    {prog} {trainer} {out} --demo
(the README's "Train a tokenizer" section has the download commands for the assignment's datasets)"""


def vocab_sizes_argument(text: str) -> list[int]:
    """`-v 32000` or `-v 8000,16000,32000`: the sizes, ascending, each once."""
    try:
        sizes = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size or comma-separated sizes, got {text!r}") from None
    return sizes


def output_directories(out_dir: Path, vocab_sizes: list[int]) -> list[Path]:
    """Where each size's output set goes: OUT_DIR itself for one size, OUT_DIR/vSIZE/ for several."""
    if len(vocab_sizes) == 1:
        return [out_dir]
    return [out_dir / f"v{size}" for size in vocab_sizes]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cs336-train-bpe",
        description="Train a byte-level BPE tokenizer with one of the cs336_basics trainer versions.",
    )
    parser.add_argument("trainer", choices=[*TRAINERS, "auto"], help="trainer version; auto = the fastest here")
    parser.add_argument(
        "out_dir", type=output_path_argument, help="where vocab.pkl, merges.pkl, vocab.json, merges.txt go"
    )
    parser.add_argument(
        "-v",
        "--vocab-size",
        dest="vocab_sizes",
        type=vocab_sizes_argument,
        default=[10_000],
        metavar="SIZE[,SIZE...]",
        help="final vocabulary size (10000); several, comma-separated, come from one run into OUT_DIR/vSIZE/",
    )
    parser.add_argument(
        "-d",
        "--data",
        nargs="+",
        default=None,
        metavar="FILE",
        help="training data: UTF-8 text, compressed, JSON lines or Parquet; directories and globs expand to "
        "their files, sorted; several files are trained on as if concatenated",
    )
    add_format_arguments(parser)
    parser.add_argument("--counts", nargs="+", metavar="FILE", help="train from count files (cs336-count-words)")
    add_cluster_argument(parser)
    parser.add_argument(
        "--export",
        default="",
        metavar="FORMATS",
        help="also write, comma-separated: "
        + ", ".join(f"{name} ({', '.join(export_row(name).files)})" for name in export_formats()),
    )
    add_special_tokens_argument(parser)
    parser.set_defaults(special=None)  # <|endoftext|>, or the preset's own (--like nanochat): see below
    add_rule_arguments(parser)
    _add_superbpe_argument(parser)
    parser.add_argument(
        "--start-from",
        nargs="+",
        default=None,
        metavar="PATH",
        help="go on from this tokenizer, its ids and merges kept: a training directory, a directory holding "
        "vocab.json and merges.txt (or name both), an HF tokenizer.json or a tiktoken file (docs/START_FROM.md)",
    )
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
    if args.counts and (args.cluster or args.superbpe):
        parser.error(f"{'--cluster' if args.cluster else '--superbpe'} counts text; --counts files are already counted")
    if args.start_from is not None and len(args.start_from) > 2:
        parser.error("--start-from takes one path, or a vocab.json and a merges.txt")
    if args.special is None:
        args.special = list(PRESETS[args.like].special_tokens or [ENDOFTEXT]) if args.like else [ENDOFTEXT]
    args.export = [name.strip() for name in args.export.split(",") if name.strip()]
    unknown = sorted(set(args.export) - set(export_formats()))
    if unknown:
        parser.error(f"--export: unknown format(s) {unknown}; choose from {', '.join(export_formats())}")
    return args


def _add_superbpe_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--superbpe",
        type=int,
        default=None,
        metavar="T",
        help="superword tokens (SuperBPE): train to T tokens, then on to the vocab size with the superword "
        "pattern, whose pre-tokens span spaces (docs/SUPERBPE.md)",
    )


def _start_from_argument(paths: list[str]) -> str | tuple[str, str]:
    """--start-from's one path, or its vocab.json and merges.txt."""
    return paths[0] if len(paths) == 1 else (paths[0], paths[1])


def _rules_rows(result: TrainingResult, like: str | None) -> list[tuple[str, str]]:
    """The summary's rows for the rules a run trained by, where they are not CS336's."""
    rows = []
    if result.pattern.name != GPT2:
        rows.append(("pattern", pattern_label(result.pattern.regex)))
    if like is not None or result.pattern.unicode != installed_unicode():
        rows.append(("unicode", f"{result.pattern.unicode}'s character classes"))
    if result.tie_break != CS336:
        rows.append(("tie-break", result.tie_break))
    if result.layout != CS336_LAYOUT:
        rows.append(("ids", f"{result.layout}'s layout" + (f" (--like {like})" if like else "")))
    if result.limits.min_frequency:
        rows.append(("min frequency", str(result.limits.min_frequency)))
    if result.limits.max_token_length is not None:
        rows.append(("max token length", f"{result.limits.max_token_length} bytes"))
    if result.limits.max_words is not None:
        rows.append(("max words", f"{result.limits.max_words} per token (space-separated)"))
    if result.limits.no_colon_space:
        rows.append(("colon space", 'no new token holds ": " (--no-colon-space)'))
    return rows


def _superbpe_rows(result: TrainingResult) -> list[tuple[str, str]]:
    """The summary's row for SuperBPE's first stage (superbpe.py), if the run had one."""
    first = result.first_stage
    if first is None:
        return []
    return [("superbpe", f"{len(first.vocab):,} tokens by {first.pattern.label}, then superwords")]


def _stop_reason(limits: MergeLimits, left: str = " left") -> str:
    """Why training made no more merges, in the terms of the options that stopped it."""
    conditions, options = [], []
    if limits.min_frequency > 1:
        conditions.append(f"reaches the minimum frequency {limits.min_frequency:,}")
        options.append(f"--min-frequency {limits.min_frequency}")
    if limits.max_token_length is not None:
        conditions.append(f"makes a token under {limits.max_token_length:,} bytes")
        options.append(f"--max-token-length {limits.max_token_length}")
    if limits.max_words is not None:
        plural = "" if limits.max_words == 1 else "s"
        conditions.append(f"makes a token of at most {limits.max_words:,} word{plural}")
        options.append(f"--max-words {limits.max_words}")
    if limits.no_colon_space:
        conditions.append('makes a token without ": "')
        options.append("--no-colon-space")
    if not options:
        return f"no pair{left} to merge"
    return f"no pair{left} {' and '.join(conditions)} ({', '.join(options)})"


def _stop_notes(result: TrainingResult, sizes: list[int], sets: list[tuple]) -> list[tuple[str, str]]:
    """The summary's notes for the sizes (`-v`) a run could not reach: where it stopped, and why."""
    reason = _stop_reason(result.limits)
    if len(sizes) == 1:
        if len(result.vocab) >= sizes[0]:
            return []
        return [("note", f"stopped early at {len(result.vocab):,} tokens ({len(result.merges):,} merges): {reason}")]
    return [
        ("note", f"{output.path.name}/ stopped at {len(vocab):,} tokens, short of {size:,}: {reason}")
        for size, (output, vocab, _, _) in zip(sizes, sets)
        if len(vocab) < size
    ]


def _workers_option(requested: int | None) -> dict[str, int]:
    """`--workers` as the trainers' option, checked before any work; a capped count is reported."""
    workers = check_num_workers(requested, "--workers")
    if workers is None:
        return {}
    if requested is not None and requested > workers:
        print(f"note: --workers {requested} capped at {workers} ({MAX_WORKERS_PER_CORE} per core)", file=sys.stderr)
    fit = threads_that_fit(workers)
    if fit < workers:
        print(f"note: --workers {workers} runs as {fit}: the address-space limit has room for no more", file=sys.stderr)
    return {"num_workers": workers}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with InterruptHandling() as interrupts:
        try:
            code = _run(args, interrupts)
        except KeyboardInterrupt as interrupt:
            print("interrupted", file=sys.stderr)
            return 128 + getattr(interrupt, "signum", signal.SIGINT)
    note = interrupts.late_note()
    if note is not None:
        print(note, file=sys.stderr)
    return code


class _NoInput(Exception):
    """An input that is not there, with the whole message to print (the advice for a missing file)."""


def _run(args: argparse.Namespace, interrupts: InterruptHandling) -> int:
    """Checks, trains, saves every size's set and prints the summary; an exit status."""
    trainer = None if args.trainer == "auto" else args.trainer
    data: Path | None = None
    try:
        options, rules, start = _rules_and_base(args)
        with contextlib.ExitStack() as held:
            # Every output directory is checked and locked before training, not after.
            outputs = [
                held.enter_context(OutputDirectory(path)) for path in output_directories(args.out_dir, args.vocab_sizes)
            ]
            data = _training_data(args)
            result, described = _train_in_stages(args, trainer, data, options, rules, start)
            _refuse_no_merges(args, result, described)
            interrupts.check()
            details = _run_details(args, result, start)
            sets = _prepared_sets(args, result, outputs)
            written = _save_sets(sets, result, details, interrupts)
    except _NoInput as missing:
        print(missing, file=sys.stderr)
        return EXIT_BAD_INPUT
    except (BPEInputError, TrainerUnavailable, ValueError, ClusterTaskError, MemoryError, OSError) as error:
        return _failed(error, data)
    _print_summary(_summary_rows(args, result, described, start, sets, written))
    return 0


def _rules_and_base(args: argparse.Namespace) -> tuple[dict[str, int], TrainingRules, Base | None]:
    """The workers option, the rules and the base (--start-from), each checked before any work: a
    pattern an export cannot carry and a size that cannot hold the base are refused here."""
    options = _workers_option(args.workers)
    special_tokens = preset_special_tokens(args.like, args.special)  # refuses others than nanochat's
    start = None if args.start_from is None else load_base(_start_from_argument(args.start_from), special_tokens)
    rules = resolve_rules(
        args.pattern, args.tie_break, args.like, args.min_frequency, args.max_token_length, args.unicode,
        args.max_words, args.no_colon_space,
    ).from_base(start)  # a base's recorded pattern carries over unless --pattern says otherwise
    if args.superbpe is not None:
        check_transition(args.superbpe, args.vocab_sizes)
    # A pattern an export cannot carry (the tokenizers' own, the superword one for --superbpe): refused now.
    check_exportable(args.export, rules.pattern if args.superbpe is None else superword_rules(rules).pattern)
    sizes = [*args.vocab_sizes, *([] if args.superbpe is None else [args.superbpe])]
    for size in sizes if start is not None else []:  # each size holds the base, before training
        num_new_merges(start, size, run_special_tokens(start, args.special))
    return options, rules, start


def _training_data(args: argparse.Namespace) -> Path | None:
    """The demo corpus (written into OUT_DIR once), or the first of the -d inputs, each checked to
    exist (args.data becomes the expanded list); None for count files."""
    if args.demo:
        data = args.out_dir / "demo_corpus.txt"
        if not data.exists():
            write_demo_corpus(data)
        return data
    if args.counts:
        return None
    sources = args.data = expand_inputs(args.data)
    for source in sources:
        if is_url(source):
            continue
        if Path(source).is_symlink() and not Path(source).exists():
            # A loop or a dangling link: "does not exist" would send the user looking elsewhere.
            raise _NoInput(f"error: {broken_link_message(source, 'training file')}")
        if not Path(source).exists():
            where = "" if Path(source).is_absolute() else f" (looked in {Path.cwd()})"
            raise _NoInput(
                MISSING_DATA_HELP.format(
                    path=source, where=where, prog=how_invoked(), trainer=args.trainer, out=args.out_dir
                )
            )
    return Path(sources[0])


def _train_in_stages(
    args: argparse.Namespace,
    trainer: str | None,
    data: Path | None,
    options: dict[str, int],
    rules: TrainingRules,
    base: Base | None,
) -> tuple[TrainingResult, str]:
    """One run to the largest size; with --superbpe T, SuperBPE's two (`superbpe.train_in_two_stages`),
    each on the inputs as one run goes. Returns the result and a description of the data."""
    if args.superbpe is None:
        return _train_on_inputs(args, trainer, data, options, rules, base, args.vocab_sizes[-1])
    described: list[str] = []

    def run_stage(size: int, stage_rules: TrainingRules, stage_base: Base | None) -> TrainingResult:
        result, about = _train_on_inputs(args, trainer, data, options, stage_rules, stage_base, size)
        described.append(about)
        return result

    return train_in_two_stages(run_stage, args.superbpe, args.vocab_sizes[-1], rules, base), described[-1]


def _train_on_inputs(
    args: argparse.Namespace,
    trainer: str | None,
    data: Path | None,
    options: dict[str, int],
    rules: TrainingRules,
    base: Base | None,
    vocab_size: int,
) -> tuple[TrainingResult, str]:
    """Training to `vocab_size` on count files, or on the inputs by the route `ingest.route` gives
    them: one local text file read by the version itself (`train`), anything else counted first, here
    or on the cluster, then merged; by `rules`, from `base` if given. Returns the result and a
    description of the data."""
    from ..ingest.word_counts import WordCounts

    if args.counts:
        refuse_by_lines(rules, "count files")
        result, counts = _train_after_counting(
            args, trainer, rules, base, options, vocab_size, "read counts", lambda: WordCounts.load_all(args.counts)
        )
        return result, f"{len(args.counts)} count file(s) of {human_bytes(counts.source_bytes)} of text"
    sources = args.data or [str(data)]
    # Inspected once: train and the counting read the plan, and the description asks it what the file is.
    plan = plan_inputs(sources, args.format, args.text_field, skip_bad_records=args.skip_bad_records)
    way = route(plan, args.cluster, rules)  # hf-files: one local text file, or refused here
    if way is Route.VERSION:
        result = train(
            plan, vocab_size, args.special, trainer=trainer, progress=not args.quiet, rules=rules,
            start_from=base, **options,
        )  # fmt: skip
        return result, f"{sources[0]} ({human_bytes(Path(sources[0]).stat().st_size)})"

    def count() -> WordCounts:
        return count_plan_by_route(
            plan,
            run_special_tokens(base, args.special) if base else args.special,
            cluster=args.cluster,
            cluster_timeout=args.cluster_timeout,
            num_workers=options.get("num_workers"),
            progress=not args.quiet,
            pattern=rules.pattern,
        )

    result, counts = _train_after_counting(args, trainer, rules, base, options, vocab_size, "count", count)
    where = f", counted on {args.cluster}" if way is Route.CLUSTER else ""
    if len(sources) == 1:
        return result, f"{sources[0]} ({human_bytes(counts.source_bytes)} of text{where})"
    where = where or ", read as concatenated"
    return result, f"{len(sources)} files, {human_bytes(counts.source_bytes)} of text{where}"


def _train_after_counting(
    args: argparse.Namespace,
    trainer: str | None,
    rules: TrainingRules,
    base: Base | None,
    options: dict[str, int],
    vocab_size: int,
    first_phase: str,
    count: Callable[[], WordCounts],
) -> tuple[TrainingResult, WordCounts]:
    # Count files keep their own pattern unless one is asked for, or a base's (TrainingRules.for_counts).
    return train_after_counting(
        count,
        vocab_size,
        args.special,
        trainer=trainer,
        progress=not args.quiet,
        first_phase=first_phase,
        num_workers=options.get("num_workers"),
        rules=rules,
        base=base,
    )


def _refuse_no_merges(args: argparse.Namespace, result: TrainingResult, described: str) -> None:
    """A run asked for merges that made none: refused, saying why, before anything is written."""
    base = 256 + len(args.special)
    if not result.merges and args.vocab_sizes[-1] > base:
        if result.limits.min_frequency > 1 or result.limits.bounds_tokens:
            raise BPEInputError(f"no merge made from {described}: {_stop_reason(result.limits, left='')}")
        # Text whose every pre-token is one byte (a stray 2-byte readme.md): a vocabulary of bytes alone.
        raise BPEInputError(
            f"nothing to train on in {described}: no pre-token has two bytes to merge "
            f"(-v {base} makes the tokenizer of bytes and special tokens alone)"
        )


def _run_details(args: argparse.Namespace, result: TrainingResult, start: Base | None) -> dict:
    """What bpe_run.json records of the run besides its files; the notes about the result, said on
    stderr before the (long) writing they explain."""
    details = {
        "trainer": result.trainer,
        **run_rules(result),
    }
    if start is not None:
        kept = {"tokens": len(start.vocab), "merges": len(start.merges)}
        details["start_from"] = {"source": start.source, **kept}
    if result.first_stage is not None:
        details["superbpe"] = {"transition": args.superbpe, **superbpe_record(result)}
    note = large_tokens_note(result.vocab)
    if note is not None:
        print(note, file=sys.stderr)
    if result.unmatched_bytes:  # a custom pattern's: noted on stderr as training ended
        details["unmatched_text"] = {"bytes": result.unmatched_bytes, "of_bytes": result.matchable_bytes}
        label = pattern_label(result.pattern.regex)
        for name in args.export:
            dropped = export_row(name).unmatched_note  # an export that leaves that text out says so
            if dropped is not None:
                print(f"note: --export {name}: {dropped.format(pattern=label)}", file=sys.stderr)
    return details


def _prepared_sets(args: argparse.Namespace, result: TrainingResult, outputs: list[OutputDirectory]) -> list[tuple]:
    """Each size's set, exports included, made before any is written, so a failed export writes none:
    (output, vocab, merges, exports)."""
    sets = []
    for size, output in zip(args.vocab_sizes, outputs):
        vocab, merges = result.for_vocab_size(size)
        # A base's special tokens join the run's (start_from.run_special_tokens).
        exports = export_files(args.export, vocab, merges, result.special_tokens, pattern=result.pattern)
        sets.append((output, vocab, merges, exports))
    return sets


def _save_sets(sets: list[tuple], result: TrainingResult, details: dict, interrupts: InterruptHandling) -> list:
    """Every set written; the exports join their set: listed in bpe_run.json, moved in with the rest.
    Once the first set is in place the run has succeeded: a later signal is only noted."""
    return [
        output.save(
            vocab,
            merges,
            result.special_tokens,
            details=details,
            exports=exports,
            on_commit=interrupts.output_in_place,
        )
        for output, vocab, merges, exports in sets
    ]


def _failed(error: BaseException, data: Path | None) -> int:
    """A run that failed, said on stderr: its exit status (bad input 2, anything else 1)."""
    if isinstance(error, (BPEInputError, TrainerUnavailable, ValueError)):
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(error, MemoryError):
        advice = "try fewer --workers, a smaller vocabulary or a smaller input"
        print(f"error: out of memory while training on {data} ({advice})", file=sys.stderr)
    elif isinstance(error, OSError):
        name = f"{error.filename}: " if error.filename else ""
        print(f"error: {name}{error.strerror or error}", file=sys.stderr)
    else:  # ClusterTaskError
        print(f"error: {error}", file=sys.stderr)
    return EXIT_FAILED


def _summary_rows(
    args: argparse.Namespace,
    result: TrainingResult,
    described: str,
    start: Base | None,
    sets: list[tuple],
    written: list,
) -> list[tuple[str, str]]:
    """The summary printed after a run: what it trained on and by, what it made, how long it took."""
    return [
        ("trainer", result.trainer),
        ("data", described),
        *([("start from", f"{start.source} ({len(start.vocab):,} tokens kept)")] if start is not None else []),
        *_superbpe_rows(result),
        ("vocab", f"{len(result.vocab):,} ({len(result.merges):,} merges)"),
        ("words", f"{result.num_words:,} distinct pre-tokens"),
        *(
            [("unmatched", f"{human_bytes(result.unmatched_bytes)} of the text in no pre-token (see the note)")]
            if result.unmatched_bytes
            else []
        ),
        *_rules_rows(result, args.like),
        *_stop_notes(result, args.vocab_sizes, sets),
        *((phase, f"{seconds:,.2f} s") for phase, seconds in result.seconds.items()),
        ("peak memory", human_bytes(peak_rss_bytes())),  # now, so that saving counts too
        *(
            [("wrote", ", ".join(str(path) for path in written[0].values()))]
            if len(written) == 1
            else [("wrote", f"{output.path}/ ({len(vocab):,} tokens)") for output, vocab, _, _ in sets]
        ),
    ]


def _print_summary(rows: list[tuple[str, str]]) -> None:
    try:
        for name, value in rows:
            print(f"{name:<13} {value}")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (`| head`); everything is saved, so stop quietly as other tools do. Python
        # would flush stdout again at exit and fail there too: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
