"""Reading input files and in-memory documents: the kit the format modules (`ingest/`) are built of.

This module opens inputs (local or fsspec URLs) and decompresses them (gzip, bzip2, xz, zstd;
recognised by their magic bytes, not their names), as any format's reader reads, never writing to
disk; it holds the shapes documents are handed to the counter in (`LaidOutDocuments`,
`ArrowDocuments`), bad-record accounting (`BadRecords`) and in-memory documents (`documents_of`:
any iterable of strings, a `pyarrow` table or array, a Hugging Face `datasets.Dataset`). It never
counts, never decides what a file is and never reads a format's records: `ingest/plan.py` inspects
each input once, and each format's module in `ingest/` (one row of `ingest/table.py`) says how its
files are recognised, read and cut into tasks.

zstd needs the `zstandard` package (the `data` extra); without it such an input stops with one line
saying what to install. A corrupt or truncated compressed stream names the file, the compressed
offset read and the decompressed bytes produced.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import io
import lzma
import os
import zlib
from array import array as int_array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..rules.contract import BPEInputError

__all__ = [
    "DATA_EXTRA",
    "ArrowDocuments",
    "BadRecords",
    "InputFile",
    "MissingDependency",
    "documents_of",
    "encoded_documents",
    "expand_inputs",
    "is_url",
    "read_blocks",
]

# What to install for zstd and Parquet/Arrow input (pyproject's `data` extra).
DATA_EXTRA = 'pip install "cs336-bpe[data]"'

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


class MissingDependency(BPEInputError):
    """An input needs an optional package that is not installed; the message says which."""


def _optional(module: str, package: str, why: str) -> Any:
    """The optional module, or one line saying which extra to install (tests simulate its absence by
    making this import fail)."""
    try:
        return __import__(module)
    except ImportError:
        raise MissingDependency(f"{why} needs the {package} package, in the data extra: {DATA_EXTRA}") from None


def compression_of(head: bytes) -> str | None:
    """'gzip', 'bzip2', 'xz' or 'zstd' from a file's first bytes, or None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in _BZIP2_BLOCK_MAGICS:
        return "bzip2"
    return None


def is_url(path: str) -> bool:
    return "://" in path


def check_path_argument(path: object, name: str = "input_path") -> str:
    """A path given as a str or an os.PathLike, as a str; bytes and anything else refused in one
    line (bytes would otherwise meet a str test deep inside, as a misleading TypeError)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, str):
        return path
    if isinstance(path, (bytes, bytearray, memoryview)):
        shown = repr(bytes(path[:60]))
        raise BPEInputError(
            f"{name} must be a path as str or os.PathLike, not bytes ({shown}): decode it with os.fsdecode(), "
            "or give documents to train_bpe_from_iterator"
        )
    raise BPEInputError(f"{name} must be a path as str or os.PathLike, not {type(path).__name__}")


def url_filesystem(path: str, storage_options: Mapping[str, object] | None) -> tuple[Any, str]:
    """fsspec's file system and path for a URL."""
    try:
        import fsspec
    except ImportError:
        raise BPEInputError(f"{path}: reading URLs needs fsspec (pip install fsspec)") from None
    try:
        return fsspec.core.url_to_fs(path, **(storage_options or {}))
    except ImportError as error:  # the protocol's package: "Install s3fs to access S3"
        raise MissingDependency(f"{path}: {error}") from None
    except ValueError as error:  # an unknown protocol, or a URL its file system cannot take
        if path.split("://", 1)[0] in fsspec.available_protocols():
            raise BPEInputError(f"{path}: {_one_line(error)}") from None
        raise BPEInputError(
            f"{path}: {_one_line(error)}; give a local path or a URL of a protocol fsspec reads "
            "(file://, s3://, gs://, https://, memory://, ...)"
        ) from None


