"""Where text is split before pairs are counted (docs/CONTRACT.md, steps 2 and 3): at special tokens
(the longest first where two overlap), into pre-tokens by a pattern (`pattern.py`, GPT-2's by default),
counted in Python (the oracle's word counts), and the safe cuts that let chunks be counted apart.
"""

from __future__ import annotations

import mmap
import os
from collections import Counter
from collections.abc import Iterable, Iterator

import regex

from .contract import Buffer
from .pattern import GPT2_SPLIT_PATTERN, LINE_END_CUTS, WHITESPACE_CUTS, Pattern, resolve_pattern

# The GPT-2 pre-tokenization pattern, as the assignment specifies (the `regex` package, not `re`).
GPT2_REGEX = regex.compile(GPT2_SPLIT_PATTERN)


# ---------------------------------------------------------------------------------------------
# Special tokens and pre-tokenization


def special_token_regex(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """One alternation, longest token first, so overlapping special tokens resolve to the longest."""
    tokens = sorted(special_tokens, key=len, reverse=True)
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(token) for token in tokens))


def split_on_special_tokens(text: str, special_tokens: Iterable[str]) -> list[str]:
    """The pieces of text between special tokens (the tokens themselves are dropped)."""
    splitter = special_token_regex(special_tokens)
    return [text] if splitter is None else splitter.split(text)


def count_words_in_text(
    text: str, special_tokens: Iterable[str], pattern: str | Pattern | None = None
) -> Counter[bytes]:
    """How often each pre-token (a match of `pattern`, default GPT-2's) occurs, as UTF-8 bytes;
    special tokens split and are not counted. Empty matches, which some regexes allow, count as nothing,
    and so does text a custom regex leaves unmatched; one that runs away is stopped (`Pattern.pretokens`)."""
    resolved = None if pattern is None else resolve_pattern(pattern)
    counts: Counter[bytes] = Counter()
    for piece in split_on_special_tokens(text, special_tokens):
        if resolved is None or resolved.name is not None:
            matches: Iterable[str] = (GPT2_REGEX if resolved is None else resolved.compiled).findall(piece)
        else:
            matches = resolved.pretokens(piece, keep_gaps=False)
        counts.update(match.encode("utf-8") for match in matches if match)
    return counts


def present_bytes(data: bytes) -> bytes:
    """The byte values `data` holds, ascending: one memchr per value, never a Python loop over the data
    (like='hf-files' starts the vocabulary from the bytes its text holds)."""
    return bytes(byte for byte in range(256) if data.find(bytes((byte,))) >= 0)


def special_token_bytes_in_files(paths: Iterable[str | os.PathLike], special_tokens: Iterable[str]) -> int:
    """The bytes of every special token in the files, found as counting splits on them (the longest
    first where they overlap): what lies in no pre-token for a pattern that matches all other text."""
    tokens = sorted((token.encode("utf-8") for token in special_tokens), key=len, reverse=True)
    if not tokens:
        return 0
    splitter = regex.compile(b"|".join(regex.escape(token) for token in tokens))
    total = 0
    for path in paths:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                continue
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                total += sum(match.end() - match.start() for match in splitter.finditer(data))
    return total


def count_words_in_lines(text: str, pattern: str | Pattern | None = None) -> Counter[bytes]:
    """`count_words_in_text` as HF tokenizers' `train(files)` counts a file: each line, up to and with
    its "\n" (no other line break ends one), pre-tokenized alone, and special tokens counted as text."""
    counts: Counter[bytes] = Counter()
    pieces = text.split("\n")
    for index, piece in enumerate(pieces):
        counts.update(count_words_in_text(piece if index == len(pieces) - 1 else piece + "\n", [], pattern))
    return counts


def alphabet_of(words: Iterable[bytes]) -> bytes:
    """The bytes that occur in the words, ascending."""
    seen = set()
    for word in words:
        seen.update(word)
    return bytes(sorted(seen))


# ---------------------------------------------------------------------------------------------
# Chunk boundaries for parallel counting

# An ASCII letter or digit followed by ' ' or '\n': the cut goes between them (see _pattern_cut).
# Each byte as its part in a whitespace cut (below): b"a" an ASCII letter or digit, b" " a space or a
# newline, b"." anything else. A cut is then where b"a " is found, at C speed however long the
# text goes without one (a regular expression tried each letter of one long word in turn, 70 MB/s).
_CUT_ROLES = bytes(
    ord("a") if chr(byte).isascii() and chr(byte).isalnum() else ord(" ") if byte in b" \n" else ord(".")
    for byte in range(256)
)
# The same for a line-end cut: b"n" for '\r' and '\n', b"." for anything else; a cut is where b"n." is.
_LINE_END_ROLES = bytes(ord("n") if byte in b"\r\n" else ord(".") for byte in range(256))
_SCAN_BLOCK = 1 << 20


def _spans_special_token(data: Buffer, position: int, tokens: list[bytes]) -> bool:
    """Whether an occurrence of a special token starts before `position` and ends after it."""
    for token in tokens:
        if data.find(token, max(0, position - len(token) + 1), position + len(token) - 1) != -1:
            return True
    return False


