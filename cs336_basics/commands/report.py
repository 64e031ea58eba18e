"""A tokenizer report: compression, throughput and the vocabulary's longest tokens, for the assignment's
tokenizer experiments (including the cross-domain one: a TinyStories tokenizer on OpenWebText text).

    cs336-bpe-report out/ts10k out/owt32k --text data/ts_valid.txt data/owt_valid.txt --sample-docs 10
    python -m cs336_bpe.commands.report out/ts10k out/owt32k --text data/ts_valid.txt data/owt_valid.txt -o out/report

Tokenizer directories are the positional arguments (what the training CLI wrote: vocab.json and
merges.txt, else vocab.pkl and merges.pkl, checked against bpe_run.json, whose special tokens are
used); texts follow `--text` (it may be repeated). Every tokenizer encodes every text.

Comparing against a baseline (`--baseline DIR`): DIR is one of the tokenizer directories, or another
that joins them (measured first). Each other tokenizer's result on each text gets `vs_baseline`: the
baseline's tokens and bytes per token on the same bytes (the same whole text or the same sample) and
`token_change` (tokens / the baseline's - 1: -0.155 is 15.5% fewer tokens), and the table a column
of it. This is how a superword (SuperBPE) tokenizer is held against plain BPE of the same size:

    cs336-bpe-report out/superword --baseline out/plain --text heldout.txt -o out/compare

Tokenizers of another vocabulary size than the baseline's are compared all the same, with a note
saying the sizes (bytes per token grows with the vocabulary: compare at the same size).

Where the report goes:
    default        each tokenizer directory gets `report.json` (that tokenizer on every text) and
                   `report.png`: the report belongs to the tokenizer, beside the files it describes
    --output DIR   one combined `DIR/report.json` and `DIR/report.png`, tokenizers side by side (the
                   comparison the assignment asks for)
Both files have the same layout (a "tokenizers" list, one entry per tokenizer). Each is written to a
temporary file and renamed over the old one, so a reader never sees half a report. The picture needs
matplotlib; without it the JSON is still written and one line says how to get the picture.

What is measured, per tokenizer and text:
    bytes, tokens  whole text: the file's bytes and `len(tokenizer.encode(text))` (special tokens
                   included, each one token); sampled: the sampled documents' bytes and the sum of
                   their token counts (documents are encoded one by one, without the separator)
    bytes_per_token  bytes / tokens: higher is better compression
    mb_per_s       bytes / 10**6 / seconds spent encoding (reading, scanning and sampling excluded
                   for samples; the whole-file path memory-maps the file, so its reads are included).
                   The compiled encoder runs on `--threads` threads (default: every core); the count
                   is recorded, compare throughputs only at the same count. One-time set-up is paid
                   before the clock starts; still, under 1 MB of text the time is mostly noise (a
                   note says so): measure speed on whole texts
    documents      the text split on the separator (`--separator`, default: the first tokenizer's
                   first special token, else <|endoftext|>), pieces of ASCII whitespace only left out

Sampling (`--sample-docs N`, `--seed S`): the text is read once in fixed-size blocks, and the byte
spans (start, end) of its documents are reservoir-sampled (Algorithm R, `random.Random(S)`) as they
go by; only then are the N sampled documents read. Memory holds N spans and the sampled documents,
never the file, and the sample depends only on the file, N, the separator and S (not on the block
size or the tokenizers): every tokenizer encodes the same documents. The same pass validates UTF-8,
so bad input is refused before any encoding; without sampling it counts the documents.

Exit status, as for the other commands: 0 done; 2 bad arguments or input (a missing directory, a file
in its place, one holding no tokenizer or damaged files; a missing or unreadable text, text not
UTF-8, an output directory that cannot be written); 1 the run failed (a report that could not be
written, out of memory); one line on stderr; 130/143 interrupted (SIGINT/SIGTERM).
"""

from __future__ import annotations

