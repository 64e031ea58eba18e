"""Word counts as a first-class artifact: count where the data lives, add the counts up, train later.

BPE merges never cross a pre-token, so the summed word counts are all training needs: counting a
corpus in pieces (files, byte ranges, machines) and adding the tables gives exactly the table of the
whole, as long as every piece ends where no pre-token and no special token is cut.

    from .counting import count_words                                       # counting.py counts
    counts = count_words(["part1.txt", "part2.txt"], ["<|endoftext|>"])   # as if concatenated
    counts.save("counts.bin")
    total = WordCounts.load("counts.bin") + WordCounts.load("other.bin")
    vocab, merges = train_bpe_from_counts(total, 32_000)                    # cs336_basics.trainers

This module holds the artifact: `WordCounts`, its count file, and the operations on count tables
(adding, slicing, concatenating) that counting, the cluster path and training share. How inputs are
planned, read and counted into a `WordCounts` is `counting.py`.

Count file format, version 2 (all integers little-endian):

    offset  size            field
    0       8               magic b"CS336WC\\0"
    8       4               format version (uint32) = 2
    12      4               P: length of the pattern (uint32)
    16      P               the pre-tokenization pattern, UTF-8
            4               U: length of the Unicode version (uint32), 0 when not known
            U               the Unicode version of the pattern's character classes ("16.0"), ASCII
            4               S: number of special tokens (uint32)
            S x (4 + len)   each special token: length (uint32), then UTF-8 bytes, in vocabulary order
            8               bytes of text counted (uint64)
            8               N: number of distinct words (uint64)
            8               B: total length of the words (uint64)
            4 N             word lengths (uint32 each)
            8 N             word counts (uint64 each, every one >= 1)
            B               the words' bytes, concatenated, words in ascending byte order
            4               CRC-32 (zlib.crc32) of every byte before it

Version 1 is version 2 without the Unicode version (U and its bytes): it still loads, its version
not known (`WordCounts.unicode` None). Words are sorted, so equal counts always give byte-identical
files. A file with another magic, another version, a failing checksum, a length that does not add
up, a count of 0 or words not in strictly ascending order is refused with an error naming the file.
With the compiled module the arrays are read straight into a C++ table (`NativeWordCounts`), no
Python object per word.
"""

from __future__ import annotations

import codecs
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from pickle import PickleBuffer
from typing import TYPE_CHECKING, Any, TypeAlias

import regex

from ..native.backend import NativeUnavailable, load_native
from ..rules.contract import BPEInputError, WordCountDict
from ..rules.pattern import Pattern, check_unicode, first_classed_otherwise, pattern_label
from ..rules.splitting import GPT2_SPLIT_PATTERN

if TYPE_CHECKING:
    from ..native._count_cpp import NativeWordCounts
    from ..rules.presets import TrainingRules

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "CountNotes",
    "CountTable",
    "TableArrays",
    "WordCountFileError",
    "WordCounts",
    "absent_special_tokens",
    "absent_tokens_note",
    "add_count_tables",
    "add_tables",
    "concatenate_slices",
    "count_notes",
    "counted_text_bytes",
    "looks_misspelled",
    "split_table",
    "token_brackets",
    "unmatched_note",
    "unmatched_text_bytes",
]

MAGIC = b"CS336WC\x00"
FORMAT_VERSION = 2
# Older format versions that still load (version 1: no Unicode version).
_READABLE_VERSIONS = (1, FORMAT_VERSION)
_LITTLE_ENDIAN = sys.byteorder == "little"



class WordCountFileError(BPEInputError):
    """A count file that cannot be read: wrong magic, unknown version, corrupt or truncated."""


def add_count_tables(into: WordCountDict, other: Mapping[bytes, int]) -> WordCountDict:
    """Add `other`'s counts into `into` (in place) and return it."""
    get = into.get
    for word, count in other.items():
        into[word] = get(word, 0) + count
    return into