@dataclass(frozen=True)
class InputFile:
    """An input file (a local path or an fsspec URL, read with `storage_options`) and how to read it:
    `format` names its row of `table.py` (which says what the file holds); `compression` is None or the
    compressed format of its bytes."""

    path: str
    format: str
    compression: str | None = None
    storage_options: Mapping[str, object] | None = field(default=None, compare=False)

    def open(self) -> BinaryIO:
        """The file's (compressed) bytes, from the start."""
        if not is_url(self.path):
            return open(self.path, "rb")
        fs, fs_path = url_filesystem(self.path, self.storage_options)
        try:
            return fs.open(fs_path, "rb")
        except OSError as error:
            raise BPEInputError(f"cannot read {self.path}: {error}") from None

    def size(self) -> int:
        if not is_url(self.path):
            return os.path.getsize(self.path)
        fs, fs_path = url_filesystem(self.path, self.storage_options)
        return int(fs.size(fs_path))


def name_without_compression(path: str) -> str:
    """A file name, lowercased, without a compressed format's suffix (`x.JSONL.gz` -> `x.jsonl`)."""
    lowered = path.lower()
    for suffix in _COMPRESSED_SUFFIXES:
        if lowered.endswith(suffix):
            return lowered[: -len(suffix)]
    return lowered


def _expand_url(url: str, storage_options: Mapping[str, object] | None) -> list[str]:
    """A URL as given, or, through fsspec, the files a glob pattern matches or a directory holds."""
    fs, fs_path = url_filesystem(url, storage_options)
    try:
        if glob.has_magic(fs_path) and not fs.exists(fs_path):
            found, what = fs.glob(fs_path), f"no file matches {url}"
        elif fs.isdir(fs_path):
            found, what = fs.find(fs_path), f"directory {url} holds no files"
        else:
            return [url]
        root = fs_path.split("*", 1)[0].rsplit("/", 1)[0] if glob.has_magic(fs_path) else fs_path
        # Hidden files and folders are not data (as for local directories), nor are directories.
        files = sorted(
            name
            for name in found
            if not any(part.startswith(".") for part in name[len(root) :].split("/") if part) and fs.isfile(name)
        )
    except OSError as error:
        raise BPEInputError(f"cannot list {url}: {error}") from None
    if not files:
        raise BPEInputError(what)
    return [fs.unstrip_protocol(name) for name in files]


def expand_inputs(
    inputs: Iterable[str | os.PathLike], storage_options: Mapping[str, object] | None = None
) -> list[str]:
    """Each input as given, a directory as the files under it (recursively) and a glob pattern as
    the files it matches, each expansion in sorted order (the order counting reads them in); URLs
    too, through fsspec (with `storage_options`). A pattern that matches nothing, or an empty
    directory, is refused. Everything found that is not a directory is kept, a FIFO, socket, device
    or broken link too, so that reading it refuses it as naming it directly does, never silently."""
    expanded: list[str] = []
    for item in inputs:
        text = os.fspath(item)
        if is_url(text):
            expanded += _expand_url(text, storage_options)
        elif Path(text).is_dir():
            # Hidden files and folders (.git, a run's lock file) are not data, as for ls and glob.
            files = sorted(
                str(path)
                for path in Path(text).rglob("*")
                if not path.is_dir() and not any(part.startswith(".") for part in path.relative_to(text).parts)
            )
            if not files:
                raise BPEInputError(f"directory {text} holds no files")
            expanded += files
        elif glob.has_magic(text) and not Path(text).exists():
            files = sorted(path for path in glob.glob(text, recursive=True) if not Path(path).is_dir())
            if not files:
                raise BPEInputError(f"no file matches {text}")
            expanded += files
        else:
            expanded.append(text)
    return expanded


# ---------------------------------------------------------------------------------------------
# Reading


class _CountingReader(io.RawIOBase):
    """A file read through, counting the bytes handed out: the decompressors read the compressed
    bytes through it, so an error can name how far into the compressed file it came (within one
    of the decompressor's reads, at most a few hundred KB)."""

    def __init__(self, source: InputFile) -> None:
        super().__init__()
        self._file = source.open()
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._file.readinto(buffer)
        self.position += count or 0
        return count  # type: ignore[return-value]

    def close(self) -> None:
        self._file.close()
        super().close()


