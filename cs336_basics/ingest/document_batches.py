"""What the stream counter is fed: documents taken from any iterable (records give their field, a
refillable buffer is copied), batched so that the counter takes one call per batch, not one per
document, and `_feed`, which hands each kind of item to the counter's method for it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..rules.contract import BPEInputError
from .sources import ArrowDocuments, LaidOutDocuments, encoded_documents
from .stream_counter import DocumentBatch, _StreamCounter

# Documents are handed from the reading thread to the counter in batches of about this many bytes:
# one queue item per document would cost more than parsing it.
_DOCUMENT_BATCH_BYTES = 1 << 20


def _received(document: Any, text_field: str, index: int) -> Any:
    """A document that is not a str or bytes, as it is kept until counted: a record (a mapping, as
    JSON lines hold them) gives its `text_field`; a mutable buffer is copied, since the caller may
    refill it for the next document (`buf[:] = ...; yield buf`) before this one is counted. Anything
    else is left for `encoded_documents` to refuse by its index."""
    if isinstance(document, Mapping):
        if text_field not in document:
            fields = ", ".join(map(repr, list(document)[:10])) or "none"
            raise BPEInputError(
                f"document {index} is a record without the field {text_field!r} (fields: {fields}); "
                "choose the field with text_field="
            )
        text = document[text_field]
        if not isinstance(text, (str, bytes, bytearray, memoryview)):
            raise BPEInputError(f"document {index}'s field {text_field!r} is a {type(text).__name__}, not a string")
        document = text
    if isinstance(document, (bytearray, memoryview)):
        return bytes(document)
    return document


def _batches(documents: Iterable[Any], batch_bytes: int, text_field: str = "text") -> Iterator[tuple[list[Any], int]]:
    """(a list of documents of about `batch_bytes`, the index of its first) from any iterable; an
    item without a length stops with the error `encoded_documents` gives it (naming its index).
    Items other than str and bytes are taken as `_received` says, when they are received."""
    batch: list[Any] = []
    size = start = 0
    iterator = iter(documents)
    while True:
        append = batch.append
        try:
            for document in iterator:
                kind = type(document)
                if kind is not str and kind is not bytes:
                    document = _received(document, text_field, start + len(batch))
                append(document)
                size += len(document) + 1  # characters, not bytes: a batch may hold up to 4x as much
                if size >= batch_bytes:
                    break
        except TypeError:
            list(encoded_documents(batch, start=start))
            raise
        if not batch:
            return
        yield batch, start
        start += len(batch)
        batch, size = [], 0


def _joined_batches(
    documents: Iterable[Any],
    separator: bytes,
    batch_bytes: int = _DOCUMENT_BATCH_BYTES,
    *,
    checked: bool = True,
    text_field: str = "text",
) -> Iterator[tuple[bytes, int]]:
    """Documents joined by `separator` in batches of about `batch_bytes`, with how many each holds:
    the counter then takes one buffer per batch, not one Python call per document. Items that are
    not str go through `encoded_documents` (which names a bad item), unless `checked` says that bytes
    items are UTF-8 already (read from a file). Arrow sources are joined by Arrow (no Python object
    per document)."""
    if isinstance(documents, ArrowDocuments):
        yield from documents.joined(separator)
        return
    encode = str.encode
    for batch, start in _batches(documents, batch_bytes, text_field):
        try:
            # Each document encoded on its own: an ASCII one is copied as it is, where joining the str
            # first would widen the whole batch to its widest character (2.2x slower on real_mix).
            joined = separator.join([encode(document, "utf-8") for document in batch])
        except (TypeError, UnicodeEncodeError):
            if checked and all(type(document) is bytes for document in batch):
                joined = separator.join(batch)
            else:
                joined = separator.join(encoded_documents(batch, start=start))
        yield joined, len(batch)


def _document_items(
    counter: _StreamCounter, documents: Iterable[Any], batch_bytes: int, checked: bool, text_field: str = "text"
) -> Iterator[Any]:
    """What `_feed` takes from `documents`. Where the separator keeps documents apart, the native
    counter reads them in place: Arrow string arrays as they are, other documents in batches
    (`DocumentBatch`); else (documents joined by the separator, how many), in batches. Records
    (mappings) give their `text_field`."""
    if counter.apart and isinstance(documents, ArrowDocuments):
        return documents.chunks()
    if counter.apart:
        return (DocumentBatch(batch, start) for batch, start in _batches(documents, batch_bytes, text_field))
    return _joined_batches(documents, counter.separator, batch_bytes, checked=checked, text_field=text_field)


def _documents_in(item: Any) -> int:
    """How many documents an item of `_document_items` holds (a block of text: none)."""
    if isinstance(item, bytes):
        return 0
    if isinstance(item, DocumentBatch):
        return len(item.documents)
    if isinstance(item, LaidOutDocuments):
        return item.count
    return item[1] if isinstance(item, tuple) else len(item)


def _feed(counter: _StreamCounter, item: Any) -> int:
    """Counts an item of `_document_items` or `source_items`; how many documents it held."""
    if isinstance(item, bytes):
        counter.text(item)
    elif isinstance(item, DocumentBatch):
        counter.document_batch(item)
    elif isinstance(item, LaidOutDocuments):
        counter.laid_out_documents(item)
    elif isinstance(item, tuple):
        counter.joined_documents(*item)
    else:
        counter.arrow_documents(item)
    return _documents_in(item)
