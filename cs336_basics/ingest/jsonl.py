"""JSON lines: one JSON object per line, its `text_field` a document; compressed too. The reader
(`read_json_lines`) takes the common record through the compiled reader (cpp/io/jsonl.cpp), laid out
for the native counter, and every other line through json.loads. A task of the cluster is a byte range
cut at newlines (`jsonl_ranges`); a compressed file is read whole."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..native.backend import NativeUnavailable, load_native
from ..rules.contract import BPEInputError
from .sources import (
    BLOCK_BYTES,
    BadRecords,
    InputFile,
    LaidOutDocuments,
    _one_line,
    name_without_compression,
    read_blocks,
)
from .table import InputFormat

_SUFFIXES = (".jsonl", ".ndjson")


class _Records:
    """The records of one read, each judged by json.loads alone: its `text_field` as UTF-8, None for a
    blank line, and a bad record stopping with one line naming `file:line` (or counted into `skipped`)."""

    def __init__(
        self, source: InputFile, text_field: str, skipped: BadRecords | None, byte_range: tuple[int, int] | None
    ) -> None:
        self.source, self.text_field, self.skipped, self.byte_range = source, text_field, skipped, byte_range
        self.line_number = 0  # of the line judged last

    def bad(self, why: str) -> None:
        line = self.line_number
        if self.byte_range is not None and self.byte_range[0] > 0:
            line += _lines_before(self.source, self.byte_range[0])  # only on this rare path: it reads the file
        message = f"{self.source.path}:{line}: {why}"
        if self.skipped is None:
            raise BPEInputError(message)
        self.skipped.add(message)

    def text(self, line: bytes) -> bytes | None:
        text_field = self.text_field
        try:
            record = json.loads(line)
        except ValueError as error:  # UnicodeDecodeError too
            if not line.strip():
                return None
            return self.bad(f"not a JSON record ({_one_line(error)})")
        if not isinstance(record, dict):
            return self.bad(f"not a JSON object but a {type(record).__name__}")
        text = record.get(text_field)
        if not isinstance(text, str):
            fields = ", ".join(map(repr, record)) or "none"
            why = "missing" if text is None else f"a {type(text).__name__}, not a string"
            return self.bad(f"field {text_field!r} is {why} (fields: {fields}); choose the field with --text-field")
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate written as a \ud800 escape
            return self.bad(
                f"field {text_field!r} is not valid Unicode text ({error.reason} at character {error.start})"
            )

    def of_lines(self, lines: Iterable[bytes]) -> list[bytes]:
        """The texts of whole lines, judged in Python (no compiled reader)."""
        texts = []
        for line in lines:
            self.line_number += 1
            text = self.text(line)
            if text is not None:
                texts.append(text)
        return texts

    def of_native_texts(self, items: Iterable[Any], data: bytes) -> list[bytes]:
        """The texts of the compiled reader's items: a record's text, None for a blank line, or where a
        line lies in `data` for json.loads to judge, so its result or error is exactly the pure path's."""
        texts = []
        for item in items:
            self.line_number += 1
            if type(item) is tuple:
                item = self.text(data[item[0] : item[1]])
            if item is not None:
                texts.append(item)
        return texts

    def laid_out(self, read: Callable[[Any, str], tuple], data: bytes, whole: int) -> LaidOutDocuments:
        """The records' strings in one buffer, from the compiled reader; the lines it hands back are
        judged here, one by one (naming their own line), and go after them."""
        first_line = self.line_number
        strings, ends, num_lines, fallbacks = read(memoryview(data)[:whole], self.text_field)
        judged = []
        for index, start, end in fallbacks:
            self.line_number = first_line + index + 1
            text = self.text(data[start:end])
            if text is not None:
                judged.append(text)
        self.line_number = first_line + num_lines
        return LaidOutDocuments.of(judged, strings, ends) if judged else LaidOutDocuments(strings, ends)