def _open_decompressed(source: InputFile, raw: _CountingReader) -> BinaryIO:
    if source.compression is None:
        return io.BufferedReader(raw, 1 << 20)  # type: ignore[return-value]
    if source.compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if source.compression == "bzip2":
        return bz2.BZ2File(raw, "rb")  # type: ignore[return-value]
    if source.compression == "xz":
        return lzma.LZMAFile(raw, "rb")  # type: ignore[return-value]
    zstandard = _optional("zstandard", "zstandard", f"{source.path} is zstd-compressed; reading it")
    return _ZstdStream(zstandard, raw)  # type: ignore[return-value]


class _ZstdStream:
    """zstd frames decompressed one after another (zstd --rsyncable, pzstd and concatenated files
    hold several), with `read(size)`. zstandard's own stream_reader ends quietly at a frame cut off
    by a truncated file; here that is an error, as gzip, bz2 and lzma make it."""

    _RAW_READ = 1 << 17

    def __init__(self, zstandard: Any, raw: _CountingReader) -> None:
        self._zstandard = zstandard
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = self._decompressor.decompressobj()
        self._in_frame = False  # compressed bytes of the current frame were read, its end not yet
        self._raw = raw
        self._pieces: list[bytes] = []  # decompressed, not yet handed out
        self._held = 0
        self._ended = False

    def read(self, size: int) -> bytes:
        """At least `size` bytes (one decompressed piece more at most), fewer only at the end: each byte
        is copied once, when the pieces are joined."""
        while self._held < size and not self._ended:
            chunk = self._raw.read(self._RAW_READ)
            if not chunk:
                self._ended = True
                if self._in_frame:
                    raise self._zstandard.ZstdError("the file ends inside a zstd frame")
            while chunk:
                self._in_frame = True
                piece = self._frame.decompress(chunk)
                self._pieces.append(piece)
                self._held += len(piece)
                chunk = b""
                if self._frame.eof:  # the frame is whole; what follows it starts the next one
                    chunk = self._frame.unused_data
                    self._frame = self._decompressor.decompressobj()
                    self._in_frame = False
        block = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
        self._pieces, self._held = [], 0
        return block

    def __enter__(self) -> _ZstdStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pieces, self._held = [], 0


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
    compressed stream stops with one line naming the file, the compressed offset read so far and
    the decompressed bytes produced before it."""
    errors = _decompression_errors()
    offset = 0
    try:
        raw = _CountingReader(source)
    except OSError as error:
        raise BPEInputError(f"cannot read {source.path}: {error.strerror or error}") from None
    with raw, _open_decompressed(source, raw) as stream:
        while True:
            try:
                block = stream.read(block_bytes)
            except errors as error:
                size = source.size()
                where = (
                    f"near compressed byte {raw.position:,} of {size:,}, after {offset:,} decompressed bytes"
                    if source.compression
                    else f"at byte {offset:,}"
                )
                raise BPEInputError(
                    f"{source.path}: corrupt or truncated {source.compression or 'file'} data {where} "
                    f"({_one_line(error)})"
                ) from None
            if not block:
                return
            offset += len(block)
            yield block


def _one_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


class BadRecords:
    """Records skipped by `skip_bad_records`: how many, and where the first one was and why (what
    the run reports, as a note, instead of stopping at the first)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def add(self, why: str) -> None:
        self.count += 1
        if self.first is None:
            self.first = why

    def note(self) -> str | None:
        """The one-line note for stderr, or None when nothing was skipped."""
        if not self.count:
            return None
        records = "record" if self.count == 1 else "records"
        return f"note: skipped {self.count:,} bad {records} (--skip-bad-records); the first: {self.first}"