def _native_module():
    """The compiled module with the native counter and table operations, or None when it is not built,
    CS336_PURE_PYTHON is set, or this machine is big-endian (count files are little-endian)."""
    if not _LITTLE_ENDIAN:
        return None
    try:
        return load_native("_count_cpp")
    except NativeUnavailable:
        return None


# A count table: word -> count as a dict (`WordCountDict`), or (with the compiled module) a
# NativeWordCounts, which holds the words in C++ and travels between processes as `TableArrays`.
CountTable: TypeAlias = "WordCountDict | NativeWordCounts"


def add_tables(tables: Sequence[CountTable]) -> CountTable:
    """The sum of count tables as a new table (the inputs are not changed): added in C++ when all are
    native, else (or when a sum reaches 2**63) as dicts."""
    if tables and all(not isinstance(table, dict) for table in tables):
        try:
            return _native_module().add_word_counts(tables)
        except OverflowError:
            pass
    total: WordCountDict = {}
    for table in tables:
        add_count_tables(total, table if isinstance(table, dict) else table.to_dict())
    return total


def split_table(table: CountTable, num_slices: int) -> list[CountTable]:
    """A count table cut into `num_slices` by a hash of the word, the same for every table of its kind
    (native tables by the C++ word_slice, dicts by CRC-32): native tables summed slice by slice
    share no word, so `concatenate_slices` only has to put their sums one after the other."""
    if not isinstance(table, dict):
        return table.split_into_slices(num_slices)
    slices: list[WordCountDict] = [{} for _ in range(num_slices)]
    for word, count in table.items():
        slices[zlib.crc32(word) % num_slices][word] = count
    return slices


def counted_text_bytes(table: CountTable) -> int:
    """The bytes of the text a count table holds: each word's length times its count (a native table
    sums them in C: 40 ms a training run on real_mix through its arrays)."""
    if isinstance(table, Mapping):
        return sum(len(word) * count for word, count in table.items())
    return table.text_bytes()


class TableArrays:
    """A native table's three arrays (`to_arrays`: words, lengths, counts) as they travel to the
    client: out of band with pickle protocol 5, and concatenated with other slices' arrays in one
    copy by `concatenate_slices`, where unpickling tables and concatenating them copies twice."""

    __slots__ = ("arrays",)

    def __init__(self, words: Any, lengths: Any, counts: Any) -> None:
        self.arrays = (words, lengths, counts)

    def __reduce_ex__(self, protocol: int):
        return TableArrays, tuple(PickleBuffer(array) for array in self.arrays) if protocol >= 5 else self.arrays


def concatenate_slices(tables: Sequence[CountTable | TableArrays]) -> CountTable:
    """The sum of the slice sums of `split_table` as one new table: concatenated in C++ when all are
    native (all were sliced alike, so no word is in two); added as dicts otherwise (a dict may be a
    mix of tables sliced by different hashes, when workers differ). Native tables may also come as
    `TableArrays`."""
    native = _native_module()
    if tables and all(isinstance(table, TableArrays) for table in tables):
        return native.concatenate_arrays([table.arrays for table in tables])
    tables = [
        native.word_counts_from_arrays(*table.arrays) if isinstance(table, TableArrays) else table for table in tables
    ]
    if tables and all(not isinstance(table, dict) for table in tables):
        return native.concatenate_word_counts(tables)
    return add_tables(tables)


