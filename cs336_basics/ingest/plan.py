"""Inspecting inputs once into a plan: each file's format and compression, from what it is (its
magic bytes, else its name) or from `format`, and the options every reader takes. Counting
(`counting.count_plan`) and the cluster (`cluster.count_words_on_cluster`) run the plan; neither
opens a file to ask what it is again."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..rules.contract import BPEInputError, check_regular_file
from .sources import InputFile, check_path_argument, compression_of, is_url, url_filesystem
from .table import detect_format, format_row, known_formats, row_of


def _check_format(format: str | None) -> None:
    if format is not None and format not in known_formats():
        raise BPEInputError(f"unknown input format {format!r}; choose one of {', '.join(known_formats())}")


def _url_head(path: str, storage_options: Mapping[str, object] | None, what: str) -> bytes:
    fs, fs_path = url_filesystem(path, storage_options)
    try:
        if not fs.exists(fs_path):
            raise BPEInputError(f"{what} not found: {path}")
        if fs.isdir(fs_path):  # as for a local path (fsspec's own error names only the bare path)
            raise BPEInputError(f"{what} path is a directory, not a file: {path}")
        with fs.open(fs_path, "rb") as file:
            return file.read(16)
    except OSError as error:
        raise BPEInputError(f"cannot read {path}: {error}") from None


def inspect_input(
    path: str | os.PathLike,
    format: str | None = None,
    text_field: str = "text",
    what: str = "training file",
    storage_options: Mapping[str, object] | None = None,
) -> InputFile:
    """What an input file (local, or an fsspec URL read with `storage_options`) is: its compression
    from its magic bytes; its format from `format` when given, else the table's (`detect_format`:
    Parquet's magic or a `.parquet` name, a `.jsonl`/`.ndjson` name, compressed too, else text).
    Each format's row then refuses what it cannot read: a file taken for text by its name whose
    first non-empty line is a JSON object with a string `text_field`, a compressed Parquet file."""
    _check_format(format)
    if is_url(check_path_argument(path)):
        name = os.fspath(path)
        head = _url_head(name, storage_options, what)
    else:
        checked, head = check_regular_file(path, what, allow_empty=True, head_bytes=16)
        name = os.fspath(checked)
        storage_options = None
    compression = compression_of(head)
    detected = format is None
    source = InputFile(name, detect_format(name, head) if detected else format, compression, storage_options)
    row = format_row(source.format)
    if row.check is not None:
        row.check(source, text_field, detected)
    return source


@dataclass(frozen=True)
class InputPlan:
    """The inputs, inspected, in reading order (`paths`: as the caller named them, for tasks and
    messages), and how their documents are read: `text_field` names the records' field or column,
    `skip_bad_records` counts bad records instead of stopping."""

    paths: tuple[str, ...]
    files: tuple[InputFile, ...]
    text_field: str = "text"
    skip_bad_records: bool = False
    storage_options: Mapping[str, object] | None = field(default=None, compare=False)

    @property
    def in_place(self) -> bool:
        """Whether every file is plain text, counted in place by byte ranges (else: streamed)."""
        return all(row_of(source).in_place(source) for source in self.files)

    @property
    def documents(self) -> bool:
        """Whether any file holds documents (each kept apart by a separator when counted)."""
        return any(row_of(source).holds_documents for source in self.files)


def plan_inputs(
    paths: Iterable[str | os.PathLike],
    format: str | None = None,
    text_field: str = "text",
    *,
    storage_options: Mapping[str, object] | None = None,
    skip_bad_records: bool = False,
) -> InputPlan:
    """Every input inspected once (`inspect_input`; a bad one refused in one line), as a plan."""
    named = tuple(check_path_argument(path, "paths") for path in paths)
    files = tuple(inspect_input(path, format, text_field, storage_options=storage_options) for path in named)
    return InputPlan(named, files, text_field, skip_bad_records, storage_options)


def as_plan(
    inputs: InputPlan | str | os.PathLike | Iterable[str | os.PathLike],
    format: str | None = None,
    text_field: str = "text",
    *,
    storage_options: Mapping[str, object] | None = None,
    skip_bad_records: bool = False,
    name: str = "paths",
) -> InputPlan:
    """The plan of `inputs`: a plan as it is (made once, upstream: its options are its own), else one
    path or several inspected now. Every entry (train, counting, the cluster, the commands) takes its
    inputs through here, so no input is inspected twice."""
    if isinstance(inputs, InputPlan):
        return inputs
    if isinstance(inputs, Iterable) and not isinstance(inputs, (str, bytes, bytearray, memoryview)):
        named = [check_path_argument(path, name) for path in inputs]
    else:  # one path (bytes or anything else refused, naming the argument)
        named = [check_path_argument(inputs, name)]
    return plan_inputs(
        named, format, text_field, storage_options=storage_options, skip_bad_records=skip_bad_records
    )