def _special_token_cut(data: Buffer, start: int, end: int, tokens: list[bytes]) -> int | None:
    """The first start of a special token in [start, end) that no other special token spans."""
    best = None
    for token in tokens:
        found = data.find(token, start, end + len(token) - 1)
        while found != -1 and _spans_special_token(data, found, tokens):
            found = data.find(token, found + 1, end + len(token) - 1)
        if found != -1 and (best is None or found < best):
            best = found
    return best


def _pattern_cut(data: Buffer, start: int, end: int, tokens: list[bytes], rule: str = WHITESPACE_CUTS) -> int | None:
    """The first cut by `rule` (`safe_cuts`) in [start, end) that no special token spans.

    WHITESPACE_CUTS, before ' ' or '\\n' that follows an ASCII letter or digit, splits no pre-token
    of the patterns whose row says so (GPT-2's, cl100k's, o200k's): none puts whitespace after a letter
    or digit, so the pre-token before the cut ends there; the whitespace run after it starts a fresh
    match, and `(?!\\S)` (or cl100k's `$`) only looks forward from inside that run, which a cut never
    ends. LINE_END_CUTS, after a run of '\\r' and '\\n': superword's runs and the grouping of its
    numbers end at a line end, and its `[\\r\\n]+` takes the whole run. An ASCII byte is never inside a
    multi-byte UTF-8 character.
    """
    for cut in safe_cuts(data, start, end, rule):
        if not _spans_special_token(data, cut, tokens):
            return cut
    return None


def safe_cuts(data: Buffer, start: int, end: int, rule: str, *, backward: bool = False) -> Iterator[int]:
    """Every position in [start, end) where `rule` (a row's `cuts`) allows a cut, first to last or,
    `backward`, last to first: `whitespace_cuts` or `line_end_cuts`."""
    if rule == WHITESPACE_CUTS:
        return whitespace_cuts(data, start, end, backward=backward)
    if rule == LINE_END_CUTS:
        return line_end_cuts(data, start, end, backward=backward)
    raise ValueError(f"no such cut rule: {rule!r}")


def whitespace_cuts(data: Buffer, start: int, end: int, *, backward: bool = False) -> Iterator[int]:
    """Every position p in [start, end) with data[p] a space or newline after an ASCII letter or
    digit (WHITESPACE_CUTS, `_pattern_cut`), first to last or, `backward`, last to first."""
    return _role_pairs(data, start, end, _CUT_ROLES, b"a ", backward)


def line_end_cuts(data: Buffer, start: int, end: int, *, backward: bool = False) -> Iterator[int]:
    """Every position p in [start, end) with data[p - 1] '\\r' or '\\n' and data[p] neither
    (LINE_END_CUTS, `_pattern_cut`), first to last or, `backward`, last to first."""
    return _role_pairs(data, start, end, _LINE_END_ROLES, b"n.", backward)


def _role_pairs(data: Buffer, start: int, end: int, roles_of: bytes, pair: bytes, backward: bool) -> Iterator[int]:
    """Every p in [start, end) where data[p - 1:p + 1], each byte as `roles_of` maps it, is `pair`."""
    low = max(start, 1) - 1
    if end - low < 2:
        return
    roles = bytes(data[low:end]).translate(roles_of)
    if backward:
        found = roles.rfind(pair)
        while found != -1:
            yield low + found + 1
            found = roles.rfind(pair, 0, found + 1)
    else:
        found = roles.find(pair)
        while found != -1:
            yield low + found + 1
            found = roles.find(pair, found + 1)


def _next_boundary(data: Buffer, start: int, tokens: list[bytes], cuts: str | None = WHITESPACE_CUTS) -> int:
    """The first safe cut at or after `start`, preferring a special token in the same 1 MiB block
    (else a cut by the rule `cuts`; None: only special tokens cut)."""
    size = len(data)
    for block_start in range(start, size, _SCAN_BLOCK):
        block_end = min(block_start + _SCAN_BLOCK, size)
        cut = _special_token_cut(data, block_start, block_end, tokens)
        if cut is None and cuts is not None:
            cut = _pattern_cut(data, block_start, block_end, tokens, cuts)
        if cut is not None:
            return cut
    return size


def find_chunk_boundaries(
    data: Buffer, num_chunks: int, special_tokens: Iterable[str], *, cuts: str | None = WHITESPACE_CUTS
) -> list[int]:
    """Byte offsets `[0, ..., len(data)]` cutting `data` into at most `num_chunks` pieces that can be
    counted independently: every cut is at a special token's start, or failing that at a cut of the
    rule `cuts` (the pattern's `Pattern.cuts`, GPT-2's by default; None: special tokens only), so
    counting the chunks separately gives exactly the counts of the whole."""
    tokens = [token.encode("utf-8") for token in special_tokens]
    size = len(data)
    boundaries = [0]
    for index in range(1, max(1, num_chunks)):
        guess = max(size * index // num_chunks, boundaries[-1] + 1)
        if guess >= size:
            break
        cut = _next_boundary(data, guess, tokens, cuts)
        if cut >= size:
            break
        if cut > boundaries[-1]:
            boundaries.append(cut)
    boundaries.append(size)
    return boundaries
