"""The contract every trainer keeps (docs/CONTRACT.md): input checks, special-token splitting,
pre-tokenization with a pattern (`pattern.py`, GPT-2's by default), word counting in Python (the
oracle's), the safe cuts for parallel counting, and the vocabulary layout.

A trainer version only decides *how* words are counted and *how* merges are found; everything that
defines *what* the result is lives here, once, so the versions cannot drift apart.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import regex

from .backend import resolve_parallelism, usable_cores
from .byte_level import gpt2_bytes_to_unicode
from .errors import BPEInputError
from .pattern import GPT2_SPLIT_PATTERN, Pattern, resolve_pattern

# The GPT-2 pre-tokenization pattern, as the assignment specifies (the `regex` package, not `re`).
GPT2_REGEX = regex.compile(GPT2_SPLIT_PATTERN)

# A version's word counts in Python, {word bytes: count}; the artifact with its file is word_counts.WordCounts.
WordCountDict = dict[bytes, int]
Merges = list[tuple[bytes, bytes]]
Vocab = dict[int, bytes]
Buffer = bytes | mmap.mmap

ENDOFTEXT = "<|endoftext|>"


# ---------------------------------------------------------------------------------------------
# Argument checks


def check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    if isinstance(special_tokens, (str, bytes)):
        # A string is an iterable of one-character strings: "<eos>" would become five tokens.
        raise BPEInputError(f"special_tokens must be a list of strings; wrap {special_tokens!r} in a list")
    tokens = list(special_tokens or [])
    for token in tokens:
        if not isinstance(token, str):
            raise BPEInputError(f"special tokens must be strings, got {token!r}")
        if not token:
            raise BPEInputError("special tokens must not be empty strings")
        try:
            token.encode("utf-8")
        except UnicodeEncodeError as error:
            raise BPEInputError(
                f"special token {token!r} is not valid Unicode text: {error.reason} at character {error.start}"
            ) from None
    duplicated = sorted({token for token in tokens if tokens.count(token) > 1})
    if duplicated:
        raise BPEInputError(f"special tokens must be distinct; repeated: {duplicated}")
    return tokens


# Ids are stored as 32-bit integers by the native code; no real vocabulary comes near this.
MAX_VOCAB_SIZE = (1 << 31) - 1
# The largest token id a tokenizer may hold (the native encoder stores ids as uint32, 2**32 - 1 marks
# none): what `Tokenizer` loads, so what a base's ids and a run's new ids are checked against.
MAX_TOKEN_ID = (1 << 32) - 2


def check_vocab_size(vocab_size: object, num_special_tokens: int, *, below_initial: bool = False) -> int:
    """`vocab_size`, checked: at least the 256 bytes and the special tokens, or with `below_initial`
    (HF's layouts, as HF's `BpeTrainer` trains) any positive size, below them meaning no merges."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise BPEInputError(f"vocab_size must be an integer, got {vocab_size!r}")
    if below_initial and vocab_size < 1:
        raise BPEInputError(f"vocab_size={vocab_size} is too small: it must be positive")
    smallest = 256 + num_special_tokens
    if vocab_size < smallest and not below_initial:
        raise BPEInputError(
            f"vocab_size={vocab_size} is too small: the 256 byte tokens and {num_special_tokens} "
            f"special token(s) already need {smallest}"
        )
    if vocab_size > MAX_VOCAB_SIZE:
        raise BPEInputError(f"vocab_size={vocab_size} is too large: at most {MAX_VOCAB_SIZE:,} (2**31 - 1)")
    return vocab_size


# More workers than this per core only cost memory (each thread or process holds its own counts);
# a larger request is capped here, before it reaches the pool or the native threads.
MAX_WORKERS_PER_CORE = 4


def check_num_workers(num_workers: object, name: str = "num_workers") -> int | None:
    """None (every core) or a positive count. Negative counts follow scikit-learn (-1 = every core,
    -2 = all but one); 0, and a negative count that leaves no core, are refused; counts above
    MAX_WORKERS_PER_CORE per core are capped (the result never depends on the count)."""
    if num_workers is None:
        return None
    cores = usable_cores()
    # The convention itself is backend.resolve_parallelism's (which also refuses non-integers); here
    # only the refusals worded for users, where it would raise a bare ValueError or clamp to 1.
    if isinstance(num_workers, int) and not isinstance(num_workers, bool):
        if num_workers == 0:
            raise BPEInputError(f"{name} must not be 0: give a positive count, or -1 for every core ({cores} here)")
        if cores + 1 + num_workers < 1:
            raise BPEInputError(
                f"{name}={num_workers} leaves no core on this machine ({cores} cores): "
                f"-1 means every core, -2 all but one, down to -{cores}"
            )
    return min(resolve_parallelism(num_workers, name=name), MAX_WORKERS_PER_CORE * cores)