def read_json_lines(
    source: InputFile,
    text_field: str,
    skipped: BadRecords | None = None,
    byte_range: tuple[int, int] | None = None,
    laid_out: bool = False,
) -> Iterator[Any]:
    """The `text_field` of each record of a JSON-lines file, as UTF-8; blank lines are skipped. A bad
    record stops with one line naming `file:line`, or is counted into `skipped` when given.
    `byte_range`: only the lines of [start, end) of an uncompressed file (`jsonl_ranges` cuts them
    at line ends). The compiled reader (cpp/io/jsonl.cpp) reads the common record; every line it is not
    sure of goes to json.loads here, so documents and errors are those of json.loads alone.
    `laid_out`: a block's documents at a time, as `LaidOutDocuments`; from the compiled reader they
    stay where it wrote them, no bytes object each, for the native counter to read in place."""
    records = _Records(source, text_field, skipped, byte_range)

    def as_items(texts: list[bytes]) -> list[Any]:
        """A block's documents as yielded: one LaidOutDocuments when laid out, else each."""
        if not laid_out:
            return texts
        return [LaidOutDocuments.of(texts)] if texts else []

    json_line_texts = native_json_line_texts()
    json_line_documents = native_json_line_documents() if laid_out else None
    pending = b""
    for block in read_blocks(source) if byte_range is None else _range_blocks(source, *byte_range):
        data = pending + block
        if json_line_texts is None:
            lines = data.split(b"\n")
            pending = lines.pop()  # the last line may go on in the next block
            yield from as_items(records.of_lines(lines))
            continue
        whole = data.rfind(b"\n") + 1  # the lines up to here are whole; the rest may go on
        pending = data[whole:]
        if not whole:
            continue
        if json_line_documents is not None:
            documents = records.laid_out(json_line_documents, data, whole)
            if documents.count:
                yield documents
        else:
            yield from as_items(records.of_native_texts(json_line_texts(memoryview(data)[:whole], text_field), data))
    if pending:
        yield from as_items(records.of_lines([pending]))


def native_json_line_documents() -> Callable[[Any, str], tuple] | None:
    """`_count_cpp.json_line_documents` (json_line_texts with the strings left in one buffer), or
    None as for `_native_json_line_texts`."""
    try:
        return getattr(load_native("_count_cpp"), "json_line_documents", None)
    except NativeUnavailable:
        return None


def native_json_line_texts() -> Callable[[Any, str], list] | None:
    """`_count_cpp.json_line_texts`, the native reader of JSON-lines records, or None when compiled
    code is not built or not wanted (CS336_PURE_PYTHON): then json.loads reads every line."""
    try:
        return getattr(load_native("_count_cpp"), "json_line_texts", None)
    except NativeUnavailable:
        return None


def _lines_before(source: InputFile, offset: int) -> int:
    """How many lines end before byte `offset` of a file (for a range's error message)."""
    count = 0
    with source.open() as file:
        while offset > 0:
            block = file.read(min(offset, BLOCK_BYTES))
            if not block:
                break
            count += block.count(b"\n")
            offset -= len(block)
    return count


def _range_blocks(source: InputFile, start: int, end: int) -> Iterator[bytes]:
    with source.open() as file:
        file.seek(start)
        while start < end:
            block = file.read(min(BLOCK_BYTES, end - start))
            if not block:
                return
            start += len(block)
            yield block


def jsonl_ranges(source: InputFile, range_bytes: int) -> list[tuple[int, int]]:
    """An uncompressed JSON-lines file cut into byte ranges of about `range_bytes`, each ending just
    after a newline (or at the end of the file), so every record lies in one range."""
    size = source.size()
    ranges = []
    start = 0
    with source.open() as file:
        while start < size:
            end = start + range_bytes
            if end >= size:
                end = size
            else:
                file.seek(end)
                while True:  # the next newline at or after `end`
                    window = file.read(1 << 16)
                    if not window:
                        end = size
                        break
                    found = window.find(b"\n")
                    if found != -1:
                        end += found + 1
                        break
                    end += len(window)
            ranges.append((start, end))
            start = end
    return ranges


def _named(path: str) -> bool:
    return name_without_compression(path).endswith(_SUFFIXES)


def _parts(source: InputFile, range_bytes: int) -> list[tuple[tuple[int, ...], int]] | None:
    """Byte ranges cut at newlines; a compressed file is read whole (its stream cannot be split)."""
    if source.compression is not None:
        return None
    return [((start, end), end - start) for start, end in jsonl_ranges(source, range_bytes)]


FORMAT = InputFormat("jsonl", "JSON lines", named=_named, documents=read_json_lines, laid_out=True, parts=_parts)
