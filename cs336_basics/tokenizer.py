"""Encode text with a trained byte-level BPE vocabulary, and decode ids back to text.

    from cs336_basics.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_files("out/vocab.json", "out/merges.txt")  # special tokens: the run's
    ids = tokenizer.encode("Hello, world!<|endoftext|>")
    assert tokenizer.decode(ids) == "Hello, world!<|endoftext|>"
    with open("big.txt") as file:                 # constant memory, any file size
        for token_id in tokenizer.encode_iterable(file):
            ...
    ids = tokenizer.encode_file("big.txt")        # all cores; array('H') (or 'I' past 65,536 ids)
    batch = tokenizer.encode_batch(["one", "two"])  # a list of array('I'), on all cores

Encoding follows the training contract (`splitting.py`): split on special tokens (the longest wins
where they overlap; each one becomes its own id), pre-tokenize every piece with the run's pattern
(`pattern.py`: GPT-2's unless the run trained with another), and within each pre-token apply merges
as GPT-2 does: repeatedly merge every occurrence of the adjacent pair whose merge came first.
Pre-tokens never interact, so their ids are cached. With `pattern="cl100k"` (or "o200k") and a
vocabulary trained with it, the ids are tiktoken's for `Encoding(pat_str=<that pattern>,
mergeable_ranks=<the vocabulary>)`, characters classed as tiktoken classes them (Unicode 16.0's tables,
unless the pattern or the run says another version: `pattern.Pattern.unicode`).

This module is the readable reference. When the compiled `cs336_basics.native._encode` is built (and
`CS336_PURE_PYTHON` is not set), `encode` runs the same algorithm in C++ (`cpp/encode/bpe_encode.cpp`)
for the named patterns, those the native scanner knows; a custom regex encodes here, in Python. The
tests check that both give the same ids.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import operator
import os
import stat
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import BinaryIO

import regex

from .native.backend import NativeUnavailable, effective_num_threads, load_native
from .outputs.serialization import _current_umask, load_tokenizer_files, run_pattern
from .rules.contract import (
    MAX_TOKEN_ID,
    BPEInputError,
    Merges,
    Vocab,
    check_num_workers,
    check_special_tokens,
    check_text_file,
    invalid_utf8_error,
)
from .rules.pattern import (
    UNICODE_VERSIONS,
    Pattern,
    native_pattern_names,
    resolve_pattern,
)
from .rules.splitting import special_token_regex
from .rules.vocab_layout import merge_word, special_token_ids

# Pre-tokens cached per tokenizer. The cache is emptied when full rather than evicted entry by
# entry: cheaper per hit, and its memory stays bounded for encode_iterable's sake.
DEFAULT_CACHE_SIZE = 1 << 12
# Slots of the native encoder's cache, per thread: 48 bytes each (see Tokenizer), so 24 MiB of
# address space, resident as used. Half as many missed a fifth of the pre-tokens of 10 MB of mixed
# text again on a second pass (docs/PERFORMANCE.md, "Encoder").
DEFAULT_NATIVE_CACHE_SLOTS = 1 << 19
# At most 3 GiB of address space per thread: more would fail in C++ as std::bad_alloc, not here.
MAX_NATIVE_CACHE_SLOTS = 1 << 26
# encode_file's pure path reads the file in blocks of this many bytes.
_FILE_BLOCK_BYTES = 1 << 22

# encode_iterable encodes the buffered text once it holds at least this many characters.
_MIN_PIECE_CHARS = 1 << 12
# encode_iterable reads a file (and re-slices longer strings) in blocks of this many characters, so
# a file of one long line is never held whole.
_READ_BLOCK_CHARS = 1 << 13


# Where a pattern's pre-tokens may be cut (`NamedPattern.safe_cut`), compiled once per expression.
@cache
def _safe_cut(expression: str) -> regex.Pattern:
    return regex.compile(expression, flags=regex.REVERSE)


def _native_module():
    """The compiled encoder, or None when it is not built or CS336_PURE_PYTHON is set."""
    try:
        return load_native("_encode")
    except NativeUnavailable:
        return None


def native_available() -> bool:
    return _native_module() is not None


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise BPEInputError(f"encode expects a str, got {type(text).__name__}; decode bytes first")


def _unencodable_error(text: str) -> BPEInputError:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return BPEInputError(
            f"text cannot be encoded as UTF-8: {error.reason} at character {error.start} "
            f"({text[error.start]!r}); remove or replace lone surrogates first"
        )
    return BPEInputError("text cannot be encoded as UTF-8")


class _VocabError(BPEInputError):
    """The vocabulary itself is unusable (from_files names the vocabulary file)."""


class _MergesError(BPEInputError):
    """A merge does not fit the vocabulary (from_files names the merges file)."""


class Tokenizer:
    """A byte-level BPE tokenizer over `vocab` (id -> bytes) and `merges` (in creation order).

    Special tokens missing from `vocab` are added with the next free ids. `native=None` uses the
    compiled encoder when it is available, `False` forces the pure-Python path, `True` requires the
    compiled one. `cache_size` bounds the pure path's pre-token cache (entries), `native_cache_slots`
    the compiled one's, per thread: it reserves `48 * native_cache_slots` bytes of address space
    (a 32-byte slot per word, holding up to 15 bytes and 3 ids, or 6 when every id is below 2**16
    as in GPT-2's vocabulary, and 16 bytes per slot of arena for the ids and bytes that do not fit),
    which is its peak memory; pages become resident as the cache fills (in 2 MiB huge pages where
    the system allows). The default, 2**19 slots, is 24 MiB per thread. The calling thread's cache is
    reserved here, so that `encode` allocates no cache memory later; encode_batch and encode_file
    reserve one more per extra thread on first use, kept for later calls. 0 disables caching (every
    pre-token is merged anew).

    `pattern` is the pre-tokenizer the vocabulary was trained with (`pattern.resolve_pattern`: None
    or "gpt2", "cl100k", "o200k", or any regex). The compiled encoder runs the named ones: a custom
    regex encodes on the pure-Python path (`native=True` is refused with it). There,
    `encode_iterable` and `encode_file` cut the text where the named patterns cannot span; a custom
    regex is cut only after special tokens, so text between two of them is held whole. Characters are
    classed by the Unicode version the pattern carries (a run's records it); without one by its row's
    `encodes_by` ("cl100k" and "o200k": tiktoken's, `pattern.TOOLS_UNICODE`), else the installed `regex`'s.

    Text a custom regex does not match is not lost: each stretch between two matches is a
    pre-token of its own, encoded with the same merges, as the exported tokenizer.json's `Split`
    does in HF tokenizers, so `decode(encode(text)) == text` for every pattern. `drop_unmatched=True`
    leaves that text out instead, as tiktoken does with a `pat_str` that skips characters. A custom
    regex that runs away (catastrophic backtracking) is stopped with a BPEInputError after
    $CS336_REGEX_TIMEOUT seconds per million characters (`pattern.match_seconds`).
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
        *,
        native: bool | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        native_cache_slots: int = DEFAULT_NATIVE_CACHE_SLOTS,
        pattern: str | Pattern | None = None,
        drop_unmatched: bool = False,
    ) -> None:
        self.pattern: Pattern = resolve_pattern(pattern)
        if not isinstance(drop_unmatched, bool):
            raise BPEInputError(f"drop_unmatched must be True or False, got {drop_unmatched!r}")
        # What the pattern leaves unmatched is left out (tiktoken's behaviour) rather than encoded (HF's).
        self.drop_unmatched = drop_unmatched
        if self.pattern.unicode is None and self.pattern.row is not None and self.pattern.row.encodes_by:
            self.pattern = replace(self.pattern, unicode=self.pattern.row.encodes_by)  # tiktoken's, as tiktoken
        if isinstance(special_tokens, str):
            raise BPEInputError(f"special_tokens must be a list of strings; wrap {special_tokens!r} in a list")
        specials = check_special_tokens(special_tokens)
        self._vocab: Vocab = _checked_vocab(vocab)

        # Regular text maps bytes to the lowest id spelling them (ids are unique in sane vocabularies).
        self._token_ids: dict[bytes, int] = {}
        for token_id in sorted(self._vocab):
            self._token_ids.setdefault(self._vocab[token_id], token_id)
        missing = [byte for byte in range(256) if bytes([byte]) not in self._token_ids]
        if missing:
            raise _VocabError(
                f"the vocabulary lacks {len(missing)} of the 256 single bytes (first: {bytes([missing[0]])!r}); "
                "a byte-level BPE vocabulary must contain every byte to encode arbitrary text"
            )
        self._byte_ids = [self._token_ids[bytes([byte])] for byte in range(256)]

        self.special_tokens: list[str] = specials
        self._special_ids: dict[str, int] = {}
        next_id = max(self._vocab) + 1
        # A one-byte special token has its own id beside the byte's (see special_token_ids).
        known_ids = special_token_ids(self._vocab, specials)
        for token in specials:
            token_bytes = token.encode("utf-8")
            token_id = known_ids.get(token)
            if token_id is None:
                token_id, next_id = next_id, next_id + 1
                if token_id > MAX_TOKEN_ID:
                    raise _VocabError(f"no id left for special token {token!r}: ids must stay below 2**32 - 1")
                self._vocab[token_id] = token_bytes
            self._special_ids[token] = token_id
        self._special_regex = special_token_regex(specials)
        self._longest_special = max((len(token) for token in specials), default=0)

        self.merges: Merges = list(merges)
        # (left id, right id) -> (rank, id of the merged token); a repeated merge keeps its first rank.
        self._merge_ranks: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, merge in enumerate(self.merges):
            left_id, right_id, merged_id = self._merge_ids(rank, merge)
            self._merge_ranks.setdefault((left_id, right_id), (rank, merged_id))

        for name, value in (("cache_size", cache_size), ("native_cache_slots", native_cache_slots)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BPEInputError(f"{name} must be a non-negative integer, got {value!r}")
        if native_cache_slots > MAX_NATIVE_CACHE_SLOTS:
            raise BPEInputError(
                f"native_cache_slots must be at most {MAX_NATIVE_CACHE_SLOTS:,} (2**26; a slot reserves 48 bytes "
                f"a thread), got {native_cache_slots:,}"
            )
        self._cache_size = cache_size
        self._cache: dict[str, list[int]] = {}
        self._native_option = native
        self._native_cache_slots = native_cache_slots
        self._native = self._make_native(native, native_cache_slots)

    def __getstate__(self) -> dict:
        # The compiled encoder cannot be pickled; it is rebuilt where the tokenizer is unpickled
        # (e.g. in a multiprocessing worker), and the cache starts empty there.
        state = self.__dict__.copy()
        state["_native"] = None
        state["_cache"] = {}
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("pattern", resolve_pattern(None))  # pickled before tokenizers had a pattern
        state.setdefault("drop_unmatched", False)
        self.__dict__.update(state)
        self._native = self._make_native(self._native_option, self._native_cache_slots)

    # -----------------------------------------------------------------------------------------
    # Construction

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: list[str] | None = None,
        *,
        check_run: bool = True,
        pattern: str | Pattern | None = None,
        **options: object,
    ) -> Tokenizer:
        """Load GPT-2's `vocab.json`/`merges.txt` or `vocab.pkl`/`merges.pkl` (see serialization).

        When the training run's metadata (`bpe_run.json`) lies beside the files, they are checked
        against it (`check_run=False` skips that), `special_tokens=None` means the run's special
        tokens (pass a list, `[]` for none, to choose others) and `pattern=None` the run's pattern
        (GPT-2's for a run that recorded none, or without the metadata). Pickles are read without
        running code."""
        vocab, merges, run = load_tokenizer_files(vocab_filepath, merges_filepath, check_run=check_run)
        if special_tokens is None and run is not None:
            special_tokens = run["special_tokens"]
        if pattern is None:
            pattern = run_pattern(run)
        try:
            return cls(vocab, merges, special_tokens, pattern=pattern, **options)
        except _VocabError as error:
            # The constructor cannot know where its arguments came from; a damaged file is named here.
            raise BPEInputError(f"{vocab_filepath}: {error}") from None
        except _MergesError as error:
            raise BPEInputError(f"{merges_filepath} (with {vocab_filepath}): {error}") from None

    def _merge_ids(self, rank: int, merge: object) -> tuple[int, int, int]:
        is_pair = isinstance(merge, (tuple, list)) and len(merge) == 2
        if not (is_pair and all(isinstance(part, bytes) for part in merge)):
            raise _MergesError(f"merge {rank} must be a pair of bytes, got {merge!r}")
        left, right = merge
        ids: list[int] = []
        for part in (left, right, left + right):
            token_id = self._token_ids.get(part)
            if token_id is None:
                raise _MergesError(
                    f"merge {rank} ({left!r}, {right!r}) refers to {part!r}, which is not in the vocabulary; "
                    "were vocab and merges saved by the same training run?"
                )
            ids.append(token_id)
        return ids[0], ids[1], ids[2]

    def _make_native(self, native: bool | None, cache_slots: int):
        if native is False:
            return None
        if not self.pattern.native_encoding:
            if native:
                raise BPEInputError(
                    f"native=True needs a pattern the compiled encoder runs ({native_pattern_names()}); "
                    f"pattern {self.pattern.label!r} encodes with native=None or False"
                )
            return None
        module = _native_module()
        if module is None:
            if native:
                raise BPEInputError(
                    "the compiled encoder is not available (not built, or CS336_PURE_PYTHON is set); "
                    "build it with: pip install -e ."
                )
            return None
        merges = [(left, right, merged) for (left, right), (_, merged) in self._ranked_merges()]
        specials = [(token.encode("utf-8"), token_id) for token, token_id in self._special_ids.items()]
        table = UNICODE_VERSIONS.index(self.pattern.unicode_version)
        return module.NativeEncoder(self._byte_ids, merges, specials, cache_slots, self.pattern.scanner, table)

    def _ranked_merges(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        return sorted(self._merge_ranks.items(), key=lambda item: item[1][0])

    @property
    def native(self) -> bool:
        """Whether `encode` runs the compiled encoder."""
        return self._native is not None

    @property
    def vocab(self) -> Vocab:
        """id -> bytes, special tokens included (the tokenizer's own dict: do not modify it)."""
        return self._vocab

    # -----------------------------------------------------------------------------------------
    # Encoding

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        if self._native is not None:
            return self._compiled(self._native.encode_list, text)
        _check_text(text)
        ids: list[int] = []
        try:
            if self._special_regex is None:
                self._encode_ordinary(text, ids)
                return ids
            position = 0
            for match in self._special_regex.finditer(text):
                self._encode_ordinary(text[position : match.start()], ids)
                ids.append(self._special_ids[match.group()])
                position = match.end()
            self._encode_ordinary(text[position:], ids)
        except UnicodeEncodeError:
            raise _unencodable_error(text) from None
        return ids

    def encode_array(self, text: str) -> array:
        """The token ids of `text` as an `array('I')` of uint32: no Python int per token on the
        compiled path (`numpy.frombuffer(result, numpy.uint32)` views it without a copy)."""
        if self._native is None:
            return array("I", self.encode(text))
        return self._compiled(self._native.encode, text)

    @staticmethod
    def _compiled(method: Callable[[str], object], text: str):
        """`method(text)` of the compiled encoder, the argument checked and errors worded."""
        _check_text(text)
        try:
            return method(text)
        except UnicodeEncodeError:
            raise _unencodable_error(text) from None

    def encode_batch(self, texts: list[str], *, num_threads: int | None = None) -> list[array]:
        """The ids of each text, as `encode_array` gives them, encoded in parallel on `num_threads`
        threads (None: every core; -1 every core, -2 all but one...) with the GIL released."""
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise BPEInputError(f"encode_batch expects strings, got {type(text).__name__}; decode bytes first")
        threads = _threads(num_threads)
        if self._native is None:
            return [array("I", self.encode(text)) for text in texts]
        try:
            return self._native.encode_batch(texts, threads)
        except UnicodeEncodeError:
            bad = next(text for text in texts if not _encodable(text))
            raise _unencodable_error(bad) from None

    @property
    def id_typecode(self) -> str:
        """The `array` typecode encode_file uses: "H" (uint16) when every id is below 65,536, else
        "I" (uint32)."""
        return "H" if max(self._vocab) < 1 << 16 else "I"

    def encode_file(
        self, path: str | os.PathLike, *, num_threads: int | None = None, chunk_bytes: int | None = None
    ) -> array:
        """The ids of the UTF-8 text file at `path`, as an array of `id_typecode`.

        Compiled: the file is memory-mapped, cut where cutting cannot change the ids (as counting
        cuts it), and the pieces, of about `chunk_bytes` each (None: automatic), are encoded on
        `num_threads` threads (None: every core) with the GIL released; the ids are the same for
        every setting. Pure Python: the file is read in blocks and encoded piece by piece
        (`split_stream`). With numpy, `numpy.asarray(ids)` views the result without a copy."""
        path, threads, chunk = self._file_arguments(path, num_threads, chunk_bytes)
        if self._native is None:
            ids = array(self.id_typecode)
            for piece in self._pieces_of_file(path, chunk):
                ids.extend(self.encode(piece))
            return ids
        with _utf8_errors():
            return self._native.encode_file(os.fspath(path), threads, chunk, _id_bytes(self.id_typecode))

    def encode_file_to(
        self,
        path: str | os.PathLike,
        out: BinaryIO | str | os.PathLike,
        *,
        num_threads: int | None = None,
        chunk_bytes: int | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> int:
        """Write the ids of the file at `path` to the binary file `out` (at its position) as
        `id_typecode` ints in the machine's byte order, as `array.tofile` writes them, holding only a
        few chunks' ids in memory; return how many. `progress`, if given, is called now and then with
        the input bytes encoded since its previous call. The rest as encode_file.

        `out` may also be a path: the ids go to a new file there, which replaces the old one only once
        they are all written (a FIFO or device is written to as it is)."""
        path, threads, chunk = self._file_arguments(path, num_threads, chunk_bytes)
        if isinstance(out, (str, os.PathLike)):
            with _output_file(out, path) as file:
                options = {"num_threads": threads, "chunk_bytes": chunk or None, "progress": progress}
                return self.encode_file_to(path, file, **options)  # type: ignore[arg-type]
        self._check_output(out)
        out.flush()  # the compiled path writes to the file descriptor, after what is buffered
        if self._native is None:
            count = 0
            for piece in self._pieces_of_file(path, chunk, progress):
                ids = array(self.id_typecode, self.encode(piece))
                ids.tofile(out)
                count += len(ids)
            return count
        with _utf8_errors():
            return self._native.encode_file(
                os.fspath(path), threads, chunk, _id_bytes(self.id_typecode), out.fileno(), progress
            )

    def _file_arguments(self, path: str | os.PathLike, num_threads: int | None, chunk_bytes: int | None):
        path = check_text_file(path, "input file", allow_empty=True)
        bad_chunk = isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes < 1
        if chunk_bytes is not None and bad_chunk:
            raise BPEInputError(f"chunk_bytes must be a positive integer or None, got {chunk_bytes!r}")
        threads = _threads(num_threads)  # checked on both paths; the pure one encodes on this thread
        return path, threads if self._native is not None else 1, chunk_bytes or 0

    def _check_output(self, out: object) -> None:
        """`out` as encode_file_to writes to it: a binary file, with a file descriptor for the compiled path."""
        kind = type(out).__name__
        if isinstance(out, io.TextIOBase) or not callable(getattr(out, "write", None)):
            raise BPEInputError(
                f"encode_file_to writes to a binary file or a path, got {kind}: open it with open(path, 'wb')"
            )
        if self._native is not None:
            try:
                out.fileno()  # type: ignore[attr-defined]
            except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
                raise BPEInputError(
                    f"encode_file_to writes through a file descriptor, which a {kind} lacks: give a path or a file "
                    "opened with open(path, 'wb'), or use encode_file for the ids in memory"
                ) from None

    def _pieces_of_file(
        self, path: Path, block_bytes: int, progress: Callable[[int], object] | None = None
    ) -> Iterator[str]:
        with open(path, "rb") as file:
            yield from self.split_stream(_decoded_blocks(file, block_bytes or _FILE_BLOCK_BYTES, progress))

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily the ids of `"".join(iterable)`, e.g. of a text file, in constant memory.

        A file opened in text mode is read in blocks, not lines, so a file of one long line costs
        no more memory than one of short lines. What cannot be bounded is a single pre-token (a run
        of letters with no space or other character between them): it is encoded whole."""
        for piece in self.split_stream(_blocks(iterable)):
            yield from self.encode(piece)

    def split_stream(self, texts: Iterable[str]) -> Iterator[str]:
        """Re-cut a stream of strings into pieces that can be encoded one by one: the ids of the
        pieces, concatenated, are the ids of the whole stream. Only a short tail is held back.

        A piece ends either after a special token that no later text can extend, or between two
        characters no pre-token can span (cl100k's and o200k's: see _LAST_SAFE_CUT_CL100K_O200K; a
        custom regex is cut only after special tokens). For GPT-2's pattern those are a non-space
        and a whitespace character, or two non-space characters of different classes among letters
        (\\p{L}), numbers (\\p{N}) and the rest, except an apostrophe before a letter. Every
        alternative of the pattern is a run of one class (after an optional leading space, which
        only a whitespace cut could split), except a contraction, which is an apostrophe followed by
        letters; so the pre-token before such a cut ends there however the text goes on, and as the
        pattern never looks behind, the text after it is matched as if it stood alone. Text within
        `longest special token - 1` characters of the buffer's end is never cut: a special token may
        be starting there.
        """
        parts: list[str] = []
        size = 0
        next_attempt = _MIN_PIECE_CHARS
        for text in texts:
            if not isinstance(text, str):
                raise BPEInputError(
                    f"encode_iterable expects strings, got {type(text).__name__}; open files in text mode"
                )
            parts.append(text)
            size += len(text)
            if size < next_attempt:
                continue
            buffer = "".join(parts)
            cut = self._last_safe_cut(buffer)
            if cut:
                yield buffer[:cut]
            rest = buffer[cut:]
            parts, size = [rest], len(rest)
            # Without a cut the buffer grows; waiting until it doubles keeps rescanning linear.
            next_attempt = max(_MIN_PIECE_CHARS, 2 * size)
        if size:
            yield "".join(parts)

    def _last_safe_cut(self, buffer: str) -> int:
        """The last offset where `buffer` can be cut, whatever text follows it (0 if none)."""
        # A special token starting at or after `undecided` may still grow into a longer one.
        undecided = len(buffer) - self._longest_special + 1 if self._longest_special else len(buffer)
        settled = 0
        if self._special_regex is not None:
            for match in self._special_regex.finditer(buffer, 0, len(buffer)):
                if match.start() >= undecided:
                    break
                settled = match.end()
        # The character after the cut must lie in the buffer and before `undecided`.
        end = min(undecided, len(buffer) - 1)
        row = self.pattern.row
        if end > settled and row is not None and row.safe_cut is not None:
            match = _safe_cut(row.safe_cut).search(buffer, settled, end + 1)
            if match is not None:
                return match.end()
        return settled

    def _encode_ordinary(self, text: str, ids: list[int]) -> None:
        """Append the ids of `text`, which contains no special token."""
        cache = self._cache
        for word in self._words(text):
            word_ids = cache.get(word)
            if word_ids is None:
                word_ids = self._bpe(word.encode("utf-8"))
                if len(cache) >= self._cache_size:
                    cache.clear()
                if self._cache_size:
                    cache[word] = word_ids
            ids.extend(word_ids)

    def _words(self, text: str) -> Iterable[str]:
        """The pre-tokens of `text` (`Pattern.pretokens`): a named pattern's matches, which cover all
        text; a custom regex's matches and the text between them, unless `drop_unmatched`."""
        if self.pattern.name is not None:
            return self.pattern.compiled.findall(text)  # a named pattern never matches empty text
        return self.pattern.pretokens(text, keep_gaps=not self.drop_unmatched)

    def _bpe(self, word: bytes) -> list[int]:
        """GPT-2's merge loop: merge every occurrence of the adjacent pair ranked first, repeat."""
        ids = [self._byte_ids[byte] for byte in word]
        ranks = self._merge_ranks
        while len(ids) > 1:
            best = None
            for pair in zip(ids, ids[1:]):
                entry = ranks.get(pair)
                if entry is not None and (best is None or entry[0] < best[0][0]):
                    best = (entry, pair)
            if best is None:
                break
            (_, merged_id), pair = best
            ids = merge_word(ids, pair, merged_id)
        return ids

    # -----------------------------------------------------------------------------------------
    # Decoding

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`; byte sequences that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of `ids`, concatenated (what `decode` turns into text)."""
        vocab = self._vocab
        try:
            # A float or a bool would find the entry of the int it equals: only ints (and integer
            # types such as numpy's, through __index__) are ids.
            return b"".join([vocab[token_id if type(token_id) is int else _token_id(token_id)] for token_id in ids])
        except KeyError as error:
            raise BPEInputError(f"token id {error.args[0]!r} is not in the vocabulary") from None
        except TypeError:
            raise BPEInputError("token ids must be integers") from None


def _token_id(value: object) -> int:
    if isinstance(value, bool):
        raise BPEInputError(f"token ids must be integers, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise BPEInputError(f"token ids must be integers, got {value!r}") from None


def _blocks(texts: Iterable[str]) -> Iterator[str]:
    """The text of `texts` in strings of at most _READ_BLOCK_CHARS (a text file is read, not iterated
    by lines, so a long line is never read whole)."""
    read = getattr(texts, "read", None)
    if callable(read):
        while block := read(_READ_BLOCK_CHARS):
            yield block
        return
    for text in texts:
        if isinstance(text, str) and len(text) > _READ_BLOCK_CHARS:
            for start in range(0, len(text), _READ_BLOCK_CHARS):
                yield text[start : start + _READ_BLOCK_CHARS]
        else:
            yield text


def _threads(num_threads: object) -> int:
    """The encoder's threads by --workers' rule: 0 and counts that leave no core refused, the rest
    as effective_num_threads resolves them (None and -1: every core)."""
    return effective_num_threads(check_num_workers(num_threads, "num_threads"))


@contextlib.contextmanager
def _output_file(target: str | os.PathLike, source: Path) -> Iterator[BinaryIO]:
    """A binary file for encode_file_to's ids at the path `target`: a temporary file beside it, moved
    onto it once written and removed if not, so a failed run leaves what was there; a FIFO or device
    (/dev/null, a pipe) is opened as it is."""
    target = Path(os.path.realpath(target))  # through a symbolic link: its file is replaced, not the link
    try:
        status = target.stat()
    except FileNotFoundError:
        status = None
    except OSError as error:
        raise BPEInputError(f"cannot write the ids to {target}: {error.strerror or error}") from None
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise BPEInputError(f"cannot write the ids to {target}: it is a directory")
    if status is not None and not stat.S_ISREG(status.st_mode):
        with open(target, "wb") as file:
            yield file
        return
    if status is not None and os.path.samefile(target, source):
        raise BPEInputError(f"cannot write the ids to {target}: it is the input file")
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:
        raise BPEInputError(f"cannot write the ids to {target}: {error.strerror or error}") from None
    try:
        with open(descriptor, "wb") as file:
            os.fchmod(descriptor, 0o666 & ~_current_umask())  # as open() would create it, not mkstemp's 0600
            yield file
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _id_bytes(typecode: str) -> int:
    return array(typecode).itemsize


@contextlib.contextmanager
def _utf8_errors() -> Iterator[None]:
    """The compiled encoder's invalid-UTF-8 error (a ValueError naming the byte offset) as the
    pure path words it."""
    try:
        yield
    except ValueError as error:
        if "invalid UTF-8" not in str(error):
            raise
        raise BPEInputError(f"input is not valid UTF-8: {error}") from None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _decoded_blocks(file: BinaryIO, block_bytes: int, progress: Callable[[int], object] | None = None) -> Iterator[str]:
    """The text of a binary file in blocks, decoded incrementally (a character may straddle two
    blocks); `progress`, if given, gets the bytes of each block read."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    while True:
        block = file.read(block_bytes)
        try:
            text = decoder.decode(block, final=not block)
        except UnicodeDecodeError as error:
            raise invalid_utf8_error(error, offset) from None
        offset += len(block)
        if progress is not None and block:
            progress(len(block))
        if text:
            yield text
        if not block:
            return


def _checked_vocab(vocab: object) -> Vocab:
    if not isinstance(vocab, dict) or not vocab:
        raise _VocabError(f"vocab must be a non-empty dict of id -> bytes, got {type(vocab).__name__}")
    checked: Vocab = {}
    for token_id, token in vocab.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id <= MAX_TOKEN_ID:
            raise _VocabError(f"vocab ids must be integers in [0, 2**32 - 2], got {token_id!r}")
        if not isinstance(token, bytes) or not token:
            raise _VocabError(f"vocab[{token_id}] must be non-empty bytes, got {token!r}")
        checked[token_id] = token
    return checked