class WordCounts:
    """How often each pre-token (as UTF-8 bytes) occurs, and what it was counted with.

    `special_tokens` split the text and are not counted; `pattern` is the pre-tokenization pattern's
    regex (`pattern.Pattern.regex`: a count file records the expression, not a name);
    `source_bytes` is how much text was counted; `unicode` is the Unicode version of the pattern's
    character classes the counting used (`pattern.Pattern.unicode`; None: not known, as in a count file
    of format version 1). Tables add up (`a + b`) only when both were counted with the same pattern
    and special tokens, and not by two different Unicode versions.

    The table is `counts`, a `{word_bytes: count}` dict. Counted or loaded with the compiled module,
    it is held in C++ instead (`native`) until `counts` is first asked for: adding, saving, loading
    and training with bpe_v7 then never build a Python object per word.
    """

    def __init__(
        self,
        counts: Mapping[bytes, int] | CountTable,
        special_tokens: Iterable[str] = (),
        pattern: str = GPT2_SPLIT_PATTERN,
        source_bytes: int = 0,
        unicode: str | None = None,
    ) -> None:
        self._dict: WordCountDict | None = None
        self._native: CountTable | None = None
        self._hold(counts)
        self.special_tokens = list(special_tokens)
        self.pattern = pattern
        self.source_bytes = source_bytes
        self.unicode = check_unicode(unicode)
        # Bad JSON-lines records left out by `skip_bad_records` (not saved: a count file holds counts).
        self.skipped_records = 0
        # The bytes of the special tokens in the text, where counting measured them (a custom pattern's
        # note on the text it leaves unmatched needs them); None: not known. Not saved.
        self.special_token_bytes: int | None = None

    def _hold(self, table: Mapping[bytes, int] | CountTable) -> None:
        if isinstance(table, Mapping):
            self._dict, self._native = (table if isinstance(table, dict) else dict(table)), None
        else:
            self._dict, self._native = None, table

    @property
    def counts(self) -> WordCountDict:
        """The table as a dict (built once from the native table, which is then dropped)."""
        if self._dict is None:
            self._dict, self._native = self._native.to_dict(), None
        return self._dict

    @counts.setter
    def counts(self, table: Mapping[bytes, int]) -> None:
        self._hold(dict(table))

    @property
    def native(self) -> CountTable | None:
        """The table held in C++ (a NativeWordCounts), or None when it is a dict."""
        return self._native

    def __len__(self) -> int:
        return len(self._native if self._dict is None else self._dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WordCounts):
            return NotImplemented
        return (
            (self.special_tokens, self.pattern, self.unicode, self.source_bytes)
            == (other.special_tokens, other.pattern, other.unicode, other.source_bytes)
            and self._table_as_dict() == other._table_as_dict()
        )

    def __repr__(self) -> str:
        return (
            f"WordCounts({len(self):,} words, special_tokens={self.special_tokens!r}, "
            f"unicode={self.unicode!r}, source_bytes={self.source_bytes:,})"
        )

    def _table_as_dict(self) -> WordCountDict:
        return self._dict if self._dict is not None else self._native.to_dict()

    @property
    def total_words(self) -> int:
        return sum(self._dict.values()) if self._dict is not None else self._native.total_count()

    @property
    def pattern_label(self) -> str:
        """The pattern as messages name it: `gpt2`, `cl100k`, `o200k`, else the regex itself."""
        return pattern_label(self.pattern)

    def check_compatible(self, other: WordCounts) -> None:
        if other.pattern != self.pattern:
            raise BPEInputError(
                "cannot add word counts made with different pre-tokenization patterns: "
                f"{self.pattern_label} and {other.pattern_label}"
            )
        if None not in (self.unicode, other.unicode) and other.unicode != self.unicode:
            raise BPEInputError(
                "cannot add word counts made with the character classes of different Unicode versions: "
                f"{self.unicode} and {other.unicode}"
            )
        if list(other.special_tokens) != list(self.special_tokens):
            raise BPEInputError(
                f"cannot add word counts made with different special tokens: {self.special_tokens} "
                f"and {other.special_tokens}"
            )

    def add(self, other: WordCounts) -> WordCounts:
        """Add `other` into this table (in place) and return self. The sum's Unicode version is the
        tables' one; where one table's is not known, the sum's is not either, unless that table is empty."""
        self.check_compatible(other)
        if not len(self):
            self.unicode = other.unicode
        elif other.unicode != self.unicode and len(other):
            self.unicode = None
        if self._native is not None and other._native is not None:
            self._hold(add_tables([self._native, other._native]))
        else:
            add_count_tables(self.counts, other._table_as_dict())
        self.source_bytes += other.source_bytes
        return self

    def __add__(self, other: WordCounts) -> WordCounts:
        if not isinstance(other, WordCounts):
            return NotImplemented
        table = self._native if self._dict is None else dict(self._dict)  # native tables are never changed
        return WordCounts(table, self.special_tokens, self.pattern, self.source_bytes, self.unicode).add(other)

    def first_classed_otherwise(self, unicode: str) -> str | None:
        """A character of the words that Unicode `unicode`'s tables class otherwise than the version
        the counts were made by (`self.unicode`; not known: than any version), or None: the text
        splits into these words under `unicode` too (`pattern.first_classed_otherwise`; 0.2-0.3 s on the
        5.6 MB of words of 50 MB of real_mix, only where the versions differ)."""
        if self.unicode == unicode:
            return None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for chunk in self._word_chunks():
            found = first_classed_otherwise(decoder.decode(chunk), unicode, self.unicode)
            if found is not None:
                return found
        return None

    def _word_chunks(self, chunk_bytes: int = 16 << 20) -> Iterable[bytes]:
        """The words back to back, in pieces of about `chunk_bytes` (a piece may end inside a character)."""
        if self._dict is None:
            blob = memoryview(self._native.to_arrays()[0])
            for start in range(0, len(blob), chunk_bytes):
                yield bytes(blob[start : start + chunk_bytes])
            return
        piece: list[bytes] = []
        size = 0
        for word in self._dict:
            piece.append(word)
            size += len(word)
            if size >= chunk_bytes:
                yield b"".join(piece)
                piece, size = [], 0
        yield b"".join(piece)

    # -----------------------------------------------------------------------------------------
    # The binary format (see the module docstring)

    def _header(self, num_words: int, blob_length: int) -> bytes:
        pattern = self.pattern.encode("utf-8")
        unicode = (self.unicode or "").encode("ascii")
        parts = [MAGIC, struct.pack("<II", FORMAT_VERSION, len(pattern)), pattern]
        parts += [struct.pack("<I", len(unicode)), unicode]
        parts.append(struct.pack("<I", len(self.special_tokens)))
        for token in self.special_tokens:
            encoded = token.encode("utf-8")
            parts += [struct.pack("<I", len(encoded)), encoded]
        parts.append(struct.pack("<QQQ", self.source_bytes, num_words, blob_length))
        return b"".join(parts)

    def _arrays(self) -> tuple[bytes, bytes, bytes]:
        """(words blob, lengths, counts) in the file's word order and byte order."""
        if self._dict is None:
            try:
                return self._native.sorted_by_bytes().to_arrays()
            except ValueError as error:  # a count below 1 (a table not from counting)
                raise BPEInputError(f"word counts must be positive: {error}") from None
        for word, count in self._dict.items():
            if not isinstance(word, bytes) or isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise BPEInputError(f"word counts must map bytes to positive integers, got {word!r}: {count!r}")
        words = sorted(self._dict)
        lengths = array("I", map(len, words))
        counts = array("Q", (self._dict[word] for word in words))
        if not _LITTLE_ENDIAN:
            lengths.byteswap()
            counts.byteswap()
        return b"".join(words), lengths.tobytes(), counts.tobytes()

    def to_bytes(self) -> bytes:
        blob, lengths, counts = self._arrays()
        body = b"".join([self._header(len(lengths) // 4, len(blob)), lengths, counts, blob])
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<bytes>", *, for_training: bool = False) -> WordCounts:
        """The counts a count file's bytes hold (any uint64 counts). `for_training` also refuses
        counts that training cannot add up in 64 bits (`load` reads files for training)."""

        def refuse(why: str) -> WordCountFileError:
            return WordCountFileError(f"{source}: not a usable word-count file: {why}")

        if len(data) < 16 or data[:8] != MAGIC:
            raise refuse("it does not start with the magic bytes b'CS336WC\\0' (not a count file?)")
        (version,) = struct.unpack_from("<I", data, 8)
        if version not in _READABLE_VERSIONS:
            raise refuse(
                f"it is format version {version}; this cs336_basics reads versions "
                f"{', '.join(map(str, _READABLE_VERSIONS))}"
            )
        if len(data) < 20 or struct.unpack_from("<I", data, len(data) - 4)[0] != zlib.crc32(data[:-4]):
            raise refuse(f"checksum mismatch, the file is corrupt or truncated ({len(data):,} bytes)")
        try:
            offset = 12
            (pattern_length,) = struct.unpack_from("<I", data, offset)
            pattern = data[offset + 4 : offset + 4 + pattern_length].decode("utf-8")
            offset += 4 + pattern_length
            unicode = None
            if version >= 2:
                (unicode_length,) = struct.unpack_from("<I", data, offset)
                unicode = data[offset + 4 : offset + 4 + unicode_length].decode("ascii") or None
                offset += 4 + unicode_length
            (num_specials,) = struct.unpack_from("<I", data, offset)
            offset += 4
            specials = []
            for _ in range(num_specials):
                (length,) = struct.unpack_from("<I", data, offset)
                specials.append(data[offset + 4 : offset + 4 + length].decode("utf-8"))
                offset += 4 + length
            source_bytes, num_words, blob_length = struct.unpack_from("<QQQ", data, offset)
            offset += 24
        except (struct.error, UnicodeDecodeError, ValueError) as error:
            raise refuse(f"its header is malformed ({error})") from None
        try:
            check_unicode(unicode)
        except BPEInputError as error:  # a version this package has no tables for (a newer one's file)
            raise refuse(str(error)) from None
        blob_start = offset + 12 * num_words
        if blob_start + blob_length + 4 != len(data):
            raise refuse(f"its length is {len(data):,} bytes, the header promises {blob_start + blob_length + 4:,}")
        view = memoryview(data)
        lengths = view[offset : offset + 4 * num_words]
        counts = view[offset + 4 * num_words : blob_start]
        blob = view[blob_start : blob_start + blob_length]
        if for_training:
            _check_count_sums(lengths, counts, refuse)
        table = _table_from_arrays(blob, lengths, counts, refuse)
        return cls(table, specials, pattern, source_bytes, unicode)

    def save(self, path: str | os.PathLike, *, on_commit: Callable[[], object] | None = None) -> Path:
        """Write the count file (to a temporary name, then renamed: never half-written); `on_commit`
        is called once it is in place (see `serialization.write_atomically`)."""
        from ..outputs.serialization import write_atomically

        target = Path(path)
        write_atomically(target, self.to_bytes(), on_commit=on_commit)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordCounts:
        target = Path(path)
        if not target.is_file():
            raise WordCountFileError(f"count file not found: {target}")
        return cls.from_bytes(target.read_bytes(), str(target), for_training=True)

    @classmethod
    def load_all(cls, paths: Iterable[str | os.PathLike]) -> WordCounts:
        """The sum of several count files (which must share pattern and special tokens)."""
        total: WordCounts | None = None
        for path in paths:
            counts = cls.load(path)
            total = counts if total is None else total.add(counts)
        if total is None:
            raise BPEInputError("no count files given")
        return total


_INT64_LIMIT = 1 << 63


def _length_and_count_arrays(lengths: memoryview, counts: memoryview) -> tuple[array, array]:
    """A count file's word lengths (uint32) and counts (uint64), little-endian on disk, as arrays."""
    length_array, count_array = array("I"), array("Q")
    length_array.frombytes(lengths)
    count_array.frombytes(counts)
    if not _LITTLE_ENDIAN:
        length_array.byteswap()
        count_array.byteswap()
    return length_array, count_array


def _check_count_sums(lengths: memoryview, counts: memoryview, refuse) -> None:
    """Refuse counts that training cannot add up in 64-bit integers: their sum, or the most any pair
    count can reach (a word of n tokens holds n - 1 pairs, each weighted by the word's count). Text
    never comes near (the counts add up to at most its bytes), so only a crafted file fails here."""
    length_array, count_array = _length_and_count_arrays(lengths, counts)
    total = sum(count_array)
    if total >= _INT64_LIMIT:
        raise refuse(f"its counts add up to {total:,}, more than 64-bit training counts hold (2**63 - 1)")
    # The bound below is exact work per word; the product of two C-speed aggregates usually spares it.
    if total * max(length_array, default=0) < _INT64_LIMIT:
        return
    pairs = sum(count * (length - 1) for count, length in zip(count_array, length_array) if length > 1)
    if pairs >= _INT64_LIMIT:
        raise refuse(f"its pair counts can reach {pairs:,}, more than 64-bit training counts hold (2**63 - 1)")


def _table_from_arrays(blob: memoryview, lengths: memoryview, counts: memoryview, refuse) -> CountTable:
    """A count file's table: native when the compiled module is there and every count fits in int64,
    else a dict. Words must be strictly ascending (so none is listed twice)."""
    native = _native_module()
    if native is not None:
        try:
            table = native.word_counts_from_arrays(blob, lengths, counts)
        except ValueError as error:
            raise refuse(f"its word table does not add up ({error})") from None
        except OverflowError:
            table = None  # counts of 2**63 or more: Python ints hold them
        if table is not None:
            if table.first_unordered_word() != len(table):
                raise refuse("its words are not in strictly ascending order (a word listed twice?)")
            return table
    length_array, count_array = _length_and_count_arrays(lengths, counts)
    if sum(length_array) != len(blob) or 0 in count_array:
        raise refuse("its word table does not add up")
    data = bytes(blob)
    ends = list(accumulate(length_array, initial=0))
    words = [data[start:end] for start, end in zip(ends, ends[1:])]
    if any(earlier >= later for earlier, later in zip(words, words[1:])):
        raise refuse("its words are not in strictly ascending order (a word listed twice?)")
    return dict(zip(words, count_array))


# ---------------------------------------------------------------------------------------------
# What the counts tell of the text they came from: the notes a run prints before its merge phase


@dataclass(frozen=True)
class CountNotes:
    """What a run notes of its counts before merging (`count_notes`): the special tokens the text never
    holds, and the bytes a custom pattern matched nowhere with the bytes they are a share of."""

    absent_special_tokens: list[str] = field(default_factory=list)
    unmatched_bytes: int = 0
    matchable_bytes: int = 0


def count_notes(
    word_counts: Sized,
    special_tokens: Sequence[str],
    source_bytes: int,
    rules: TrainingRules,
    special_bytes: Callable[[], int | None] | None = None,
) -> CountNotes:
    """The notes on counts of the text of `source_bytes` bytes (0: not known), said on stderr where they
    matter: special tokens the text never holds though it holds their brackets (`looks_misspelled`, a
    typo), text a custom pattern matched nowhere (`unmatched_text_bytes`; `special_bytes` measures the
    special tokens' bytes in that text, None: not known). A preset that counts special tokens as text,
    or a token of its own (nanochat's are for chats), is never absent."""
    absent = [] if rules.specials_as_text else absent_special_tokens(word_counts, special_tokens, source_bytes)
    absent = [token for token in absent if token not in rules.own_special_tokens]
    near_misses = looks_misspelled(absent, word_counts) if absent else []
    if near_misses:
        print(f"note: {absent_tokens_note(near_misses)}", file=sys.stderr)
    unmatched, matchable = unmatched_text_bytes(word_counts, special_tokens, source_bytes, rules.pattern, special_bytes)
    if unmatched:
        print(f"note: {unmatched_note(rules.pattern, unmatched, matchable)}", file=sys.stderr)
    return CountNotes(absent, unmatched, matchable)


def unmatched_text_bytes(
    word_counts: Sized,
    special_tokens: Sequence[str],
    source_bytes: int,
    pattern: Pattern,
    special_bytes: Callable[[], int | None] | None = None,
) -> tuple[int, int]:
    """The bytes of the text of `source_bytes` bytes that a custom `pattern` matched nowhere, and the
    bytes of that text less its special tokens; (0, 0) where nothing is left out or it is not known
    (a named pattern matches all text; with special tokens, `special_bytes` must measure theirs). The
    counts' bytes are every match's, so the rest is special tokens and unmatched text."""
    if pattern.name is not None or source_bytes <= 0:
        return 0, 0
    outside = source_bytes - counted_text_bytes(word_counts)
    if outside <= 0:  # none left out, or counts not of that text (a table made by hand)
        return 0, 0
    specials = 0
    if special_tokens:
        measured = special_bytes() if special_bytes is not None else None
        if measured is None:
            return 0, 0
        specials = measured
    unmatched = max(0, outside - specials)
    return unmatched, source_bytes - specials


def unmatched_note(pattern: Pattern, unmatched: int, matchable: int) -> str:
    """The one-line note for text a custom pattern leaves unmatched: training counted it nowhere."""
    share = unmatched / matchable if matchable else 1.0
    return (
        f"pattern {pattern_label(pattern.regex)} matches no part of {unmatched:,} bytes ({share:.1%}) of the "
        "training text: they are in no pre-token here; encoding makes each such stretch a pre-token of its own "
        "(as HF's Split; Tokenizer(drop_unmatched=True) leaves them out, as tiktoken does)"
    )


def absent_special_tokens(word_counts: Sized, special_tokens: Sequence[str], source_bytes: int) -> list[str]:
    """The special tokens that certainly never occur in the text of `source_bytes` bytes the counts
    came from. Pre-tokens cover every byte between special tokens, so the text's bytes less the
    words' bytes are the bytes of the special tokens split out: a token longer than that never
    occurred (exact for one special token; with several, only those too long to fit are named). The
    words' bytes are summed over the table, not the text: O(distinct words), under 0.1 s for 2.4M."""
    if not special_tokens or source_bytes <= 0:
        return []
    split_out = source_bytes - counted_text_bytes(word_counts)
    if split_out < 0:  # counts not of that text (a table made by hand): nothing is known
        return []
    return [token for token in special_tokens if len(token.encode("utf-8")) > split_out]


def token_brackets(token: str) -> list[str]:
    """The runs of punctuation a special token opens and closes with (`<|` and `|>` of `<|endoftext|>`):
    what stays of it in the counts when the text spells it otherwise, as the pattern cuts it apart."""
    opening = regex.match(r"[^\s\p{L}\p{N}]+", token)
    closing = regex.search(r"[^\s\p{L}\p{N}]+$", token)
    if opening is None or closing is None or opening.end() > closing.start():  # no brackets, or only punctuation
        return []
    return [opening.group(), closing.group()]


def looks_misspelled(tokens: Sequence[str], word_counts: Sized) -> list[str]:
    """Those of `tokens` (absent from the text) whose brackets (`token_brackets`) the words of
    `word_counts` hold, both of them: what a misspelled special token leaves. `<|eot|>` on text of
    `<|endoftext|>` (or the reverse, or `<|EndOfText|>`, `<| endoftext |>`) is one; `<|endoftext|>`,
    which the assignment declares for corpus.en, on text without `<|` and `|>` is not. A token without
    brackets, or counts whose words cannot be read, is not judged: a note must be right when printed.
    The words are read once, for absent tokens only (0.13-0.26 s for 1.4M distinct words, native)."""
    bracketed = [(token, token_brackets(token)) for token in tokens]
    if not any(brackets for _, brackets in bracketed):
        return []
    if isinstance(word_counts, Mapping):
        words = b"\n".join(word for word in word_counts if isinstance(word, bytes))
    elif hasattr(word_counts, "to_arrays"):
        words = word_counts.to_arrays()[0]  # the words back to back, in one copy
    else:
        return []
    return [
        token
        for token, brackets in bracketed
        if brackets and all(bracket.encode("utf-8") in words for bracket in brackets)
    ]


def absent_tokens_note(tokens: Sequence[str]) -> str:
    """The one-line note for special tokens the text never holds though it holds their brackets
    (`looks_misspelled`): almost always a typo."""
    if len(tokens) == 1:
        named = f"special token {tokens[0]!r} never occurs"
    else:
        named = f"special tokens {', '.join(map(repr, tokens))} never occur"
    return f"{named} in the training text (a typo?)"
