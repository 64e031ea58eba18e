"""Input formats for counting: what an input file holds, and its documents or text as a stream.

Counting (`word_counts.py`) reads three kinds of input, and this module tells them apart and opens
them; it never counts:

- plain UTF-8 text: counted in place (memory-mapped, random access), as always;
- compressed text (gzip, bzip2, xz, zstd; recognised by their magic bytes, not their names):
  decompressed in blocks as counting reads them, never written to disk;
- documents: JSON lines (one record per line, its `text_field`) and Parquet (the `text_field`
  column, one row group at a time), also compressed JSON lines; and, through
  `word_counts.count_words_from_iterator`, any iterable of strings, a `pyarrow` table or array, or a
  Hugging Face `datasets.Dataset`.

A file whose name says text but whose first line is a JSON object with the text field is refused:
training on JSON syntax as if it were prose gives a wrong tokenizer without any error. `format=`
(`--format`) says what a file is when detection is not wanted.

zstd needs the `zstandard` package and Parquet `pyarrow`; without them such an input stops with one
line saying what to install. Everything else is the standard library.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import json
import lzma
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ._common import BPEInputError, check_regular_file

__all__ = [
    "FORMATS",
    "InputFile",
    "MissingDependency",
    "documents_of",
    "encoded_documents",
    "expand_inputs",
    "inspect_input",
    "iter_documents",
    "read_blocks",
]

FORMATS = ("text", "jsonl", "parquet")

# Blocks read from a (decompressed) stream: large enough that each native count call has work for
# every thread, small enough that memory does not depend on the input size.
BLOCK_BYTES = 4 << 20
# Documents of an Arrow source or a `datasets.Dataset` are turned into Python strings this many at a
# time (a slice's `to_pylist`), so memory holds one batch, not the column.
ARROW_BATCH_ROWS = 8192

# Magic bytes of the compressed formats read here. Each starts with bytes that cannot begin UTF-8
# text, except bzip2's "BZh", which is checked with the block magic that follows it.
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
)
_BZIP2_BLOCK_MAGICS = (b"1AY&SY", b"\x17rE8P\x90")  # a first block, or the end of an empty stream
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zstd")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_PARQUET_MAGIC = b"PAR1"
# How much of a text file's decompressed start is read to look for a JSON first line.
_SNIFF_BYTES = 1 << 20


class MissingDependency(BPEInputError):
    """An input needs an optional package that is not installed; the message says which."""


def _optional(module: str, package: str, why: str) -> Any:
    """The optional module, or one line saying what to install (tests simulate its absence by
    making this import fail)."""
    try:
        return __import__(module)
    except ImportError:
        raise MissingDependency(f"{why} needs the {package} package: pip install {package}") from None


def compression_of(head: bytes) -> str | None:
    """'gzip', 'bzip2', 'xz' or 'zstd' from a file's first bytes, or None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in _BZIP2_BLOCK_MAGICS:
        return "bzip2"
    return None


@dataclass(frozen=True)
class InputFile:
    """A local input file and how to read it: `format` is text, jsonl or parquet; `compression` is
    None or the compressed format of the file's bytes."""

    path: str
    format: str
    compression: str | None = None

    @property
    def in_place(self) -> bool:
        """Whether counting can read the file's bytes as they are (plain text: random access)."""
        return self.format == "text" and self.compression is None

    def describe(self) -> str:
        kind = {"text": "text", "jsonl": "JSON lines", "parquet": "Parquet"}[self.format]
        return f"{self.compression}-compressed {kind}" if self.compression else kind


def _check_format(format: str | None) -> None:
    if format is not None and format not in FORMATS:
        raise BPEInputError(f"unknown input format {format!r}; choose one of {', '.join(FORMATS)}")


def _name_without_compression(path: str) -> str:
    lowered = path.lower()
    for suffix in _COMPRESSED_SUFFIXES:
        if lowered.endswith(suffix):
            return lowered[: -len(suffix)]
    return lowered


def inspect_input(
    path: str | os.PathLike, format: str | None = None, text_field: str = "text", what: str = "training file"
) -> InputFile:
    """What a local input file is: its compression from its magic bytes; its format from `format`
    when given, else Parquet's magic or a `.parquet` name, a `.jsonl`/`.ndjson` name (compressed
    too), else text. A text file (by name) whose first non-empty line is a JSON object with a
    string `text_field` is refused, saying how to choose."""
    _check_format(format)
    checked, head = check_regular_file(path, what, allow_empty=True, head_bytes=16)
    name = os.fspath(checked)
    compression = compression_of(head)
    if format is None:
        if head.startswith(_PARQUET_MAGIC) or name.lower().endswith(".parquet"):
            format = "parquet"
        elif _name_without_compression(name).endswith(_JSONL_SUFFIXES):
            format = "jsonl"
        else:
            _refuse_json_lines_as_text(InputFile(name, "text", compression), text_field)
            format = "text"
    if format == "parquet" and compression is not None:
        raise BPEInputError(f"{name} is {compression}-compressed; Parquet files compress inside, decompress it first")
    return InputFile(name, format, compression)