import argparse
import codecs
import datetime
import io
import json
import os
import random
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..native.backend import effective_num_threads
from ..outputs.serialization import check_output_dir, read_run_info, recorded_rules, write_atomically
from ..progress import progress_bar
from ..rules.contract import ENDOFTEXT, BPEInputError, check_num_workers, check_text_file, invalid_utf8_error
from ..tokenizer import Tokenizer
from .command_line import EXIT_BAD_INPUT, EXIT_FAILED, InterruptHandling

REPORT_FILE = "report.json"
PICTURE_FILE = "report.png"
REPORT_FORMAT = "cs336_bpe tokenizer report"
REPORT_FORMAT_VERSION = 1
LONGEST_TOKENS = 10
BASELINE_COLUMN = "tokens vs baseline"
PICTURE_HINT = 'note: report.png needs matplotlib: pip install "cs336-bpe[report]"'
SMALL_SAMPLE_NOTE = "note: MB/s of under 1 MB of text is mostly start-up noise; measure speed on whole texts"
# Below this many bytes an encode takes milliseconds, and thread wake-ups and first touches of the
# encoder's cache pages, not the tokenizer's speed, decide the time.
_STEADY_BYTES = 10**6

# Files are scanned in blocks of this size: large enough that the per-block Python work vanishes, small
# enough that memory does not matter.
_SCAN_BLOCK_BYTES = 1 << 22
# Sampled documents go to encode_batch in groups of about this many bytes: enough to keep every thread
# busy, few enough groups that the progress bar moves.
_BATCH_BYTES = 1 << 23
# "Blank" is decided on bytes, so that scanning never decodes a document; ASCII whitespace is what
# separates documents in practice (TinyStories puts a newline on each side of <|endoftext|>).
_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


@dataclass
class TextInput:
    """A text to encode, scanned once and shared by every tokenizer."""

    path: Path
    name: str
    size: int = 0
    documents_in_file: int = 0
    # Only when sampling: the sampled documents, in file order, and their byte lengths.
    documents: list[str] | None = None
    document_bytes: list[int] = field(default_factory=list)


@dataclass
class LoadedTokenizer:
    path: Path
    name: str
    tokenizer: Tokenizer


# ---------------------------------------------------------------------------------------------
# Loading


def load_tokenizer_dir(directory: str | os.PathLike, **options: Any) -> Tokenizer:
    """The tokenizer a training run wrote into `directory`, with the run's special tokens.

    GPT-2's vocab.json/merges.txt are preferred (the documented default); the pickles are the fallback
    for a directory holding only those. Both go through `Tokenizer.from_files`, which checks them
    against bpe_run.json."""
    path = Path(directory)
    if not path.exists():
        raise BPEInputError(f"tokenizer directory not found: {path}")
    if not path.is_dir():
        raise BPEInputError(f"not a directory: {path} (give the directory a training run wrote)")
    for vocab_name, merges_name in (("vocab.json", "merges.txt"), ("vocab.pkl", "merges.pkl")):
        if (path / vocab_name).is_file() and (path / merges_name).is_file():
            return Tokenizer.from_files(path / vocab_name, path / merges_name, **options)
    raise BPEInputError(f"{path} holds no tokenizer: neither vocab.json + merges.txt nor vocab.pkl + merges.pkl")


def _labels(paths: Sequence[Path]) -> list[str]:
    """Short names for the table and the picture: the last path component, or the path as given where
    two would share a name."""
    names = [path.name or path.resolve().name or str(path) for path in paths]
    repeated = {name for name, count in Counter(names).items() if count > 1}
    return [str(path) if name in repeated else name for path, name in zip(paths, names)]


# ---------------------------------------------------------------------------------------------
# Scanning and sampling