# Magic numbers of compressed files. Each begins with bytes that are invalid UTF-8, so no text file
# is refused by mistake.
_COMPRESSED_MAGIC = {
    b"\x1f\x8b": ("gzip", "gunzip -k"),
    b"\x28\xb5\x2f\xfd": ("zstd", "zstd -d"),
    b"\xfd7zXZ\x00": ("xz", "unxz -k"),
}


def check_regular_file(
    input_path: str | os.PathLike, what: str = "training file", *, allow_empty: bool = False, head_bytes: int = 8
) -> tuple[Path, bytes]:
    """A readable, non-empty (unless `allow_empty`), regular file and its first `head_bytes` bytes,
    checked without reading more (a FIFO or a device is refused before it is opened: opening a FIFO
    would wait for a writer). Compressed files pass; `check_text_file` refuses them."""
    path = Path(input_path)
    try:
        status = path.stat()
    except FileNotFoundError:
        raise BPEInputError(f"{what} not found: {path}") from None
    except OSError as error:
        raise BPEInputError(f"cannot read {what} {path}: {error.strerror or error}") from None
    if stat.S_ISDIR(status.st_mode):
        raise BPEInputError(f"{what} path is a directory, not a file: {path}")
    if not stat.S_ISREG(status.st_mode):
        raise BPEInputError(f"{what} {path} is not a regular file (a FIFO, device or socket); copy it to a file first")
    try:
        with open(path, "rb") as file:
            head = file.read(max(8, head_bytes))
    except OSError as error:
        raise BPEInputError(f"cannot read {what} {path}: {error.strerror or error}") from None
    if status.st_size == 0:
        if head:  # /proc and /sys files say size 0 but have content: they cannot be memory-mapped
            raise BPEInputError(f"{what} {path} is not a regular file (its size is unknown); copy it to a file first")
        if allow_empty:
            return path, head
        raise BPEInputError(f"{what} is empty: {path}")
    return path, head


def check_text_file(input_path: str | os.PathLike, what: str = "training file", *, allow_empty: bool = False) -> Path:
    """`check_regular_file`, and uncompressed: for readers that need random access to the bytes
    (memory-mapped encoding, reports). Training and counting decompress as they read instead
    (`formats.py`), so they check with `check_regular_file`."""
    path, head = check_regular_file(input_path, what, allow_empty=allow_empty)
    for magic, (kind, command) in _COMPRESSED_MAGIC.items():
        if head.startswith(magic):
            raise BPEInputError(
                f"{what} {path} is {kind}-compressed; decompress it first, e.g. {command} {path}"
            )
    if path.suffix == ".bz2" and head.startswith(b"BZh"):
        raise BPEInputError(f"{what} {path} is bzip2-compressed; decompress it first, e.g. bunzip2 -k {path}")
    return path


def check_input_file(input_path: str | os.PathLike) -> Path:
    return check_text_file(input_path, "training file")


def invalid_utf8_error(error: UnicodeDecodeError, offset: int = 0) -> BPEInputError:
    """The error for text that is not UTF-8, naming the absolute byte offset of the first invalid
    byte (`offset`: where the decoded bytes start in the input)."""
    return BPEInputError(
        f"input is not valid UTF-8: invalid UTF-8 at byte offset {offset + error.start} ({error.reason})"
    )