def _refuse_json_lines_as_text(source: InputFile, text_field: str) -> None:
    """Training on JSON syntax as if it were prose gives a wrong tokenizer silently: refuse when the
    first non-empty line of the (decompressed) text is a JSON object holding `text_field`."""
    head = bytearray()
    for block in read_blocks(source, block_bytes=64 << 10):
        head += block
        stripped = head.lstrip()
        if b"\n" in stripped or len(head) >= _SNIFF_BYTES:
            break
    first_line = bytes(head).lstrip().split(b"\n", 1)[0].strip()
    if not first_line.startswith(b"{"):
        return
    try:
        record = json.loads(first_line)
    except ValueError:
        return
    if isinstance(record, dict) and isinstance(record.get(text_field), str):
        raise BPEInputError(
            f"{source.path} looks like JSON lines (its first line is a JSON object with a {text_field!r} field), "
            f"not text: choose with --format jsonl (format='jsonl') to train on that field, or --format text "
            f"(format='text') to train on the raw lines"
        )


def expand_inputs(inputs: Iterable[str | os.PathLike]) -> list[str]:
    """Each input as given, a directory as the files under it (recursively) and a glob pattern as
    the files it matches, each expansion in sorted order (the order counting reads them in). URLs
    are left to fsspec. A pattern that matches nothing, or an empty directory, is refused."""
    expanded: list[str] = []
    for item in inputs:
        text = os.fspath(item)
        if "://" in text:
            expanded.append(text)
        elif Path(text).is_dir():
            # Hidden files and folders (.git, a run's lock file) are not data, as for ls and glob.
            files = sorted(
                str(path)
                for path in Path(text).rglob("*")
                if path.is_file() and not any(part.startswith(".") for part in path.relative_to(text).parts)
            )
            if not files:
                raise BPEInputError(f"directory {text} holds no files")
            expanded += files
        elif glob.has_magic(text) and not Path(text).exists():
            files = sorted(path for path in glob.glob(text, recursive=True) if Path(path).is_file())
            if not files:
                raise BPEInputError(f"no file matches {text}")
            expanded += files
        else:
            expanded.append(text)
    return expanded


# ---------------------------------------------------------------------------------------------
# Reading


