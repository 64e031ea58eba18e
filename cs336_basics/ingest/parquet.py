"""Parquet: the `text_field` column, one document a row, read one row group at a time (pyarrow, in
the data extra). A task of the cluster is a run of row groups; the footer says how much text there is."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..rules.contract import BPEInputError
from .sources import ArrowDocuments, BadRecords, InputFile, _one_line, _optional, is_url
from .table import InputFormat


def parquet_file(source: InputFile) -> Any:
    """A `pyarrow.parquet.ParquetFile` of the input (a URL through an fsspec file object)."""
    _optional("pyarrow", "pyarrow", f"{source.path} is Parquet; reading it")
    import pyarrow.parquet as parquet

    try:
        return parquet.ParquetFile(source.open() if is_url(source.path) else source.path)
    except BPEInputError:
        raise
    except Exception as error:  # pyarrow raises its own ArrowInvalid for a file that is not Parquet
        raise BPEInputError(f"{source.path}: not a readable Parquet file ({error})") from None


def _documents(
    source: InputFile,
    text_field: str,
    skipped: BadRecords | None = None,
    row_groups: Iterable[int] | None = None,
    laid_out: bool = False,
) -> ArrowDocuments:
    """The `text_field` column of a Parquet file as UTF-8, read one row group at a time (`row_groups`:
    only these). Arrow strings cannot be bad records: `skipped` and `laid_out` are not used."""
    with parquet_file(source) as file:
        columns = file.schema_arrow.names
        groups = range(file.num_row_groups) if row_groups is None else row_groups
    if text_field not in columns:
        raise BPEInputError(
            f"{source.path} has no column {text_field!r}; its columns: {', '.join(columns)} (choose with --text-field)"
        )

    def columns_read() -> Iterator[Any]:
        import pyarrow

        pool = pyarrow.default_memory_pool()
        with parquet_file(source) as file:
            for group in groups:
                try:
                    # One thread: the counter has the cores (pyarrow's own pool would take them from it).
                    column = file.read_row_group(group, columns=[text_field], use_threads=False).column(0)
                except (OSError, pyarrow.ArrowException) as error:  # pyarrow's own message names no file
                    raise BPEInputError(
                        f"{source.path}: cannot read Parquet row group {group} (column {text_field!r}): "
                        f"{_one_line(error)}"
                    ) from None
                yield column
                # mimalloc, pyarrow's default allocator, keeps freed pages: a row group's worth each time
                # (measured: +129 MB peak counting real_mix's Parquet, +82 MB with this).
                pool.release_unused()

    return ArrowDocuments(columns_read, f"{source.path} column {text_field!r}")


def _refuse_compressed(source: InputFile, text_field: str, detected: bool) -> None:
    if source.compression is not None:
        raise BPEInputError(
            f"{source.path} is {source.compression}-compressed; Parquet files compress inside, decompress it first"
        )


def _parts(source: InputFile, range_bytes: int) -> list[tuple[tuple[int, ...], int]]:
    """Runs of row groups of about `range_bytes` (uncompressed, from the footer)."""
    with parquet_file(source) as file:
        metadata = file.metadata
    parts: list[tuple[tuple[int, ...], int]] = []
    group: list[int] = []
    group_bytes = 0
    for index in range(metadata.num_row_groups):
        group.append(index)
        group_bytes += metadata.row_group(index).total_byte_size
        if group_bytes >= range_bytes:
            parts.append((tuple(group), group_bytes))
            group, group_bytes = [], 0
    if group:
        parts.append((tuple(group), group_bytes))
    return parts


def _text_bytes(source: InputFile) -> int:
    """The uncompressed size of every row group, from the footer."""
    with parquet_file(source) as file:
        metadata = file.metadata
        return sum(metadata.row_group(index).total_byte_size for index in range(metadata.num_row_groups))


FORMAT = InputFormat(
    "parquet",
    "Parquet",
    magic=b"PAR1",
    named=lambda path: path.lower().endswith(".parquet"),
    documents=_documents,
    check=_refuse_compressed,
    parts=_parts,
    text_bytes=_text_bytes,
)