def scan_documents(
    path: str | os.PathLike,
    separator: str,
    sample_docs: int | None = None,
    seed: int = 0,
    progress: Callable[[int], object] | None = None,
) -> tuple[int, list[tuple[int, int]]]:
    """(number of documents, sampled spans) of the UTF-8 file at `path`, in one pass over it.

    A document is the text between two separators (or the file's ends) holding something other than
    ASCII whitespace. With `sample_docs`, up to that many documents' byte spans `(start, end)` are
    reservoir-sampled with `random.Random(seed)`, returned in file order; otherwise none. Invalid
    UTF-8 is refused with its byte offset."""
    if not separator:
        raise BPEInputError("the document separator must not be empty")
    needle = separator.encode("utf-8")
    keep = len(needle) - 1  # bytes at a block's end that may begin a separator: looked at next time
    rng = random.Random(seed)
    spans: list[tuple[int, int]] = []
    count = 0

    def finish(start: int, end: int) -> None:
        nonlocal count
        if sample_docs is not None:
            # Algorithm R: document `count` replaces a random slot with probability sample_docs/(count+1),
            # which leaves every document seen so far in the sample with the same probability.
            if count < sample_docs:
                spans.append((start, end))
            else:
                slot = rng.randrange(count + 1)
                if slot < sample_docs:
                    spans[slot] = (start, end)
        count += 1

    decoder = codecs.getincrementaldecoder("utf-8")()
    doc_start = 0
    doc_filled = False
    carried = b""
    base = 0  # offset in the file of carried[0]
    offset = 0  # bytes read so far
    with open(path, "rb") as file:
        while True:
            block = file.read(_SCAN_BLOCK_BYTES)
            # The decoder holds back an incomplete character from the previous block; an error's offset
            # counts from the start of those bytes.
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as error:
                raise BPEInputError(f"{path}: {invalid_utf8_error(error, offset - pending)}") from None
            offset += len(block)
            if not block:
                break
            if progress is not None:
                progress(len(block))
            data = carried + block
            position = 0
            while (found := data.find(needle, position)) != -1:
                if doc_filled or _NOT_BLANK.search(data, position, found):
                    finish(doc_start, base + found)
                doc_start, doc_filled = base + found + len(needle), False
                position = found + len(needle)
            cut = max(position, len(data) - keep)
            doc_filled = doc_filled or _NOT_BLANK.search(data, position, cut) is not None
            carried = data[cut:]
            base += cut
    if doc_filled or _NOT_BLANK.search(carried):
        finish(doc_start, base + len(carried))
    spans.sort()
    return count, spans


def _read_spans(path: Path, spans: list[tuple[int, int]]) -> list[str]:
    documents = []
    with open(path, "rb") as file:
        for start, end in spans:
            file.seek(start)
            data = file.read(end - start)
            try:
                documents.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                raise BPEInputError(f"{path} changed while the report was reading it") from None
    return documents


def prepare_text(
    text: TextInput, separator: str, sample_docs: int | None, seed: int, *, progress: bool = False
) -> None:
    """Scan `text` (documents, UTF-8) and, when sampling, read its sampled documents."""
    text.size = text.path.stat().st_size
    with progress_bar(progress, text.size, f"scan {text.name}", "B", unit_scale=True) as report:
        text.documents_in_file, spans = scan_documents(text.path, separator, sample_docs, seed, report)
    if sample_docs is None:
        return
    if not spans:
        raise BPEInputError(f"{text.path} has no documents to sample (none between separators {separator!r})")
    text.documents = _read_spans(text.path, spans)
    text.document_bytes = [end - start for start, end in spans]


# ---------------------------------------------------------------------------------------------
# Measuring


def escape_token(token: bytes) -> str:
    """A token as readable text: UTF-8 shown as is, bytes that are not (part of) valid UTF-8 as \\xNN,
    invisible characters as \\n, \\r, \\t or \\uNNNN, and a backslash doubled, so every spelling is
    unambiguous (a token may be half a character: merges work on bytes)."""
    pieces = []
    for char in token.decode("utf-8", errors="surrogateescape"):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the invalid byte code - 0xDC00
            pieces.append(f"\\x{code - 0xDC00:02x}")
        elif char in _ESCAPES:
            pieces.append(_ESCAPES[char])
        elif char.isprintable():
            pieces.append(char)
        else:
            pieces.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(pieces)