@dataclass(frozen=True)
class LaidOutDocuments:
    """Documents as one buffer and their offsets in it, as an Arrow string array lays them out:
    document i is `texts[ends[i]:ends[i + 1]]`, `ends` holding `count + 1` native int64 (bytes)."""

    texts: bytes
    ends: bytes

    @property
    def count(self) -> int:
        return len(self.ends) // 8 - 1

    @classmethod
    def of(cls, documents: list[bytes], texts: bytes = b"", ends: bytes = bytes(8)) -> LaidOutDocuments:
        """`documents` laid out after those of (`texts`, `ends`)."""
        offsets = int_array("q", ends)
        for document in documents:
            offsets.append(offsets[-1] + len(document))
        return cls(texts + b"".join(documents), offsets.tobytes())

    def __iter__(self) -> Iterator[bytes]:
        offsets = memoryview(self.ends).cast("q")
        return (self.texts[offsets[index] : offsets[index + 1]] for index in range(self.count))


# ---------------------------------------------------------------------------------------------
# In-memory sources: Arrow arrays and tables, Hugging Face datasets, any iterable of strings


def _is_from(value: object, package: str) -> bool:
    return type(value).__module__.split(".", 1)[0] == package


def _arrow_bytes(array: Any, what: str) -> Iterator[bytes]:
    """The strings of an Arrow string array or chunked array as UTF-8 bytes, a slice at a time.

    The column is viewed as binary (the same buffers, no copy), so each value becomes one bytes
    object and never a str that would be encoded again. (The native counter reads the buffers in
    place instead: `ArrowDocuments.chunks`.)"""
    import pyarrow

    array = _plain_strings(array)
    _check_strings(array, what)
    binary = pyarrow.binary() if pyarrow.types.is_string(array.type) else pyarrow.large_binary()
    chunks = array.chunks if isinstance(array, pyarrow.ChunkedArray) else [array]
    for chunk in chunks:
        as_binary = chunk.view(binary)
        for start in range(0, len(chunk), ARROW_BATCH_ROWS):
            yield from as_binary.slice(start, ARROW_BATCH_ROWS).to_pylist()


def _plain_strings(array: Any) -> Any:
    """A dictionary-encoded string column (Parquet keeps them, pandas' categoricals make them) as plain
    strings, which the counters read; any other array as it is."""
    import pyarrow

    kind = array.type
    if pyarrow.types.is_dictionary(kind) and (
        pyarrow.types.is_string(kind.value_type) or pyarrow.types.is_large_string(kind.value_type)
    ):
        return array.cast(kind.value_type)
    return array


def _check_strings(array: Any, what: str) -> None:
    """An Arrow string (or large_string) array without nulls, or one line saying what is wrong."""
    import pyarrow

    if not (pyarrow.types.is_string(array.type) or pyarrow.types.is_large_string(array.type)):
        raise BPEInputError(f"{what} holds {array.type}, not strings")
    if array.null_count:
        import pyarrow.compute  # only here: its first import takes about 0.1 s

        first = pyarrow.compute.index(array.is_null(), True).as_py()
        raise BPEInputError(f"{what} has a null at row {first}")


