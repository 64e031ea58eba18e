"""The contract's input checks (docs/CONTRACT.md): arguments (special tokens, vocabulary size, worker
counts), input files (regular, readable, uncompressed where random access is needed) and UTF-8, and
the types every trainer shares. What defines the result lives beside it, once, so the versions cannot
drift apart: `splitting.py` (special tokens, pre-tokens, safe cuts) and `vocab_layout.py` (the
vocabulary's layouts and the merge of a pair).
"""

from __future__ import annotations

import mmap
import os
import stat
import warnings
from collections.abc import Iterable
from pathlib import Path

from ..errors import BPEInputError
from ..native.backend import resolve_parallelism, usable_cores

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
            raise BPEInputError(f"{what} {path} is {kind}-compressed; decompress it first, e.g. {command} {path}")
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


# Names that lived here before the contract was split by role: still importable from here, with a
# DeprecationWarning naming their module now.
_MOVED = {
    **dict.fromkeys(
        (
            "GPT2_REGEX",
            "special_token_regex",
            "split_on_special_tokens",
            "count_words_in_text",
            "special_token_bytes_in_files",
            "count_words_in_lines",
            "alphabet_of",
            "whitespace_cuts",
            "find_chunk_boundaries",
        ),
        "splitting",
    ),
    **dict.fromkeys(
        (
            "initial_vocab",
            "CS336_LAYOUT",
            "RUSTBPE_LAYOUT",
            "HF_LAYOUT",
            "HF_FILES_LAYOUT",
            "VOCAB_LAYOUTS",
            "trains_below_initial",
            "assemble_vocab",
            "special_token_ids",
            "merge_word",
        ),
        "vocab_layout",
    ),
    **dict.fromkeys(("GPT2_SPLIT_PATTERN", "Pattern", "resolve_pattern"), "pattern"),
}


def __getattr__(name: str) -> object:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    warnings.warn(
        f"{__name__}.{name} moved to {__package__}.{module}.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(f".{module}", __package__), name)
