"""The stream counter: text that arrives in blocks (decompressed files) or as documents (files of
documents, iterables of documents), cut at safe points and counted block by block, on the native
counter where it is built. Documents are kept apart by a separator, never counted across."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..rules.contract import BPEInputError, WordCountDict, decode_utf8
from ..rules.pattern import Pattern, resolve_pattern
from ..rules.splitting import count_words_in_text
from .sources import BLOCK_BYTES, ArrowDocuments, LaidOutDocuments, encoded_documents
from .text_ranges import _CutFinder
from .word_counts import CountTable, _native_module, add_count_tables

# Documents are joined by the first special token, as in a text file of documents joined by it. With
# no special token this string stands in: the counter splits on it as on a special token (so nothing
# crosses a document boundary and it is never counted), and text that holds it is refused. Its first
# character occurs once in it, so no occurrence in a document can overlap one put between documents.
DOCUMENT_SEPARATOR = "\U0010fffe<cs336 document boundary>"


@dataclass
class DocumentBatch:
    """Documents as the caller gave them (str or bytes), which the native counter reads where they lie
    (`WordCounter.count_texts`), and the index of the first, for error messages."""

    documents: list[Any]
    start: int


class _BufferSource:
    """A bytes buffer with `_Source`'s read interface, so `_CutFinder` finds safe cuts in it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self, start: int, end: int) -> bytes:
        return self.data[max(0, start) : min(self.size, end)]


