"""Saving and loading a trained vocabulary and merge list, as one unit.

A training run writes into its output directory:
    vocab.json, merges.txt   GPT-2's formats, the documented default for loading: `vocab.json` maps
                             token -> id, `merges.txt` has one merge per line, every byte shown as a
                             printable character by GPT-2's byte-to-unicode table
    vocab.pkl, merges.pkl    the same as pickles of the Python objects (`dict[int, bytes]`,
                             `list[tuple[bytes, bytes]]`), read back with a restricted unpickler
    bpe_run.json             the run's metadata: special tokens, vocabulary size, number of merges,
                             trainer, and each file's size and SHA-256

The set is one unit. Only one run writes a directory at a time (a lock file, `.cs336_basics.lock`,
held with `flock` for the whole run); the files are written into a hidden staging directory and
moved into place only when all of them are complete, the metadata first, with SIGINT and SIGTERM held
back during the moves. A run killed at any moment leaves either the old set, or files a loader
recognises as not matching `bpe_run.json`; a later run removes the staging directories that killed
runs left. Loading checks each file against the metadata when it is present, so files from
different runs, or a truncated file, are refused instead of silently encoding differently.

Loading never executes code from a file: pickles are read by an unpickler that refuses every
class or function reference, so only dict, list, tuple, int and bytes can come out of them.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import io
import json
import os
import pickle
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from ._common import BPEInputError, Merges, Vocab

try:
    import fcntl
except ImportError:  # Windows: no flock; the staging directory still keeps each set whole
    fcntl = None  # type: ignore[assignment]

OUTPUT_FILES = ("vocab.json", "merges.txt", "vocab.pkl", "merges.pkl")
RUN_FILE = "bpe_run.json"
RUN_FORMAT = "cs336_basics BPE training run"
RUN_FORMAT_VERSION = 1
LOCK_FILE = ".cs336_basics.lock"
STAGING_PREFIX = ".cs336_basics-staging-"

# Text is written in batches of about this many characters (memory stays flat, calls stay few).
_WRITE_BATCH_CHARS = 1 << 20


class OutputBusyError(BPEInputError):
    """Another run holds the output directory's lock."""


# ---------------------------------------------------------------------------------------------
# GPT-2's byte <-> printable character table


@cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: printable bytes map to themselves, the other 68 to chr(256), chr(257), ..."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    for offset, byte in enumerate(byte for byte in range(256) if byte not in table):
        table[byte] = chr(256 + offset)
    return table


@cache
def gpt2_unicode_to_bytes() -> dict[str, int]:
    return {char: byte for byte, char in gpt2_bytes_to_unicode().items()}


@cache
def _encoding_table() -> dict[int, str]:
    # latin-1 text of the bytes -> GPT-2 characters, for str.translate (C speed, any token length).
    return {byte: char for byte, char in gpt2_bytes_to_unicode().items() if chr(byte) != char}


@cache
def _decoding_table() -> dict[int, str]:
    # GPT-2 characters -> latin-1 text of the bytes. A character below 256 that GPT-2 never uses
    # (space, control characters) maps to one latin-1 cannot encode, so it is refused below.
    table = {ord(char): chr(byte) for char, byte in gpt2_unicode_to_bytes().items()}
    for code in range(256):
        table.setdefault(code, "\U0010ffff")
    return table


def encode_token(token: bytes) -> str:
    return token.decode("latin-1").translate(_encoding_table())


def decode_token(text: str, source: str | Path = "<input>") -> bytes:
    try:
        return text.translate(_decoding_table()).encode("latin-1")
    except UnicodeEncodeError:
        raise BPEInputError(f"{source}: {text!r} is not in GPT-2's byte-to-unicode encoding") from None


# ---------------------------------------------------------------------------------------------
# Writing