def decode_utf8(data: bytes, offset: int = 0) -> str:
    """Decode, naming the absolute byte offset of the first invalid byte on failure."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise invalid_utf8_error(error, offset) from None


def read_corpus(input_path: str | os.PathLike) -> str:
    path = check_input_file(input_path)
    return decode_utf8(path.read_bytes())


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

# An ASCII letter or digit followed by ' ' or '\n': the cut goes between them (see _whitespace_cut).
# Each byte as its part in a whitespace cut (below): b"a" an ASCII letter or digit, b" " a space or a
# newline, b"." anything else. A cut is then where b"a " is found, at C speed however long the
# text goes without one (a regular expression tried each letter of one long word in turn, 70 MB/s).
_CUT_ROLES = bytes(
    ord("a") if chr(byte).isascii() and chr(byte).isalnum() else ord(" ") if byte in b" \n" else ord(".")
    for byte in range(256)
)
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


def _whitespace_cut(data: Buffer, start: int, end: int, tokens: list[bytes]) -> int | None:
    """The first cut in [start, end) before ' ' or '\\n' that follows an ASCII letter or digit.

    Such a cut splits no pre-token: no alternative of a named pattern (GPT-2's, cl100k's, o200k's;
    `Pattern.whitespace_cuts_safe`) puts whitespace after a letter or digit, so the pre-token
    before the cut ends there; the whitespace run after it starts a fresh match, and `(?!\\S)` (or
    cl100k's `$`) only looks forward from inside that run, which a cut never ends. An ASCII byte is
    never inside a multi-byte UTF-8 character.
    """
    for cut in whitespace_cuts(data, start, end):
        if not _spans_special_token(data, cut, tokens):
            return cut
    return None


def whitespace_cuts(data: Buffer, start: int, end: int, *, backward: bool = False) -> Iterator[int]:
    """Every position p in [start, end) with data[p] a space or newline after an ASCII letter or
    digit (the whitespace cuts of `_whitespace_cut`), first to last or, `backward`, last to first."""
    low = max(start, 1) - 1
    if end - low < 2:
        return
    roles = bytes(data[low:end]).translate(_CUT_ROLES)
    if backward:
        found = roles.rfind(b"a ")
        while found != -1:
            yield low + found + 1
            found = roles.rfind(b"a ", 0, found + 1)
    else:
        found = roles.find(b"a ")
        while found != -1:
            yield low + found + 1
            found = roles.find(b"a ", found + 1)


def _next_boundary(data: Buffer, start: int, tokens: list[bytes], whitespace: bool = True) -> int:
    """The first safe cut at or after `start`, preferring a special token in the same 1 MiB block
    (`whitespace`: else a whitespace cut; without it only special tokens cut)."""
    size = len(data)
    for block_start in range(start, size, _SCAN_BLOCK):
        block_end = min(block_start + _SCAN_BLOCK, size)
        cut = _special_token_cut(data, block_start, block_end, tokens)
        if cut is None and whitespace:
            cut = _whitespace_cut(data, block_start, block_end, tokens)
        if cut is not None:
            return cut
    return size


def find_chunk_boundaries(
    data: Buffer, num_chunks: int, special_tokens: Iterable[str], *, whitespace: bool = True
) -> list[int]:
    """Byte offsets `[0, ..., len(data)]` cutting `data` into at most `num_chunks` pieces that can be
    counted independently: every cut is at a special token's start, or failing that (with
    `whitespace`, which the pattern's `whitespace_cuts_safe` allows) at a safe whitespace boundary,
    so counting the chunks separately gives exactly the counts of the whole."""
    tokens = [token.encode("utf-8") for token in special_tokens]
    size = len(data)
    boundaries = [0]
    for index in range(1, max(1, num_chunks)):
        guess = max(size * index // num_chunks, boundaries[-1] + 1)
        if guess >= size:
            break
        cut = _next_boundary(data, guess, tokens, whitespace)
        if cut >= size:
            break
        if cut > boundaries[-1]:
            boundaries.append(cut)
    boundaries.append(size)
    return boundaries


# ---------------------------------------------------------------------------------------------
# Vocabulary


# Tokens this long are shared between the merges and the vocabulary (assemble_vocab).
_SHARED_TOKEN_BYTES = 1 << 16


def initial_vocab(special_tokens: Iterable[str]) -> Vocab:
    """Ids 0..255 are the single bytes, then the special tokens in the order given."""
    vocab: Vocab = {byte: bytes([byte]) for byte in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab


# How a vocabulary numbers its tokens (see assemble_vocab).
CS336_LAYOUT = "cs336"
RUSTBPE_LAYOUT = "rustbpe"
HF_LAYOUT = "hf"
HF_FILES_LAYOUT = "hf-files"
VOCAB_LAYOUTS = (CS336_LAYOUT, RUSTBPE_LAYOUT, HF_LAYOUT, HF_FILES_LAYOUT)


def trains_below_initial(layout: str) -> bool:
    """Whether a vocab_size below the initial tokens (special tokens and bytes) trains in `layout`:
    HF's layouts, with no merges, as HF does; the others refuse it."""
    return layout in (HF_LAYOUT, HF_FILES_LAYOUT)


def assemble_vocab(
    special_tokens: Iterable[str], merges: Merges, layout: str = CS336_LAYOUT, alphabet: Iterable[int] | None = None
) -> Vocab:
    """The 256 bytes, the special tokens in the order given and one token per merge in creation
    order, numbered as `layout` numbers them:

    - `cs336`: the bytes (ids 0-255), the special tokens, the merges;
    - `rustbpe`: the bytes, the merges, the special tokens (rustbpe's ranks hold none; nanochat
      adds them after the ranks);
    - `hf`: the special tokens, the bytes in the code-point order of their byte-level characters
      (GPT-2's byte-to-unicode map), the merges (HF tokenizers' `BpeTrainer`);
    - `hf-files`: the same with only the bytes of `alphabet` (the bytes the text holds, required
      here and only here), as HF's `train(files)` starts from the characters seen."""
    if layout not in VOCAB_LAYOUTS:
        raise BPEInputError(f"layout must be one of {', '.join(VOCAB_LAYOUTS)}, got {layout!r}")
    if (alphabet is not None) != (layout == HF_FILES_LAYOUT):
        raise BPEInputError(f"an alphabet goes with the layout {HF_FILES_LAYOUT!r} and only with it")
    specials = [token.encode("utf-8") for token in special_tokens]
    byte_tokens = [bytes([byte]) for byte in (range(256) if alphabet is None else sorted(set(alphabet)))]
    merged = _merged_tokens(merges)
    if layout == CS336_LAYOUT:
        order = [*byte_tokens, *specials, *merged]
    elif layout == RUSTBPE_LAYOUT:
        order = [*byte_tokens, *merged, *specials]
    else:

        characters = gpt2_bytes_to_unicode()
        byte_tokens.sort(key=lambda token: characters[token[0]])
        order = [*specials, *byte_tokens, *merged]
    return dict(enumerate(order))


def _merged_tokens(merges: Merges) -> list[bytes]:
    """One token per merge. A long token that later merges name is the very object they hold, not
    an equal copy made first: one long word makes tokens of megabytes, which would be held twice."""
    long_parts: dict[int, dict[int, bytes]] = {}  # length -> id -> part
    for pair in merges:
        for part in pair:
            if len(part) >= _SHARED_TOKEN_BYTES:
                long_parts.setdefault(len(part), {})[id(part)] = part
    tokens = []
    for left, right in merges:
        candidates = long_parts.get(len(left) + len(right), {}).values()
        held = next((part for part in candidates if part.startswith(left) and part.endswith(right)), None)
        tokens.append(left + right if held is None else held)
    return tokens


def special_token_ids(vocab: Vocab, special_tokens: Iterable[str]) -> dict[str, int]:
    """The id of each special token that `vocab` spells: the lowest id holding its bytes, except that a
    one-byte special token (`a`, a space, `[`) never takes the byte's own id when another id holds it:
    training gives such a token its own id (256 onwards) while the byte keeps its id for regular
    text, so both ids hold the same bytes and regular text uses the lower one. Tokens the vocabulary
    lacks are left out. Every loader, the tokenizer and the exports choose through this one rule."""
    wanted = {token.encode("utf-8"): token for token in special_tokens}
    spelled: dict[bytes, list[int]] = {}
    for token_id, token in vocab.items():
        if token in wanted:
            spelled.setdefault(token, []).append(token_id)
    chosen: dict[str, int] = {}
    for token_bytes, token in wanted.items():
        ids = sorted(spelled.get(token_bytes, ()))
        if not ids:
            continue
        # The lowest id is what regular text encodes a lone byte with; the special token is the next.
        chosen[token] = ids[1] if len(token_bytes) == 1 and len(ids) > 1 else ids[0]
    return chosen


def merge_word(word: list[int], pair: tuple[int, int], new_token: int) -> list[int]:
    """Replace every non-overlapping occurrence of `pair`, scanning left to right."""
    left, right = pair
    if left not in word:  # a C-speed scan that spares the Python loop below for most words
        return word
    merged: list[int] = []
    index = 0
    last = len(word) - 1
    while index <= last:
        if index < last and word[index] == left and word[index + 1] == right:
            merged.append(new_token)
            index += 2
        else:
            merged.append(word[index])
            index += 1
    return merged