class ArrowDocuments:
    """Documents held in Arrow string arrays (a table's column, an array, a dataset's batches, a
    Parquet file's row groups), produced lazily by `arrays()`. Iterated, each is its UTF-8 bytes
    (Arrow strings are UTF-8 by contract and the counter checks them again, so `encoded_documents`
    passes them on unchecked); `joined` joins them by a separator inside Arrow, one buffer per batch
    and no Python object per document."""

    def __init__(self, arrays: Callable[[], Iterable[Any]], what: str, text_bytes: int = 0) -> None:
        self.arrays = arrays
        self.what = what
        self._text_bytes = text_bytes

    def text_bytes(self) -> int:
        """The documents' bytes when known without reading them (0: not known)."""
        return self._text_bytes

    def __iter__(self) -> Iterator[bytes]:
        for array in self.arrays():
            yield from _arrow_bytes(array, self.what)

    def chunks(self) -> Iterator[Any]:
        """The string arrays (`string` or `large_string`, no nulls) that hold the documents, in order:
        what the native counter reads in place (`WordCounter.count_documents`)."""
        import pyarrow

        for array in self.arrays():
            array = _plain_strings(array)
            _check_strings(array, self.what)
            yield from array.chunks if isinstance(array, pyarrow.ChunkedArray) else [array]

    def joined(self, separator: bytes) -> Iterator[tuple[bytes, int]]:
        """(documents joined by `separator`, how many) for batches of ARROW_BATCH_ROWS rows (for the
        counters that cannot read the arrays in place)."""
        import pyarrow
        import pyarrow.compute

        text_separator = separator.decode("utf-8")
        for chunk in self.chunks():
            for start in range(0, len(chunk), ARROW_BATCH_ROWS):
                piece = chunk.slice(start, ARROW_BATCH_ROWS)
                # One list holding every row of the piece, joined in C++.
                offsets = pyarrow.array([0, len(piece)], pyarrow.int32())
                listed = pyarrow.ListArray.from_arrays(offsets, piece)
                joined = pyarrow.compute.binary_join(listed, pyarrow.scalar(text_separator, piece.type))[0]
                yield joined.as_buffer().to_pybytes(), len(piece)


def documents_of(texts: object, text_field: str = "text") -> tuple[Iterable[object], int | None]:
    """The documents of an in-memory source, and how many there are when that is known: a pyarrow
    `Table` (its `text_field` column), `ChunkedArray` or string `Array`, a Hugging Face `Dataset` or
    `IterableDataset` (read in batches of its `text_field`), or any iterable (items checked later)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of documents, not one string; wrap it in a list")
    if _is_from(texts, "pyarrow"):
        if hasattr(texts, "column_names"):  # Table or RecordBatch
            if text_field not in texts.column_names:
                raise BPEInputError(
                    f"the table has no column {text_field!r}; its columns: {', '.join(texts.column_names)}"
                )
            texts = texts.column(text_field)
        column = texts
        return ArrowDocuments(lambda: [column], f"column {text_field!r}", column.nbytes), len(texts)
    if _is_from(texts, "datasets") and hasattr(texts, "iter"):
        columns = getattr(texts, "column_names", None)
        if columns is not None and text_field not in columns:
            raise BPEInputError(f"the dataset has no column {text_field!r}; its columns: {', '.join(columns)}")
        length = len(texts) if hasattr(texts, "__len__") else None
        if hasattr(texts, "with_format") and length is not None:
            # A Dataset is Arrow underneath: its batches as Arrow tables (indices, after a shuffle or
            # select, applied by datasets), never a Python dict of lists.
            arrow = texts.with_format("arrow")

            def arrow_batches() -> Iterator[Any]:
                for batch in arrow.iter(batch_size=ARROW_BATCH_ROWS):
                    yield batch.column(text_field)

            return ArrowDocuments(arrow_batches, f"the dataset's column {text_field!r}"), length

        def batches() -> Iterator[object]:
            for batch in texts.iter(batch_size=ARROW_BATCH_ROWS):
                yield from batch[text_field]

        return batches(), length
    if not isinstance(texts, Iterable):
        raise TypeError(f"texts must be an iterable of str, got {type(texts).__name__}")
    return texts, len(texts) if hasattr(texts, "__len__") else None  # type: ignore[arg-type]


def encoded_documents(
    documents: Iterable[object], advance: Callable[[int], object] | None = None, start: int = 0
) -> Iterator[bytes]:
    """Each document as UTF-8 bytes: a str is encoded, bytes are checked to be UTF-8; anything else
    is a TypeError naming its index (counted from `start`). `advance(1)` after each document (a
    progress bar in documents). Documents read from Arrow (`ArrowDocuments`) are bytes already and
    pass as they are."""
    if isinstance(documents, ArrowDocuments):
        for document in documents:
            yield document
            if advance is not None:
                advance(1)
        return
    for index, document in enumerate(documents, start):
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
        if advance is not None:
            advance(1)