def _open_decompressed(source: InputFile) -> BinaryIO:
    if source.compression is None:
        return open(source.path, "rb")
    if source.compression == "gzip":
        return gzip.open(source.path, "rb")  # type: ignore[return-value]
    if source.compression == "bzip2":
        return bz2.open(source.path, "rb")  # type: ignore[return-value]
    if source.compression == "xz":
        return lzma.open(source.path, "rb")  # type: ignore[return-value]
    zstandard = _optional("zstandard", "zstandard", f"{source.path} is zstd-compressed; reading it")
    raw = open(source.path, "rb")
    # A .zst file may hold several frames (zstd --rsyncable, pzstd, concatenation): read them all.
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error, lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def read_blocks(source: InputFile, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The file's (decompressed) bytes in blocks of about `block_bytes`. A corrupt or truncated
    compressed stream stops with one line naming the file and the decompressed offset reached."""
    errors = _decompression_errors()
    offset = 0
    try:
        with _open_decompressed(source) as stream:
            while True:
                try:
                    block = stream.read(block_bytes)
                except errors as error:
                    raise BPEInputError(
                        f"{source.path}: corrupt or truncated {source.compression or 'file'} data after "
                        f"{offset:,} decompressed bytes ({error})"
                    ) from None
                if not block:
                    return
                offset += len(block)
                yield block
    except OSError as error:  # opening failed
        raise BPEInputError(f"cannot read {source.path}: {error.strerror or error}") from None


def _json_lines(source: InputFile, text_field: str) -> Iterator[str]:
    """The `text_field` of each record of a JSON-lines file; blank lines are skipped."""
    pending = b""
    line_number = 0

    def record_text(line: bytes) -> str | None:
        stripped = line.strip()
        if not stripped:
            return None
        try:
            record = json.loads(stripped)
        except ValueError as error:
            raise BPEInputError(f"{source.path}:{line_number}: not a JSON record ({error})") from None
        if not isinstance(record, dict):
            raise BPEInputError(f"{source.path}:{line_number}: not a JSON object")
        text = record.get(text_field)
        if not isinstance(text, str):
            fields = ", ".join(map(repr, record)) or "none"
            why = "missing" if text is None else f"a {type(text).__name__}, not a string"
            raise BPEInputError(
                f"{source.path}:{line_number}: field {text_field!r} is {why} (fields: {fields}); "
                "choose the field with --text-field"
            )
        return text

    for block in read_blocks(source):
        lines = (pending + block).split(b"\n")
        pending = lines.pop()  # the last line may go on in the next block
        for line in lines:
            line_number += 1
            text = record_text(line)
            if text is not None:
                yield text
    if pending:
        line_number += 1
        text = record_text(pending)
        if text is not None:
            yield text


def _parquet_documents(source: InputFile, text_field: str) -> Iterator[str]:
    """The `text_field` column of a Parquet file, read one row group at a time."""
    _optional("pyarrow", "pyarrow", f"{source.path} is Parquet; reading it")
    import pyarrow.parquet as parquet

    try:
        file = parquet.ParquetFile(source.path)
    except Exception as error:  # pyarrow raises its own ArrowInvalid for a file that is not Parquet
        raise BPEInputError(f"{source.path}: not a readable Parquet file ({error})") from None
    columns = file.schema_arrow.names
    if text_field not in columns:
        raise BPEInputError(
            f"{source.path} has no column {text_field!r}; its columns: {', '.join(columns)} (choose with --text-field)"
        )
    for group in range(file.num_row_groups):
        column = file.read_row_group(group, columns=[text_field]).column(0)
        yield from _arrow_strings(column, f"{source.path} column {text_field!r}")


def iter_documents(source: InputFile, text_field: str = "text") -> Iterator[str]:
    """The documents of a JSON-lines or Parquet file."""
    if source.format == "jsonl":
        return _json_lines(source, text_field)
    if source.format == "parquet":
        return _parquet_documents(source, text_field)
    raise ValueError(f"{source.path} is {source.format}, not a file of documents")


# ---------------------------------------------------------------------------------------------
# In-memory sources: Arrow arrays and tables, Hugging Face datasets, any iterable of strings


def _is_from(value: object, package: str) -> bool:
    return type(value).__module__.split(".", 1)[0] == package


def _arrow_strings(array: Any, what: str) -> Iterator[str]:
    """The strings of an Arrow string array or chunked array, a slice at a time.

    For this first version each slice becomes Python strings (`to_pylist`); reading the Arrow
    buffers (offsets and data) in place from the native counter is a later step."""
    import pyarrow

    if not (pyarrow.types.is_string(array.type) or pyarrow.types.is_large_string(array.type)):
        raise BPEInputError(f"{what} holds {array.type}, not strings")
    chunks = array.chunks if isinstance(array, pyarrow.ChunkedArray) else [array]
    for chunk in chunks:
        for start in range(0, len(chunk), ARROW_BATCH_ROWS):
            values = chunk.slice(start, ARROW_BATCH_ROWS).to_pylist()
            if None in values:
                raise BPEInputError(f"{what} has a null at row {start + values.index(None)} of a chunk")
            yield from values


def documents_of(texts: object, text_field: str = "text") -> tuple[Iterable[object], int | None]:
    """The documents of an in-memory source, and how many there are when that is known: a pyarrow
    `Table` (its `text_field` column), `ChunkedArray` or string `Array`, a Hugging Face `Dataset` or
    `IterableDataset` (read in batches of its `text_field`), or any iterable (items checked later)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of documents, not one string; wrap it in a list")
    if _is_from(texts, "pyarrow"):
        if hasattr(texts, "column_names"):  # Table or RecordBatch
            if text_field not in texts.column_names:
                raise BPEInputError(f"the table has no column {text_field!r}; its columns: {texts.column_names}")
            texts = texts.column(text_field)
        return _arrow_strings(texts, f"column {text_field!r}"), len(texts)
    if _is_from(texts, "datasets") and hasattr(texts, "iter"):
        columns = getattr(texts, "column_names", None)
        if columns is not None and text_field not in columns:
            raise BPEInputError(f"the dataset has no column {text_field!r}; its columns: {columns}")

        def batches() -> Iterator[object]:
            for batch in texts.iter(batch_size=ARROW_BATCH_ROWS):
                yield from batch[text_field]

        length = len(texts) if hasattr(texts, "__len__") else None
        return batches(), length
    if not isinstance(texts, Iterable):
        raise TypeError(f"texts must be an iterable of str, got {type(texts).__name__}")
    return texts, len(texts) if hasattr(texts, "__len__") else None  # type: ignore[arg-type]


def encoded_documents(documents: Iterable[object], report: Callable[[int], object] | None = None) -> Iterator[bytes]:
    """Each document as UTF-8 bytes: a str is encoded, bytes are checked to be UTF-8; anything else
    is a TypeError naming its index. `report(1)` after each document (a progress bar in documents)."""
    for index, document in enumerate(documents):
        if isinstance(document, str):
            try:
                encoded = document.encode("utf-8")
            except UnicodeEncodeError as error:  # a lone surrogate
                raise BPEInputError(
                    f"document {index} is not valid Unicode text: {error.reason} at character {error.start}"
                ) from None
        elif isinstance(document, (bytes, bytearray, memoryview)):
            encoded = bytes(document)
            try:
                encoded.decode("utf-8")
            except UnicodeDecodeError as error:
                raise BPEInputError(
                    f"document {index} is not valid UTF-8: invalid byte at offset {error.start} ({error.reason})"
                ) from None
        else:
            raise TypeError(f"document {index} is a {type(document).__name__}, not str")
        yield encoded
        if report is not None:
            report(1)
