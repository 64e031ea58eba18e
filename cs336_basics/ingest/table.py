"""The table of input formats: one row (`InputFormat`) per format, saying how a file of it is
recognised, read, checked and cut into tasks. Every other stage asks the row and never branches on
a format's name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .sources import BadRecords, InputFile

# A format is a module of this package that defines its row as FORMAT, found by its file alone (a new
# format touches no other). These come first, in this order, in `--format`'s choices and detection;
# any other follows by name.
FORMATS = ("text", "jsonl", "parquet")
# The modules of this package that are stages, not formats.
_STAGES = (
    "cluster",
    "counted",
    "counting",
    "document_batches",
    "in_place",
    "plan",
    "read_ahead",
    "route",
    "sources",
    "stream_counter",
    "table",
    "text_ranges",
    "word_counts",
)

# A documents reader: (file, text_field, bad records or None, part or None, laid_out) -> the file's
# documents as UTF-8 bytes (or, laid out, blocks of them as `sources.LaidOutDocuments`).
DocumentReader = Callable[[InputFile, str, "BadRecords | None", "tuple[int, ...] | None", bool], Iterator[Any]]


@dataclass(frozen=True)
class InputFormat:
    """One row of the table.

    `magic`: first bytes that say a file is of this format, whatever its name; `named`: whether a
    file name says it (asked after every row's magic). `documents`: the reader, None for text (its
    bytes, decompressed, are the text). `laid_out`: the reader hands blocks of documents laid out in
    one buffer, which the native counter reads in place. `check(file, text_field, detected)` refuses
    a file this format cannot read, in one line. `parts(file, range_bytes)`: the file cut into
    (part, bytes) tasks the reader takes as `part`, or None when it is read whole. `text_bytes(file)`:
    about how much text the file holds, when its size does not say (None: the size, three times it
    when compressed)."""

    name: str
    label: str
    magic: bytes | None = None
    named: Callable[[str], bool] | None = None
    documents: DocumentReader | None = None
    laid_out: bool = False
    check: Callable[[InputFile, str, bool], None] | None = None
    parts: Callable[[InputFile, int], list[tuple[tuple[int, ...], int]] | None] | None = None
    text_bytes: Callable[[InputFile], int] | None = None

    @property
    def holds_documents(self) -> bool:
        """Whether its files hold documents (it has a reader), not text."""
        return self.documents is not None

    def in_place(self, file: InputFile) -> bool:
        """Whether counting can read the file's bytes as they are (plain text: random access)."""
        return self.documents is None and file.compression is None

    def describe(self, file: InputFile) -> str:
        return f"{file.compression}-compressed {self.label}" if file.compression else self.label

    def expected_text_bytes(self, file: InputFile) -> int:
        """About how much text the file holds, to size the count tables: this row's figure (Parquet's
        uncompressed size from its footer), else its size, three times that when compressed (text
        compresses 2.3x to 4x)."""
        if self.text_bytes is not None:
            return self.text_bytes(file)
        return file.size() * (3 if file.compression else 1)


_TABLE: dict[str, InputFormat] = {}


def register_format(row: InputFormat) -> InputFormat:
    """Adds (or replaces) a row; a format module registers its own when imported."""
    _TABLE[row.name] = row
    return row


_found = False


def _format_modules() -> list[str]:
    """The names of this package's format modules: the built-in order, then the others by name."""
    package = importlib.import_module(__package__)
    found = {name for _, name, _ in pkgutil.iter_modules(package.__path__) if name not in _STAGES}
    return [name for name in FORMATS if name in found] + sorted(found.difference(FORMATS))


def _load_built_in() -> None:
    global _found
    if _found:
        return
    for module in _format_modules():
        row = getattr(importlib.import_module(f"{__package__}.{module}"), "FORMAT", None)
        if row is not None and row.name not in _TABLE:
            register_format(row)
    _found = True


def known_formats() -> tuple[str, ...]:
    """The names of every row, the built-in ones first."""
    _load_built_in()
    return tuple(_TABLE)


def format_row(name: str) -> InputFormat:
    _load_built_in()
    return _TABLE[name]


def row_of(file: InputFile) -> InputFormat:
    """The row of a file's format: what it holds, how it is read and described."""
    return format_row(file.format)


def detect_format(name: str, head: bytes) -> str:
    """The format a file's first bytes, else its name, say; text when none does."""
    _load_built_in()
    for row in _TABLE.values():
        if row.magic is not None and head.startswith(row.magic):
            return row.name
    for row in _TABLE.values():
        if row.named is not None and row.named(name):
            return row.name
    return "text"


def iter_document_bytes(
    source: InputFile,
    text_field: str = "text",
    skipped: BadRecords | None = None,
    part: tuple[int, ...] | None = None,
    laid_out: bool = False,
) -> Iterator[Any]:
    """The documents of a file of documents, each as its UTF-8 bytes, read by its format's row
    (`InputFormat.documents`; the counter checks them again, so nothing is decoded here).
    `skipped`: count bad records into it instead of stopping at the first. `part`: only a part of
    the file, as its row's `parts` cut it. `laid_out`, for a row that has it: blocks of documents as
    `LaidOutDocuments` instead of one bytes object each."""
    read = row_of(source).documents
    if read is not None:
        return read(source, text_field, skipped, part, laid_out)
    raise ValueError(f"{source.path} is {source.format}, not a file of documents")


def iter_documents(source: InputFile, text_field: str = "text") -> Iterator[str]:
    """The documents of a file of documents (`iter_document_bytes`), as str."""
    return (document.decode("utf-8") for document in iter_document_bytes(source, text_field))