def vocabulary_summary(tokenizer: Tokenizer, top: int = LONGEST_TOKENS) -> dict[str, Any]:
    """The longest tokens and the histogram of token lengths in bytes. Special tokens are left out:
    they are given, not learned, and `<|endoftext|>` would otherwise top most lists."""
    specials = {token.encode("utf-8") for token in tokenizer.special_tokens}
    learned = [(token_id, token) for token_id, token in tokenizer.vocab.items() if token not in specials]
    # Longest first; among equals the lower id, i.e. the earlier merge.
    longest = sorted(learned, key=lambda entry: (-len(entry[1]), entry[0]))[:top]
    lengths = Counter(len(token) for _, token in learned)
    return {
        "longest_tokens": [
            {"id": token_id, "text": escape_token(token), "bytes": len(token)} for token_id, token in longest
        ],
        "token_length_histogram": {str(length): lengths[length] for length in sorted(lengths)},
    }


def measure(
    tokenizer: Tokenizer, text: TextInput, *, num_threads: int | None = None, progress: bool = False, label: str = ""
) -> dict[str, Any]:
    """Encode `text` (its sample, or the whole file) and return its counts and speed."""
    sampled = text.documents is not None
    total = sum(text.document_bytes) if sampled else text.size
    # One-time costs (starting the thread team, reserving each thread's cache) are not the tokenizer's
    # speed, and would swamp the time of a sample of a few short documents: pay them before the clock.
    tokenizer.encode_batch(["warm up"] * 64, num_threads=num_threads)
    with progress_bar(progress, total, label or text.name, "B", unit_scale=True) as report:
        if sampled:
            tokens, seconds = _encode_documents(tokenizer, text, num_threads, report)
        else:
            # Counted, not kept: the ids go to the null device, so memory stays at a few chunks' worth.
            with open(os.devnull, "wb") as sink:
                started = time.perf_counter()
                tokens = tokenizer.encode_file_to(text.path, sink, num_threads=num_threads, progress=report)
                seconds = time.perf_counter() - started
    return {
        "input": text.name,
        "path": str(text.path),
        "sampled": sampled,
        "documents": len(text.documents) if sampled else text.documents_in_file,
        "documents_in_file": text.documents_in_file,
        "bytes": total,
        "tokens": tokens,
        "bytes_per_token": total / tokens if tokens else None,
        "seconds": seconds,
        "mb_per_s": total / 1e6 / seconds if seconds > 0 else None,
    }


def _encode_documents(
    tokenizer: Tokenizer, text: TextInput, num_threads: int | None, progress: Callable[[int], object]
) -> tuple[int, float]:
    documents = text.documents or []
    tokens, seconds = 0, 0.0
    start = 0
    while start < len(documents):
        end, size = start, 0
        while end < len(documents) and (end == start or size < _BATCH_BYTES):
            size += text.document_bytes[end]
            end += 1
        started = time.perf_counter()
        encoded = tokenizer.encode_batch(documents[start:end], num_threads=num_threads)
        seconds += time.perf_counter() - started
        tokens += sum(len(ids) for ids in encoded)
        progress(size)
        start = end
    return tokens, seconds


def compare_with_baseline(entries: list[dict[str, Any]], baseline: int) -> list[str]:
    """Marks `entries[baseline]` as the baseline and gives every other entry's results `vs_baseline`
    (the baseline's tokens and bytes per token on the same input, `token_change` = tokens / the
    baseline's - 1, `speed_ratio` = MB/s / the baseline's); returns notes on vocabulary sizes that
    differ from the baseline's."""
    base = entries[baseline]
    base["baseline"] = True
    by_input = {result["input"]: result for result in base["results"]}
    notes = []
    for index, entry in enumerate(entries):
        if index == baseline:
            continue
        entry["baseline"] = False
        for result in entry["results"]:
            reference = by_input[result["input"]]
            if reference["bytes"] != result["bytes"]:  # every tokenizer encodes the same text or sample
                raise ValueError(f"{entry['name']} and the baseline encoded different bytes of {result['input']}")
            tokens, speed = reference["tokens"], reference["mb_per_s"]
            result["vs_baseline"] = {
                "tokenizer": base["name"],
                "tokens": tokens,
                "bytes_per_token": reference["bytes_per_token"],
                "token_change": result["tokens"] / tokens - 1 if tokens else None,
                "speed_ratio": result["mb_per_s"] / speed if speed and result["mb_per_s"] is not None else None,
            }
        if entry["vocab_size"] != base["vocab_size"]:
            notes.append(
                f"note: {entry['name']} has {entry['vocab_size']:,} tokens and the baseline {base['name']} "
                f"{base['vocab_size']:,}: bytes per token grows with the vocabulary, compare at the same size"
            )
    return notes