def check_output_dir(out_dir: str | os.PathLike) -> Path:
    """Create `out_dir` if needed and make sure files can be written there, before any long work."""
    path = Path(out_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise BPEInputError(f"cannot write to output directory {path}: {error.strerror or error}") from None
    return path


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename it over `path` in one step."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(temporary, 0o666 & ~_current_umask())  # mkstemp makes 0600; give the usual mode
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class _DigestWriter(io.RawIOBase):
    """A binary file that hashes and counts what goes through it (pickle.dump writes to it)."""

    def __init__(self, file: BinaryIO) -> None:
        super().__init__()
        self._file = file
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self._file.write(data)
        self.digest.update(data)
        length = memoryview(data).nbytes
        self.size += length
        return length


def _write_file(path: Path, fill: Any) -> dict[str, Any]:
    """Create `path`, let `fill(writer)` write it, sync it; returns its size and SHA-256."""
    with open(path, "wb") as file:
        writer = _DigestWriter(file)
        fill(writer)
        file.flush()
        os.fsync(file.fileno())
    return {"bytes": writer.size, "sha256": writer.digest.hexdigest()}


def _write_text(writer: _DigestWriter, pieces: Iterable[str]) -> None:
    batch: list[str] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= _WRITE_BATCH_CHARS:
            writer.write("".join(batch).encode("utf-8"))
            batch, size = [], 0
    writer.write("".join(batch).encode("utf-8"))


def _vocab_json_pieces(vocab: Vocab) -> Iterator[str]:
    """`json.dumps({encode_token(token): id}, ensure_ascii=False, indent=0)`, piece by piece.

    A token spelled twice (a merge may spell a special token) keeps its first position and its
    last id, as a dict built in id order would."""
    last_id = {token: token_id for token_id, token in vocab.items()}
    yield "{"
    separator = "\n"
    for token in vocab.values():
        token_id = last_id.pop(token, None)
        if token_id is None:
            continue
        yield f"{separator}{json.dumps(encode_token(token), ensure_ascii=False)}: {token_id}"
        separator = ",\n"
    yield "\n}"


def _merges_txt_pieces(merges: Merges) -> Iterator[str]:
    for left, right in merges:
        yield f"{encode_token(left)} {encode_token(right)}\n"


def _infer_special_tokens(vocab: Vocab, merges: Merges) -> list[str]:
    """The special tokens of a vocabulary laid out exactly as training makes it (the 256 bytes,
    the special tokens, one token per merge in order); none for any other vocabulary."""
    count = len(vocab) - 256 - len(merges)
    if count < 0 or any(vocab.get(byte) != bytes([byte]) for byte in range(256)):
        return []
    first_merged = 256 + count
    for index, (left, right) in enumerate(merges):
        token = vocab.get(first_merged + index)
        fits = token is not None and len(token) == len(left) + len(right)
        if not (fits and token.startswith(left) and token.endswith(right)):
            return []
    try:
        return [vocab[256 + index].decode("utf-8") for index in range(count)]
    except (KeyError, UnicodeDecodeError):
        return []


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (they are delivered then, not lost)."""
    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _fsync_directory(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform or file system syncs directories
        handle = os.open(path, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


class OutputDirectory:
    """An output directory held for one run: `with OutputDirectory(path) as output: ...
    output.save(vocab, merges)`. Entering checks the directory, takes its lock (refusing at once,
    with the holder's pid, if another run has it) and removes what killed runs left behind."""

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.path = Path(out_dir)
        self._lock_handle: int | None = None

    def __enter__(self) -> OutputDirectory:
        self.path = check_output_dir(self.path)
        for name in (*OUTPUT_FILES, RUN_FILE):
            target = self.path / name
            if target.exists() and not target.is_file():
                raise BPEInputError(f"cannot write {target}: a directory or special file has that name")
        self._lock()
        try:
            self._remove_stale_files()
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._unlock()

    def _lock(self) -> None:
        if fcntl is None:
            return
        lock_path = self.path / LOCK_FILE
        while True:
            handle = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(handle)
                if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                owner = ""
                with contextlib.suppress(OSError):
                    owner = lock_path.read_text().strip()
                raise OutputBusyError(
                    f"another run{f' (pid {owner})' if owner else ''} is writing to {self.path}; "
                    "wait for it to finish or choose another output directory"
                ) from None
            # The previous holder removes the lock file when it is done: a lock taken on a file that
            # is no longer at `lock_path` protects nothing, so take it again on the new one.
            try:
                if os.fstat(handle).st_ino == os.stat(lock_path).st_ino:
                    os.ftruncate(handle, 0)
                    os.write(handle, f"{os.getpid()}\n".encode())
                    self._lock_handle = handle
                    return
            except FileNotFoundError:
                pass
            os.close(handle)

    def _unlock(self) -> None:
        if self._lock_handle is None:
            return
        with contextlib.suppress(OSError):
            (self.path / LOCK_FILE).unlink()
        os.close(self._lock_handle)
        self._lock_handle = None

    def _remove_stale_files(self) -> None:
        """Staging directories and temporary files of runs that were killed (we hold the lock, so
        no live run owns them)."""
        for entry in self.path.iterdir():
            if entry.name.startswith(STAGING_PREFIX) and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            elif any(entry.name.startswith(f".{name}.") and entry.name.endswith(".tmp") for name in OUTPUT_FILES):
                entry.unlink(missing_ok=True)

    def save(
        self,
        vocab: Vocab,
        merges: Merges,
        special_tokens: list[str] | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> dict[str, Path]:
        """Write the whole set; returns the paths of the files written (metadata last).
        `special_tokens` defaults to those the vocabulary's layout implies (ids 256 onwards before
        the merged tokens); `details` (e.g. the trainer's name) go into the metadata."""
        if fcntl is not None and self._lock_handle is None:
            raise RuntimeError("OutputDirectory.save called outside its `with` block")
        if special_tokens is None:
            special_tokens = _infer_special_tokens(vocab, merges)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.path))
        try:
            os.chmod(staging, 0o777 & ~_current_umask())
            writers = {
                "vocab.json": lambda out: _write_text(out, _vocab_json_pieces(vocab)),
                "merges.txt": lambda out: _write_text(out, _merges_txt_pieces(merges)),
                "vocab.pkl": lambda out: pickle.dump(vocab, out),
                "merges.pkl": lambda out: pickle.dump(merges, out),
            }
            files = {name: _write_file(staging / name, write) for name, write in writers.items()}
            for name, info in files.items():
                info["entries"] = len(merges) if name.startswith("merges") else len(vocab)
            run = {
                "format": RUN_FORMAT,
                "format_version": RUN_FORMAT_VERSION,
                "run_id": uuid.uuid4().hex,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "vocab_size": len(vocab),
                "num_merges": len(merges),
                "special_tokens": list(special_tokens),
                **(details or {}),
                "files": files,
            }
            text = json.dumps(run, ensure_ascii=False, indent=2) + "\n"
            _write_file(staging / RUN_FILE, lambda out: out.write(text.encode("utf-8")))
            _fsync_directory(staging)
            # The metadata goes first: from then on, a file of the old set that is still in place
            # no longer matches it, whenever the moves stop.
            with _signals_held():
                for name in (RUN_FILE, *OUTPUT_FILES):
                    os.replace(staging / name, self.path / name)
                _fsync_directory(self.path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return {name: self.path / name for name in (*OUTPUT_FILES, RUN_FILE)}


def save_tokenizer(
    out_dir: str | os.PathLike,
    vocab: Vocab,
    merges: Merges,
    special_tokens: list[str] | None = None,
    *,
    details: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write vocab.json, merges.txt, vocab.pkl, merges.pkl and bpe_run.json into `out_dir` as one
    unit (see the module docstring); returns their paths."""
    with OutputDirectory(out_dir) as output:
        return output.save(vocab, merges, special_tokens, details=details)


# ---------------------------------------------------------------------------------------------
# Loading


class _RestrictedUnpickler(pickle.Unpickler):
    """Builds only the containers and scalars pickle has opcodes for; every reference to a class or
    function (the way a pickle runs code) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"it refers to {module}.{name}; only dict, list, tuple, int and bytes are accepted"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it uses persistent ids")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise BPEInputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise BPEInputError(f"{path} is a directory, not a file") from None
    except OSError as error:
        raise BPEInputError(f"cannot read {path}: {error.strerror or error}") from None


def _unpickle(path: Path, data: bytes) -> object:
    try:
        return _RestrictedUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as error:
        raise BPEInputError(f"{path}: refused to load this pickle: {error}") from None
    except Exception as error:  # a corrupt pickle fails in many ways (EOFError, ValueError, ...)
        raise BPEInputError(f"{path} is not a valid pickle ({type(error).__name__}: {error})") from None


def _decode_text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BPEInputError(f"{path} is not UTF-8 text: invalid byte at offset {error.start}") from None


def read_run_info(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The run metadata (`bpe_run.json`) in `directory`, or None when there is none."""
    path = Path(directory) / RUN_FILE
    if not path.exists():
        return None
    try:
        run = json.loads(_decode_text(path, _read_bytes(path)))
    except json.JSONDecodeError as error:
        raise BPEInputError(f"{path} is not valid JSON: {error}") from None
    valid = (
        isinstance(run, dict)
        and run.get("format") == RUN_FORMAT
        and isinstance(run.get("files"), dict)
        and isinstance(run.get("special_tokens"), list)
        and all(isinstance(token, str) for token in run["special_tokens"])
    )
    if not valid:
        raise BPEInputError(f"{path} is not a {RUN_FORMAT} metadata file")
    return run


def _check_against_run(path: Path, data: bytes, run: dict[str, Any] | None) -> None:
    if run is None:
        return
    expected = run["files"].get(path.name)
    if not isinstance(expected, dict):
        return  # a file the run did not write under this name: nothing to compare with
    if len(data) == expected.get("bytes") and hashlib.sha256(data).hexdigest() == expected.get("sha256"):
        return
    how = "is shorter than" if len(data) < expected.get("bytes", 0) else "differs from"
    raise BPEInputError(
        f"{path} {how} the file the run in {path.parent / RUN_FILE} wrote ({len(data):,} bytes, expected "
        f"{expected.get('bytes', 0):,}): it was truncated, edited, or written by another run. "
        "Train again into this directory (or load with check_run=False to use it anyway)"
    )


def _check_vocab(path: Path, vocab: object) -> Vocab:
    if not isinstance(vocab, dict):
        raise BPEInputError(f"{path} does not hold a vocabulary (id -> bytes), but a {type(vocab).__name__}")
    for token_id, token in vocab.items():
        if type(token_id) is not int or type(token) is not bytes:
            raise BPEInputError(f"{path}: vocabulary entries must be int -> bytes, found {token_id!r}: {token!r}")
    return vocab


def _check_merges(path: Path, merges: object) -> Merges:
    if not isinstance(merges, list):
        raise BPEInputError(f"{path} does not hold a list of merges, but a {type(merges).__name__}")
    for number, merge in enumerate(merges):
        if not (isinstance(merge, tuple) and len(merge) == 2 and all(type(part) is bytes for part in merge)):
            raise BPEInputError(f"{path}: merge {number} must be a pair of bytes, found {merge!r}")
    return merges


def load_vocab(path: str | os.PathLike, *, run: dict[str, Any] | None = None) -> Vocab:
    """A vocabulary from `vocab.pkl` (id -> bytes) or GPT-2 `vocab.json` (token string -> id);
    checked against `run` (read_run_info) when given."""
    path = Path(path)
    data = _read_bytes(path)
    _check_against_run(path, data, run)
    if path.suffix == ".pkl":
        return _check_vocab(path, _unpickle(path, data))
    try:
        entries = json.loads(_decode_text(path, data))
    except json.JSONDecodeError as error:
        raise BPEInputError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(entries, dict):
        raise BPEInputError(f"{path} must hold a JSON object of token -> id, not a {type(entries).__name__}")
    vocab: Vocab = {}
    for token, token_id in entries.items():
        if type(token_id) is not int:
            raise BPEInputError(f"{path}: the id of {token!r} must be an integer, got {token_id!r}")
        vocab[token_id] = decode_token(token, path)
    return vocab


def load_merges(path: str | os.PathLike, *, run: dict[str, Any] | None = None) -> Merges:
    """Merges from `merges.pkl` or GPT-2 `merges.txt` (an optional `#version` header line);
    checked against `run` (read_run_info) when given."""
    path = Path(path)
    data = _read_bytes(path)
    _check_against_run(path, data, run)
    if path.suffix == ".pkl":
        return _check_merges(path, _unpickle(path, data))
    merges: Merges = []
    for number, line in enumerate(_decode_text(path, data).split("\n"), start=1):
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise BPEInputError(f"{path}:{number}: expected two tokens separated by one space, got {line!r}")
        merges.append((decode_token(parts[0], path), decode_token(parts[1], path)))
    return merges


def load_tokenizer_files(
    vocab_path: str | os.PathLike, merges_path: str | os.PathLike, *, check_run: bool = True
) -> tuple[Vocab, Merges, dict[str, Any] | None]:
    """The vocabulary, the merges and the run metadata found beside them (None without any).

    With `check_run`, each file is compared (size and SHA-256) with what the metadata of its
    directory recorded, and the two files must come from the same run."""
    vocab_path, merges_path = Path(vocab_path), Path(merges_path)
    vocab_run = read_run_info(vocab_path.parent) if check_run else None
    same_directory = merges_path.parent.resolve() == vocab_path.parent.resolve()
    merges_run = vocab_run if same_directory or not check_run else read_run_info(merges_path.parent)
    if vocab_run and merges_run and vocab_run.get("run_id") != merges_run.get("run_id"):
        raise BPEInputError(f"{vocab_path} and {merges_path} come from different training runs")
    vocab = load_vocab(vocab_path, run=vocab_run)
    merges = load_merges(merges_path, run=merges_run)
    return vocab, merges, vocab_run or merges_run