class _StreamCounter:
    """Counts a stream of UTF-8 text, fed in pieces of any size, in blocks of about `block_bytes`
    that end at safe cuts (`_CutFinder`, the planner's rule), so the counts equal those of the whole
    stream counted at once. Text pieces continue each other (files read as if concatenated); each
    document is kept apart by the separator (the first special token, else DOCUMENT_SEPARATOR).

    With the compiled module each block is counted by one `WordCounter` on `num_threads` threads,
    the GIL released; without it by `splitting.count_words_in_text`, added into one dict. Memory: the count
    table plus a block (more only while the text has no safe cut at all)."""

    def __init__(
        self,
        special_tokens: list[str],
        num_threads: int | None,
        *,
        documents: bool,
        block_bytes: int = BLOCK_BYTES,
        started: bool = False,
        after_document: bool = False,
        expected_bytes: int = 0,
        pattern: str | Pattern | None = None,
    ) -> None:
        """`started` / `after_document`: this counter counts a later part of a stream (a task on a
        cluster) in which something, or a document, came before: its first document, or its text
        after a document, is then separated from it. `expected_bytes`: about how much text will be
        fed (0: not known), so the native tables are sized once rather than grown as blocks come.
        `pattern` (None: GPT-2's): one the native scanner does not run counts in Python, and one
        without `cuts` (`Pattern.cuts`) is cut at special tokens (or documents' ends) only."""
        self.pattern = resolve_pattern(pattern)
        self.private_separator = documents and not special_tokens
        self.tokens = [DOCUMENT_SEPARATOR] if self.private_separator else list(special_tokens)
        self.separator = self.tokens[0].encode("utf-8") if self.tokens else b""
        self._token_bytes = [token.encode("utf-8") for token in self.tokens]
        self._margin = max(max((len(token) for token in self._token_bytes), default=0), 1)
        self._block_bytes = block_bytes
        self._flush_at = block_bytes
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._started = started  # something was fed: a document that follows gets a separator first
        self._after_document = after_document  # the last piece was a document: text that follows gets one too
        self.documents_fed = 0
        self.text_fed = 0  # bytes of text and documents, separators not included
        self._text_tail = b""  # the end of the text run so far, to find the separator across pieces
        self._offset = 0  # stream bytes counted so far, for error messages
        self.label = "text"  # what is being fed, for error messages
        self.source_bytes = 0  # bytes of the equivalent text (DOCUMENT_SEPARATOR not included)
        native = _native_module() if self.pattern.native else None
        self._counter = (
            native.WordCounter(
                self.tokens,
                num_threads,
                expected_bytes,
                pattern=self.pattern.scanner,
                unicode=self.pattern.unicode_version,
            )
            if native is not None
            else None
        )
        self.native = self._counter is not None  # counts with the GIL released
        # Documents are counted as they come, each batch (or Arrow array) in place, when the separator keeps
        # them apart whatever they hold (<|endoftext|> does); else joined, and cut where it is safe.
        counter = self._counter
        self.apart = bool(counter is not None and self.tokens and counter.keeps_documents_apart(self.tokens[0]))
        self._table: WordCountDict = {}

    def _separate(self) -> None:
        self._put(self.separator)
        if not self.private_separator:  # a special token is text of the equivalent file
            self.source_bytes += len(self.separator)

    def text(self, data: bytes) -> None:
        """More text, continuing the text before it (a document before it is kept apart)."""
        if self._after_document:
            self._separate()
            self._after_document = False
            self._text_tail = b""
        if self.private_separator:
            joined = self._text_tail + data
            if self.separator in joined:
                raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
            self._text_tail = joined[-(len(self.separator) - 1) :]
        if self._counter is not None and len(data) >= self._block_bytes // 2:
            self._put_in_place(data)
        else:
            self._put(data)
        self._started = True
        self.source_bytes += len(data)
        self.text_fed += len(data)

    def _put_in_place(self, data: bytes) -> None:
        """A large piece of text counted where it lies: what is pending up to the piece's first safe cut
        (a small join), the piece up to its last safe cut (no copy), and its tail kept pending."""
        finder = _CutFinder(_BufferSource(data), self._token_bytes, self.pattern.cuts)
        end = len(data) - self._margin
        first = finder.first_at_or_after(self._margin) if end > self._margin else None
        last = finder.last_at_or_before(end, first) if first is not None and first <= end else None
        if last is None or first is None:
            self._put(data)
            return
        self._pending.append(data[:first])
        self._pending_bytes += first
        self._flush(final=True)
        with memoryview(data) as view:
            if last > first:
                self._count(view[first:last])
        rest = data[last:]
        self._pending = [rest] if rest else []
        self._pending_bytes = len(rest)
        self._flush_at = len(rest) + self._block_bytes

    def document(self, data: bytes) -> None:
        """One document, kept apart from what comes before and after it."""
        if self._started:
            self._separate()
        if self.private_separator and self.separator in data:
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        self._put(data)
        self._started = self._after_document = True
        self.source_bytes += len(data)
        self.text_fed += len(data)
        self.documents_fed += 1

    def joined_documents(self, joined: bytes, count: int) -> None:
        """`count` documents already joined by `self.separator`: the same as `document` for each, with
        the joining done elsewhere (in C++ for Arrow, on the reading thread for files)."""
        if count < 1:
            return
        if self.private_separator and joined.count(self.separator) != count - 1:
            # Exact: the separator's first character occurs once in it, so no occurrence can overlap
            # an inserted one; one more means a document holds it.
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        if self.apart:
            self._count_apart(joined, count)
            return
        if self._started:
            self._separate()
        self._put(joined)
        self._account(len(joined) - (count - 1) * len(self.separator), count)

    def _account(self, content: int, count: int) -> None:
        """`count` documents of `content` bytes in all were fed."""
        self._started = self._after_document = True
        self.source_bytes += content + (0 if self.private_separator else (count - 1) * len(self.separator))
        self.text_fed += content
        self.documents_fed += count

    def _separate_apart(self) -> None:
        """Before documents counted apart: the text pending before them ends at a safe cut (the
        separator's start), so it is counted first; the separator is accounted for."""
        if self._started:
            if self._pending_bytes:
                self._flush(final=True)
            self._offset += len(self.separator)
            self.source_bytes += 0 if self.private_separator else len(self.separator)

    def _count_apart(self, joined: bytes, count: int) -> None:
        """Documents joined by the separator that keeps them apart, counted as they are."""
        self._separate_apart()
        self._count(joined)
        self._account(len(joined) - (count - 1) * len(self.separator), count)

    def document_batch(self, batch: DocumentBatch) -> None:
        """Documents each counted where it lies by the native counter, when the separator keeps them
        apart; a bad one (not a document, not UTF-8) is named as `encoded_documents` names it."""
        documents = batch.documents
        if not documents:
            return
        self._separate_apart()
        refused = self.separator.decode("utf-8") if self.private_separator else ""
        try:
            kept, content = self._counter.count_texts(documents, self.tokens[0], refused)
        except (TypeError, ValueError) as error:
            list(encoded_documents(documents, start=batch.start))  # names the first bad document
            where = f"in the documents at stream byte {self._offset:,}"
            raise BPEInputError(f"{self.label}: {error} ({where})") from None
        if not kept:
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        self._offset += content + (len(documents) - 1) * len(self.separator)
        self._account(content, len(documents))

    def arrow_documents(self, array: Any) -> None:
        """The documents of an Arrow `string` or `large_string` array without nulls, read in place by
        the native counter when the separator keeps documents apart (else joined inside Arrow), in
        slices of about `block_bytes` of text."""
        if not self.apart:
            for joined, count in ArrowDocuments(lambda: [array], self.label).joined(self.separator):
                self.joined_documents(joined, count)
            return
        import pyarrow

        if len(array) == 0:
            return
        width = 8 if pyarrow.types.is_large_string(array.type) else 4
        _, offsets_buffer, data_buffer = array.buffers()
        first, end = array.offset, array.offset + len(array)
        view = memoryview(offsets_buffer)
        with view, view.cast("B") as raw, raw[: (end + 1) * width] as used, used.cast("iq"[width == 8]) as offsets:
            while first < end:
                # Rows for about block_bytes of text, from the average size of what is left.
                left = offsets[end] - offsets[first]
                rows = end - first if left <= self._block_bytes else max(1, (end - first) * self._block_bytes // left)
                content = offsets[first + rows] - offsets[first]
                self._count_in_place(data_buffer, offsets_buffer, width, first, rows, content)
                first += rows

    def laid_out_documents(self, documents: LaidOutDocuments) -> None:
        """A block of JSON-lines records as the compiled reader left them, read in place by the
        native counter (needs `apart`)."""
        if documents.count:
            self._count_in_place(documents.texts, documents.ends, 8, 0, documents.count, len(documents.texts))

    def _count_in_place(self, data: Any, offsets: Any, width: int, first: int, rows: int, content: int) -> None:
        """`rows` documents laid out as an Arrow string array lays them out (`WordCounter.count_documents`),
        holding `content` bytes, counted where they lie."""
        if self._started:
            if self._pending_bytes:
                self._flush(final=True)
            self._offset += len(self.separator)
            self.source_bytes += 0 if self.private_separator else len(self.separator)
        refused = self.separator.decode("utf-8") if self.private_separator else ""
        try:
            kept = self._counter.count_documents(data, offsets, width, first, rows, self.tokens[0], refused)
        except ValueError as error:
            where = f"in the documents at stream byte {self._offset:,}"
            raise BPEInputError(f"{self.label}: {error} ({where})") from None
        if not kept:
            raise BPEInputError(f"{self.label} holds cs336's internal document separator; pass a special token")
        self._offset += content + (rows - 1) * len(self.separator)
        self._account(content, rows)

    def _put(self, data: bytes) -> None:
        if data:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= self._flush_at:
                self._flush(final=False)

    def _flush(self, final: bool) -> None:
        buffer = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        cut: int | None = len(buffer)
        if not final:
            # Cuts stay a token's length before the end: what follows the buffer is not known yet.
            finder = _CutFinder(_BufferSource(buffer), self._token_bytes, self.pattern.cuts)
            cut = finder.last_at_or_before(len(buffer) - self._margin, 1) if len(buffer) > self._margin else None
            if not cut:
                # No safe cut yet (one enormous word?): wait for more text, scanning again only once
                # the buffer has doubled, so a long run without cuts costs linear time.
                self._pending, self._flush_at = [buffer], 2 * len(buffer)
                return
        with memoryview(buffer) as view:
            self._count(view[:cut])
        rest = buffer[cut:]
        self._pending = [rest] if rest else []
        self._pending_bytes = len(rest)
        self._flush_at = len(rest) + self._block_bytes

    def _count(self, block: bytes | memoryview) -> None:
        offset = self._offset
        try:
            if self._counter is not None:
                self._counter.count(block)
            else:
                text = decode_utf8(bytes(block), offset)
                add_count_tables(self._table, count_words_in_text(text, self.tokens, self.pattern))
        except (ValueError, UnicodeDecodeError) as error:
            raise BPEInputError(f"{self.label}: {error} (in the block at stream byte {offset:,})") from None
        self._offset += len(block)

    def take(self) -> CountTable:
        """The counts of everything fed (the counter is then empty)."""
        if self._pending_bytes:
            self._flush(final=True)
        if self._counter is not None:
            return self._counter.take()
        table, self._table = self._table, {}
        return table
