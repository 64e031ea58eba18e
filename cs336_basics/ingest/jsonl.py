"""JSON lines: one JSON object per line, its `text_field` a document; compressed too. The reader
(`formats._json_lines`) takes the common record through the compiled reader (cpp/io/jsonl.cpp), laid out
for the native counter, and every other line through json.loads."""

from __future__ import annotations

from ..formats import InputFile, _json_lines, jsonl_ranges, name_without_compression
from .table import InputFormat

_SUFFIXES = (".jsonl", ".ndjson")


def _named(path: str) -> bool:
    return name_without_compression(path).endswith(_SUFFIXES)


def _parts(source: InputFile, range_bytes: int) -> list[tuple[tuple[int, ...], int]] | None:
    """Byte ranges cut at newlines; a compressed file is read whole (its stream cannot be split)."""
    if source.compression is not None:
        return None
    return [((start, end), end - start) for start, end in jsonl_ranges(source, range_bytes)]


FORMAT = InputFormat("jsonl", "JSON lines", named=_named, documents=_json_lines, laid_out=True, parts=_parts)