# ---------------------------------------------------------------------------------------------
# Writing


def build_report(tokenizers: list[dict[str, Any]], texts: list[TextInput], settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": REPORT_FORMAT,
        "format_version": REPORT_FORMAT_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
        "inputs": [
            {"name": text.name, "path": str(text.path), "bytes": text.size, "documents": text.documents_in_file}
            for text in texts
        ],
        "tokenizers": tokenizers,
    }


def write_report(report: dict[str, Any], directory: Path) -> Path:
    path = directory / REPORT_FILE
    write_atomically(path, (json.dumps(report, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return path


def write_picture(report: dict[str, Any], directory: Path) -> Path | None:
    """`report.png`: the token length histograms and bytes/token per input, tokenizers side by side.
    None when matplotlib cannot be imported (it is an optional dependency)."""
    try:
        # The object API, not pyplot: no global figure state, no backend switch in the caller's process.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    tokenizers = report["tokenizers"]
    inputs = [entry["name"] for entry in report["inputs"]]
    width = 0.8 / max(len(tokenizers), 1)
    figure = Figure(figsize=(13, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    lengths_axes, compression_axes = figure.subplots(1, 2)

    longest = max((int(length) for entry in tokenizers for length in entry["token_length_histogram"]), default=1)
    for index, entry in enumerate(tokenizers):
        histogram = entry["token_length_histogram"]
        xs = [length + (index - (len(tokenizers) - 1) / 2) * width for length in range(1, longest + 1)]
        counts = [histogram.get(str(length), 0) for length in range(1, longest + 1)]
        lengths_axes.bar(xs, counts, width=width, label=entry["name"])
    lengths_axes.set_title("token lengths over the vocabulary (special tokens left out)")
    lengths_axes.set_xlabel("token length (bytes)")
    lengths_axes.set_ylabel("tokens")
    lengths_axes.legend()

    for index, entry in enumerate(tokenizers):
        by_input = {result["input"]: result for result in entry["results"]}
        xs = [position + (index - (len(tokenizers) - 1) / 2) * width for position in range(len(inputs))]
        values = [by_input[name]["bytes_per_token"] or 0 for name in inputs]
        bars = compression_axes.bar(xs, values, width=width, label=entry["name"])
        compression_axes.bar_label(bars, fmt="%.2f", fontsize=8)
    settings = report["settings"]
    what = (
        f"{settings['sample_docs']} sampled documents, seed {settings['seed']}"
        if settings["sample_docs"]
        else "whole texts"
    )
    compression_axes.set_title(f"compression ({what})")
    compression_axes.set_xticks(range(len(inputs)), inputs)
    compression_axes.set_ylabel("bytes per token (higher compresses more)")
    compression_axes.legend()

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    path = directory / PICTURE_FILE
    write_atomically(path, buffer.getvalue())
    return path


def _against_baseline(entry: dict[str, Any], result: dict[str, Any]) -> str:
    if entry.get("baseline"):
        return "baseline"
    change = result.get("vs_baseline", {}).get("token_change")
    return "-" if change is None else f"{change:+.1%}"


def format_table(tokenizers: list[dict[str, Any]]) -> str:
    """One row per tokenizer and input, columns aligned (numbers to the right); with a baseline, a
    last column of each result's token change against it ("-15.5%": that many fewer tokens)."""
    compared = any("baseline" in entry for entry in tokenizers)
    header: tuple[str, ...] = ("tokenizer", "input", "documents", "bytes/token", "MB/s")
    header += (BASELINE_COLUMN,) if compared else ()
    rows = [header]
    for entry in tokenizers:
        for result in entry["results"]:
            ratio, speed = result["bytes_per_token"], result["mb_per_s"]
            row: tuple[str, ...] = (
                entry["name"],
                result["input"],
                f"{result['documents']:,}",
                "-" if ratio is None else f"{ratio:.3f}",
                "-" if speed is None else f"{speed:.2f}",
            )
            rows.append(row + ((_against_baseline(entry, result),) if compared else ()))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(width) if column < 2 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cs336-bpe-report",
        # The directories come first: `--text` takes every name after it.
        usage="%(prog)s OUT_DIR [OUT_DIR ...] --text FILE [FILE ...] [--sample-docs N] [--seed S] [--baseline DIR] "
        "[-o DIR] [options]",
        description="Compression (bytes per token), throughput and longest tokens of trained BPE tokenizers.",
        epilog="Example: %(prog)s out/ts out/owt --text ts_valid.txt owt_valid.txt --sample-docs 10 -o out/report",
    )
    parser.add_argument(
        "tokenizer_dirs", nargs="+", type=Path, metavar="OUT_DIR", help="directories written by a training run"
    )
    parser.add_argument(
        "--text",
        "-t",
        dest="texts",
        nargs="+",
        action="extend",
        type=Path,
        required=True,
        metavar="FILE",
        help="UTF-8 text files to encode (after the directories; may be repeated)",
    )
    parser.add_argument(
        "--sample-docs",
        type=int,
        metavar="N",
        help="encode N documents sampled at random from each text instead of the whole text",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="compare every tokenizer's token count with this one's on the same text (one of the OUT_DIRs, "
        "or another, measured first); e.g. a superword tokenizer against plain BPE of the same size",
    )
    parser.add_argument(
        "--separator",
        metavar="TEXT",
        help="what separates documents (default: the first tokenizer's first special token, else <|endoftext|>)",
    )
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        metavar="DIR",
        help="write one combined report.json/report.png into DIR (default: one per tokenizer directory)",
    )
    parser.add_argument(
        "--threads", type=int, metavar="N", help="threads of the compiled encoder (default: every core; -1 too)"
    )
    parser.add_argument("--pure", action="store_true", help="use the pure-Python encoder")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.sample_docs is not None and args.sample_docs < 1:
        parser.error("--sample-docs must be at least 1")
    if args.threads == 0:
        parser.error("--threads 0 is not allowed: leave it out or use -1 for every core")
    for what, paths in (("tokenizer directory", args.tokenizer_dirs), ("text", args.texts)):
        seen = Counter(path.resolve() for path in paths)
        twice = [path for path in paths if seen[path.resolve()] > 1]
        if twice:
            parser.error(f"{what} {twice[0]} is given more than once")
    # The baseline is one of the directories (it may be given among them too) or joins them first.
    args.baseline_index = None
    if args.baseline is not None:
        listed = [path.resolve() for path in args.tokenizer_dirs]
        if args.baseline.resolve() in listed:
            args.baseline_index = listed.index(args.baseline.resolve())
        else:
            args.tokenizer_dirs.insert(0, args.baseline)
            args.baseline_index = 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with InterruptHandling():
            return _run(args)
    except KeyboardInterrupt as interrupt:  # SIGINT or SIGTERM; reports are written whole or not at all
        print("interrupted", file=sys.stderr)
        return 128 + getattr(interrupt, "signum", signal.SIGINT)


def _run(args: argparse.Namespace) -> int:
    progress = not args.quiet
    try:
        # Everything that can be refused is checked before the first long pass over a text.
        thread_option = check_num_workers(args.threads, "--threads")
        native = False if args.pure else None
        loaded = [
            LoadedTokenizer(path, name, load_tokenizer_dir(path, native=native))
            for path, name in zip(args.tokenizer_dirs, _labels(args.tokenizer_dirs))
        ]
        texts = [
            TextInput(check_text_file(path, "text file"), name) for path, name in zip(args.texts, _labels(args.texts))
        ]
        targets = [check_output_dir(args.output)] if args.output else [check_output_dir(t.path) for t in loaded]
        separator = args.separator
        if separator is None:
            separator = next((t.tokenizer.special_tokens[0] for t in loaded if t.tokenizer.special_tokens), ENDOFTEXT)
        threads = 1 if args.pure else effective_num_threads(thread_option)
        settings = {
            "sample_docs": args.sample_docs,
            "seed": args.seed,
            "separator": separator,
            "threads": threads,
        }
        if args.baseline_index is not None:
            settings["baseline"] = loaded[args.baseline_index].name

        for text in texts:
            prepare_text(text, separator, args.sample_docs, args.seed, progress=progress)
        entries = [_measured_entry(item, texts, thread_option, progress) for item in loaded]
        notes = [] if args.baseline_index is None else compare_with_baseline(entries, args.baseline_index)
        groups = [entries] if args.output else [[entry] for entry in entries]
        written, missing_matplotlib = _write_reports(targets, groups, texts, settings)
    except BPEInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("error: out of memory (try --sample-docs N)", file=sys.stderr)
        return EXIT_FAILED
    except OSError as error:
        print(f"error: {error.filename + ': ' if error.filename else ''}{error.strerror or error}", file=sys.stderr)
        return EXIT_FAILED
    _print_results(entries, written, missing_matplotlib)
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def _measured_entry(
    item: LoadedTokenizer, texts: list[TextInput], thread_option: int | None, progress: bool
) -> dict[str, Any]:
    """A tokenizer's part of the report: what it is, what trained it, and its results on each text."""
    run = read_run_info(item.path) or {}
    entry: dict[str, Any] = {
        "name": item.name,
        "path": str(item.path),
        # Which training run: a later run into the same directory makes this report stale.
        "run_id": run.get("run_id"),
        # What it trained by (pattern, tie_break, layout); unknown without bpe_run.json.
        **(recorded_rules(run) if run else {}),
        # A run continued from a base: where from and how many tokens it kept; a superword run's stages.
        **({"start_from": run["start_from"]} if run.get("start_from") else {}),
        **({"superbpe": run["superbpe"]} if run.get("superbpe") else {}),
        "vocab_size": len(item.tokenizer.vocab),
        "special_tokens": list(item.tokenizer.special_tokens),
        "encoder": "compiled" if item.tokenizer.native else "python",
        **vocabulary_summary(item.tokenizer),
    }
    entry["results"] = [
        measure(
            item.tokenizer,
            text,
            num_threads=thread_option,
            progress=progress,
            label=f"{item.name} | {text.name}",
        )
        for text in texts
    ]
    return entry


def _write_reports(
    targets: list[Path], groups: list[list[dict[str, Any]]], texts: list[TextInput], settings: dict[str, Any]
) -> tuple[list[Path], bool]:
    """Each group's report (and picture) in its directory: the paths written, and whether a picture
    was left out for want of matplotlib."""
    written: list[Path] = []
    missing_matplotlib = False
    for directory, group in zip(targets, groups):
        report = build_report(group, texts, settings)
        written.append(write_report(report, directory))
        picture = write_picture(report, directory)
        if picture is None:
            missing_matplotlib = True
        else:
            written.append(picture)
    return written, missing_matplotlib


def _print_results(entries: list[dict[str, Any]], written: list[Path], missing_matplotlib: bool) -> None:
    """The table, each tokenizer's longest token, the files written and the notes."""
    print(format_table(entries))
    for entry in entries:
        if entry["longest_tokens"]:
            token = entry["longest_tokens"][0]
            print(f'longest token of {entry["name"]}: "{token["text"]}" ({token["bytes"]} bytes)')
    for path in written:
        print(f"wrote {path}")
    if missing_matplotlib:
        print(PICTURE_HINT, file=sys.stderr)
    if any(result["bytes"] < _STEADY_BYTES for entry in entries for result in entry["results"]):
        print(SMALL_SAMPLE_NOTE, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
