"""Saving and loading a trained vocabulary and merge list, as one unit.

A training run writes into its output directory:
    vocab.json, merges.txt   GPT-2's formats, the documented default for loading: `vocab.json` maps
                             token -> id, `merges.txt` has one merge per line, every byte shown as a
                             printable character by GPT-2's byte-to-unicode table
    vocab.pkl, merges.pkl    the same as pickles of the Python objects (`dict[int, bytes]`,
                             `list[tuple[bytes, bytes]]`), read back with a restricted unpickler
    bpe_run.json             the run's metadata: special tokens, vocabulary size, number of merges,
                             trainer, the pattern, tie-break and layout it trained by
                             (`run_rules`), and each file's size and SHA-256
and, when asked for, exports of the same tokenizer (see `export`): tokenizer.json,
tokenizer_config.json and special_tokens_map.json for HF `tokenizers`/`transformers`, and
tokenizer.tiktoken. They belong to the set like the others: staged, listed in `bpe_run.json` with
their size and SHA-256, moved in with the rest; an export the new set lacks is removed with the old
set, so that `transformers` never loads a previous run's tokenizer from the directory.

The set is one unit. Only one run writes a directory at a time (a lock file, `.cs336_basics.lock`,
held with `flock` for the whole run); the files are written into a hidden staging directory, which,
once all of them are complete, is renamed to `.cs336_basics-commit-<run id>` (the commit), and its
files are moved into place, the metadata first, with SIGINT and SIGTERM held back. A run killed at
any moment leaves a set that loads whole: the old one until the new metadata is in place, then the
new one, each file of it not yet moved read from the commit directory; the next run moves them in,
and removes the staging directories that killed runs left. Loading checks each file against the
metadata when it is present, so files from different runs, or a truncated file, are refused
instead of silently encoding differently.

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
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from ..rules.byte_level import gpt2_bytes_to_unicode, gpt2_unicode_to_bytes
from ..rules.contract import BPEInputError, Merges, Vocab
from ..rules.merge_limits import NO_LIMITS, MergeLimits
from ..rules.pattern import GPT2, GPT2_SPLIT_PATTERN, Pattern, check_unicode, pattern_from_regex
from ..rules.tie_break import CS336
from ..rules.vocab_layout import CS336_LAYOUT

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
# A complete set being moved into place: the staging directory renamed to this prefix and the run's
# id. A run killed during the moves leaves it; loading reads the files not yet moved from it, and the
# next run moves them in (OutputDirectory.save).
COMMIT_PREFIX = ".cs336_basics-commit-"
# bpe_run.json's field for the ids vocab.json cannot hold (a one-byte special token beside its byte).
VOCAB_JSON_EXTRA = "vocab_json_extra_ids"


def export_file_names() -> tuple[str, ...]:
    """The files exports write, written only on request (`OutputDirectory.save(exports=...)`): one
    list, the export table's (`export.ExportFormat.files`), so that a set removes the exports of the
    set it replaces. Imported when asked: `export` builds on this module."""
    from .export import export_file_names as names

    return names()


def __getattr__(name: str) -> object:
    if name == "EXPORT_FILES":  # the tuple it was before the export table
        return export_file_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Text is written in batches of about this many characters (memory stays flat, calls stay few).
_WRITE_BATCH_CHARS = 1 << 20


class OutputBusyError(BPEInputError):
    """Another run holds the output directory's lock."""


def run_rules(trained: Any) -> dict[str, Any]:
    """bpe_run.json's fields for what a run trained by (its `presets.TrainingRules`, or a
    `trainers.TrainingResult`, which records them): `pattern` as its name (null for a regex of no
    name), its regex and the Unicode version of its classes, `tie_break`, `layout`, HF's
    `min_frequency` and `max_token_length` (null: none), SuperBPE's `max_words` (null: none) and
    `no_colon_space`; pass as `details`."""
    pattern, limits = trained.pattern, trained.limits
    return {
        "pattern": {"name": pattern.name, "regex": pattern.regex, "unicode": pattern.unicode_version},
        "tie_break": trained.tie_break,
        "layout": trained.layout,
        "min_frequency": limits.min_frequency,
        "max_token_length": limits.max_token_length,
        "max_words": limits.max_words,
        "no_colon_space": limits.no_colon_space,
    }


def recorded_rules(run: dict[str, Any]) -> dict[str, Any]:
    """`run_rules`' fields of a run's metadata; a file older than them trained by gpt2, cs336, cs336,
    without limits."""
    default = {
        "pattern": {"name": GPT2, "regex": GPT2_SPLIT_PATTERN},
        "tie_break": CS336,
        "layout": CS336_LAYOUT,
        "min_frequency": NO_LIMITS.min_frequency,
        "max_token_length": NO_LIMITS.max_token_length,
        "max_words": NO_LIMITS.max_words,
        "no_colon_space": NO_LIMITS.no_colon_space,
    }
    return {name: run.get(name, value) for name, value in default.items()}


# ---------------------------------------------------------------------------------------------
# GPT-2's byte <-> printable character table


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


def write_atomically(path: Path, data: bytes, *, on_commit: Callable[[], object] | None = None) -> None:
    """Write to a temporary file beside `path`, then rename it over `path` in one step; `on_commit`
    is called once it is in place, as in `OutputDirectory.save`."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes 0600; give the usual mode, through the descriptor: the name could be swapped
        # for a symbolic link meanwhile in a directory others can write.
        os.fchmod(handle, 0o666 & ~_current_umask())
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        with _signals_held():
            os.replace(temporary, path)
            if on_commit is not None:
                on_commit()
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


# A new file, never an existing one or one reached through a symbolic link, never inherited by children.
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _write_file(path: Path, fill: Any) -> dict[str, Any]:
    """Create `path` (it must not exist: see _NEW_FILE_FLAGS), let `fill(writer)` write it, sync it;
    returns its size and SHA-256."""
    try:
        handle = os.open(path, _NEW_FILE_FLAGS, 0o666)
    except FileExistsError:
        raise BPEInputError(f"cannot write {path}: something else created it first") from None
    with os.fdopen(handle, "wb") as file:
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


def _vocab_json_ids(vocab: Vocab) -> dict[bytes, int]:
    """The id vocab.json gives each token: the lowest id spelling it, which is the one regular text
    encodes with (`Tokenizer`). GPT-2's format maps a token to one id, so a token spelled twice (a
    one-byte special token beside its byte, ids 97 and 256 for `a`) keeps its lowest id there."""
    lowest: dict[bytes, int] = {}
    for token_id, token in vocab.items():
        if lowest.setdefault(token, token_id) > token_id:
            lowest[token] = token_id
    return lowest


def _vocab_json_extra_ids(vocab: Vocab, lowest: dict[bytes, int]) -> dict[str, str]:
    """The ids vocab.json cannot hold (see _vocab_json_ids), id -> token as vocab.json spells it: they
    go into bpe_run.json, and load_vocab adds them back, so both pairs of files give one vocabulary."""
    return {str(token_id): encode_token(token) for token_id, token in vocab.items() if lowest[token] != token_id}


def _vocab_json_pieces(vocab: Vocab, lowest: dict[bytes, int]) -> Iterator[str]:
    """`json.dumps({encode_token(token): id}, ensure_ascii=False, indent=0)`, piece by piece: each
    token at its first position, with its lowest id (`lowest`, from _vocab_json_ids)."""
    pending = dict(lowest)
    yield "{"
    separator = "\n"
    for token in vocab.values():
        token_id = pending.pop(token, None)
        if token_id is None:
            continue
        if len(token) <= _WRITE_BATCH_CHARS:
            yield f"{separator}{json.dumps(encode_token(token), ensure_ascii=False)}: {token_id}"
        else:
            yield f'{separator}"'
            for piece in _encoded_slices(token):
                yield json.dumps(piece, ensure_ascii=False)[1:-1]
            yield f'": {token_id}'
        separator = ",\n"
    yield "\n}"


def _merges_txt_pieces(merges: Merges) -> Iterator[str]:
    for left, right in merges:
        if len(left) + len(right) <= _WRITE_BATCH_CHARS:
            yield f"{encode_token(left)} {encode_token(right)}\n"
        else:
            yield from _encoded_slices(left)
            yield " "
            yield from _encoded_slices(right)
            yield "\n"


def _encoded_slices(token: bytes) -> Iterator[str]:
    """`encode_token(token)` in pieces of a batch at most: each byte is one character, so a token
    of many megabytes (one long word makes them) is written without a whole copy per step."""
    with memoryview(token) as view:
        for start in range(0, len(token), _WRITE_BATCH_CHARS):
            yield encode_token(bytes(view[start : start + _WRITE_BATCH_CHARS]))


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
    """SIGINT and SIGTERM wait until the block ends (they are delivered then, not lost).

    A thread's signal mask alone is not enough: a signal sent to the process reaches any thread
    that does not block it (a thread pool's, Dask's), and Python then runs the handler in the main
    thread, between two moves. So in the main thread the handlers are swapped for one that only
    notes the signal, and each noted signal is raised again, to the handler that was there, at the
    end."""
    held = (signal.SIGINT, signal.SIGTERM)
    noted: list[int] = []
    swapped: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in held:
            if signal.getsignal(signum) is not None:  # None: a handler set outside Python, left alone
                swapped[signum] = signal.signal(signum, lambda signum, frame: noted.append(signum))
    masked = hasattr(signal, "pthread_sigmask")
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held) if masked else None
    try:
        yield
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for signum, handler in swapped.items():
            signal.signal(signum, handler)
        for signum in noted:
            signal.raise_signal(signum)


def _chmod_directory(path: Path, mode: int) -> None:
    """chmod through a descriptor opened without following a symbolic link at `path`."""
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fchmod(handle, mode)
    finally:
        os.close(handle)


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
        if isinstance(out_dir, str) and not out_dir:  # Path("") is the current directory, never what was meant
            raise BPEInputError('the output directory is an empty path; give a path ("." for the current directory)')
        self.path = Path(out_dir)
        self._lock_handle: int | None = None
        self._created: list[Path] = []  # the directories this run made, deepest first
        self._saved = False

    def __enter__(self) -> OutputDirectory:
        self._created = [folder for folder in (self.path, *self.path.parents) if not folder.exists()]
        self.path = check_output_dir(self.path)
        # Exports too: save replaces or removes each of them.
        for name in (*OUTPUT_FILES, RUN_FILE, *export_file_names()):
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
        if not self._saved:
            # A run that wrote nothing (interrupted, failed) leaves no empty directory of its own behind.
            for folder in self._created:
                try:
                    folder.rmdir()
                except OSError:  # not empty (another run's files, a demo corpus) or already gone
                    break

    def _lock(self) -> None:
        if fcntl is None:
            return
        lock_path = self.path / LOCK_FILE
        while True:
            handle = self._open_lock_file(lock_path)
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

    @staticmethod
    def _open_lock_file(lock_path: Path) -> int:
        """The lock file, opened for writing our pid into it: never through a symbolic link (in a
        shared directory, another user's link would make the run truncate the file it points to),
        never anything but a regular file of one name, never inherited by child processes."""
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        # O_NONBLOCK: a FIFO put there must not make the open wait for a writer.
        try:
            handle = os.open(lock_path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
        except OSError as error:
            if lock_path.is_symlink():
                raise BPEInputError(
                    f"{lock_path} is a symbolic link; refusing to use it as the lock file (remove it)"
                ) from None
            raise BPEInputError(f"cannot open the lock file {lock_path}: {error.strerror or error}") from None
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
            os.close(handle)
            what = "has other hard links" if stat.S_ISREG(status.st_mode) else "is not a regular file"
            raise BPEInputError(f"{lock_path} {what}; refusing to use it as the lock file (remove it)")
        return handle

    def _unlock(self) -> None:
        if self._lock_handle is None:
            return
        with contextlib.suppress(OSError):
            (self.path / LOCK_FILE).unlink()
        os.close(self._lock_handle)
        self._lock_handle = None

    def _remove_stale_files(self) -> None:
        """What runs that were killed left (we hold the lock, so no live run owns it): a set they had
        begun to move into place is moved in the rest of the way, staging directories and temporary
        files are removed."""
        for entry in sorted(self.path.iterdir()):
            if entry.name.startswith(COMMIT_PREFIX) and entry.is_dir() and not entry.is_symlink():
                _finish_commit(self.path, entry)
        for entry in self.path.iterdir():
            if entry.name.startswith(STAGING_PREFIX) and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            elif any(
                # Exports were once written beside the set by write_atomically: their temporary files too.
                entry.name.startswith(f".{name}.") and entry.name.endswith(".tmp")
                for name in (*OUTPUT_FILES, *export_file_names())
            ):
                entry.unlink(missing_ok=True)

    def save(
        self,
        vocab: Vocab,
        merges: Merges,
        special_tokens: list[str] | None = None,
        *,
        details: dict[str, Any] | None = None,
        exports: dict[str, bytes] | None = None,
        on_commit: Callable[[], object] | None = None,
    ) -> dict[str, Path]:
        """Write the whole set; returns the paths of the files written (metadata last).
        `special_tokens` defaults to those the vocabulary's layout implies (ids 256 onwards before
        the merged tokens); `details` (e.g. the trainer's name) go into the metadata. `exports`
        (name in `export_file_names()` -> content, see `export.export_files`) join the set. `on_commit` is
        called once the set is in place, before SIGINT or SIGTERM held back meanwhile is delivered
        (the CLI's InterruptHandling.output_in_place)."""
        if fcntl is not None and self._lock_handle is None:
            raise RuntimeError("OutputDirectory.save called outside its `with` block")
        exports = dict(exports or {})
        unknown = sorted(set(exports) - set(export_file_names()))
        if unknown:
            raise ValueError(f"not an export of an output set: {unknown}; expected names from {export_file_names()}")
        if special_tokens is None:
            special_tokens = _infer_special_tokens(vocab, merges)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.path))
        self._saved = True  # from here on the directory is the run's output, whatever happens
        try:
            _chmod_directory(staging, 0o777 & ~_current_umask())
            lowest = _vocab_json_ids(vocab)
            json_extra = _vocab_json_extra_ids(vocab, lowest) if len(lowest) < len(vocab) else {}
            writers = {
                "vocab.json": lambda out: _write_text(out, _vocab_json_pieces(vocab, lowest)),
                "merges.txt": lambda out: _write_text(out, _merges_txt_pieces(merges)),
                "vocab.pkl": lambda out: pickle.dump(vocab, out),
                "merges.pkl": lambda out: pickle.dump(merges, out),
            }
            files = {name: _write_file(staging / name, write) for name, write in writers.items()}
            for name, info in files.items():
                info["entries"] = len(merges) if name.startswith("merges") else len(vocab)
            files["vocab.json"]["entries"] = len(lowest)
            for name, content in exports.items():
                files[name] = _write_file(staging / name, lambda out, content=content: out.write(content))
            run_id = uuid.uuid4().hex
            run = {
                "format": RUN_FORMAT,
                "format_version": RUN_FORMAT_VERSION,
                "run_id": run_id,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "vocab_size": len(vocab),
                "num_merges": len(merges),
                "special_tokens": list(special_tokens),
                # Only when needed, so that other runs' metadata stays as it was.
                **({VOCAB_JSON_EXTRA: json_extra} if json_extra else {}),
                **(details or {}),
                "files": files,
            }
            text = json.dumps(run, ensure_ascii=False, indent=2) + "\n"
            _write_file(staging / RUN_FILE, lambda out: out.write(text.encode("utf-8")))
            _fsync_directory(staging)
            with _signals_held():
                # The commit: one rename makes the staged set complete and known by its run id. A run
                # killed after it leaves a set that loading reads and the next run finishes moving in.
                committed = self.path / f"{COMMIT_PREFIX}{run_id}"
                os.rename(staging, committed)  # from here a failure leaves it for loading and the next run
                _fsync_directory(self.path)
                _move_into_place(self.path, committed, [RUN_FILE, *OUTPUT_FILES, *exports])
                if on_commit is not None:
                    on_commit()
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return {name: self.path / name for name in (*OUTPUT_FILES, *exports, RUN_FILE)}


def _move_into_place(directory: Path, committed: Path, names: list[str]) -> None:
    """Move the files of the set in `committed` into `directory`, those already moved skipped, and
    remove the exports the set lacks (the old set's: they no longer match it). The metadata moves
    first: from then on, a file of the old set still in place no longer matches it, and loading
    reads the new one from `committed` instead."""
    for name in names:
        if os.path.lexists(committed / name):
            os.replace(committed / name, directory / name)
    for name in export_file_names():
        if name not in names:
            (directory / name).unlink(missing_ok=True)
    _fsync_directory(directory)
    shutil.rmtree(committed, ignore_errors=True)


def _finish_commit(directory: Path, committed: Path) -> None:
    """Move in the rest of the set a killed run left in `committed` (its metadata there, or already
    in `directory` with the same run id); a directory that does not hold such a set is removed."""
    run_id = committed.name[len(COMMIT_PREFIX) :]
    names: list[str] | None = None
    for place in (committed, directory):
        with contextlib.suppress(BPEInputError, OSError):
            if not (place / RUN_FILE).is_symlink():
                run = read_run_info(place)
                if run is not None and run.get("run_id") == run_id:
                    known = (*OUTPUT_FILES, *export_file_names())
                    names = [RUN_FILE, *(name for name in run["files"] if name in known)]
                    break
    # Only regular files move in: a link put there would make the set point elsewhere.
    if names is not None and all(
        stat.S_ISREG(os.lstat(committed / name).st_mode) for name in names if os.path.lexists(committed / name)
    ):
        _move_into_place(directory, committed, names)
    else:
        shutil.rmtree(committed, ignore_errors=True)


def save_tokenizer(
    out_dir: str | os.PathLike,
    vocab: Vocab,
    merges: Merges,
    special_tokens: list[str] | None = None,
    *,
    details: dict[str, Any] | None = None,
    exports: dict[str, bytes] | None = None,
) -> dict[str, Path]:
    """Write vocab.json, merges.txt, vocab.pkl, merges.pkl and bpe_run.json (and `exports`, see
    `OutputDirectory.save`) into `out_dir` as one unit (see the module docstring); returns their paths."""
    with OutputDirectory(out_dir) as output:
        return output.save(vocab, merges, special_tokens, details=details, exports=exports)


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


# The most a vocabulary, merges or run file may hold: GPT-2's vocab.json is 1 MB, and a file of
# millions of tokens some tens of MB; anything larger is some other file (a corpus named by mistake)
# that parsing would turn into many times its size in memory. A file its bpe_run.json records (a run's
# own output, whose tokens may be huge: a run of one letter) may be as large as recorded.
MAX_TOKENIZER_FILE_BYTES = 256 << 20


def recorded_size(path: Path, run: dict[str, Any] | None) -> int:
    """The size `run` recorded for the file at `path` (0 when it records none)."""
    expected = run["files"].get(path.name) if run is not None else None
    size = expected.get("bytes") if isinstance(expected, dict) else None
    return size if _is_int(size) and size > 0 else 0


def large_tokens_note(vocab: Vocab) -> str | None:
    """A note for a vocabulary whose tokens are so long that its files pass half of
    MAX_TOKENIZER_FILE_BYTES each (every file holds every token's bytes at least once), or None."""
    total = sum(map(len, vocab.values()))
    if total <= MAX_TOKENIZER_FILE_BYTES // 2:
        return None
    longest = max(map(len, vocab.values()))
    return (
        f"note: the vocabulary's tokens total {total / 1e6:,.1f} MB, the longest {longest / 1e6:,.1f} MB (the "
        "text holds a pre-token that long, a run of one character?); each output file holds them all, and "
        f"one over {MAX_TOKENIZER_FILE_BYTES / 2**20:g} MiB loads only beside the bpe_run.json written with it"
    )


def _read_bytes(path: Path, allowed: int = 0) -> bytes:
    """The bytes of a regular file of at most MAX_TOKENIZER_FILE_BYTES (or `allowed`, a size its run
    recorded, when larger); anything else is refused before it is read (a FIFO would wait for a
    writer, /dev/zero never ends)."""
    try:
        # Not blocking: opening a FIFO for reading would wait for a writer before fstat could refuse it.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise BPEInputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise BPEInputError(f"{path} is a directory, not a file") from None
    except OSError as error:
        raise BPEInputError(f"cannot read {path}: {error.strerror or error}") from None
    limit = max(MAX_TOKENIZER_FILE_BYTES, allowed)
    too_large = (
        f"{path} is larger than a tokenizer file may be ({limit >> 20} MiB); is it the right file? (a larger "
        "one loads beside the bpe_run.json of the run that wrote it)"
    )
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise BPEInputError(f"{path} is a directory, not a file")
        if not stat.S_ISREG(status.st_mode):
            raise BPEInputError(f"{path} is not a regular file (a FIFO, device or socket); give a tokenizer file")
        if status.st_size > limit:
            raise BPEInputError(too_large)
        chunks, size, step = [], 0, max(status.st_size + 1, 1 << 16)  # one read unless the file grows
        while size <= limit and (chunk := os.read(descriptor, min(step, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise BPEInputError(f"cannot read {path}: {error.strerror or error}") from None
    finally:
        os.close(descriptor)
    if size > limit:
        raise BPEInputError(too_large)
    return b"".join(chunks)


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


def _parse_json(path: Path, data: bytes, object_pairs_hook: Any = None) -> Any:
    """JSON from a file, every failure one BPEInputError naming it: bad syntax, nesting too deep for
    the parser (RecursionError), an integer past Python's digit limit (ValueError)."""
    text = _decode_text(path, data)
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as error:
        raise BPEInputError(f"{path} is not valid JSON: {error}") from None
    except RecursionError:
        raise BPEInputError(f"{path} is not usable JSON: it is nested too deeply") from None
    except ValueError as error:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise BPEInputError(f"{path} is not usable JSON: {error}") from None


def _is_int(value: object) -> bool:
    return type(value) is int  # bool is an int subclass, and never a size or an id


def _run_problem(run: object) -> str | None:
    """What makes `run` unusable as bpe_run.json (the fields loading reads), or None."""
    if not isinstance(run, dict) or run.get("format") != RUN_FORMAT:
        return "it is not one"
    tokens = run.get("special_tokens")
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        return "special_tokens must be a list of strings"
    if "run_id" in run and not isinstance(run["run_id"], str):
        return "run_id must be a string"
    for name in ("vocab_size", "num_merges"):
        if name in run and not _is_int(run[name]):
            return f"{name} must be an integer, not {run[name]!r}"
    files = run.get("files")
    if not isinstance(files, dict):
        return "files must be an object"
    for name, info in files.items():
        if not isinstance(info, dict):
            return f"files.{name} must be an object"
        if not (_is_int(info.get("bytes")) and info["bytes"] >= 0 and isinstance(info.get("sha256"), str)):
            return f"files.{name} needs an integer size (bytes) and a sha256 string"
    extra = run.get(VOCAB_JSON_EXTRA, {})
    if not isinstance(extra, dict) or not all(
        isinstance(key, str) and key.isdigit() and len(key) <= 10 and isinstance(token, str)
        for key, token in extra.items()
    ):
        return f"{VOCAB_JSON_EXTRA} must map ids (decimal strings) to tokens"
    if "pattern" in run:
        pattern = run["pattern"]
        if not (isinstance(pattern, dict) and isinstance(pattern.get("regex"), str) and pattern["regex"]):
            return 'pattern must be an object with its "regex" (a non-empty string)'
        if not isinstance(pattern.get("name"), (str, type(None))):
            return "pattern.name must be a string or null"
        try:
            pattern_from_regex(pattern["regex"])
            check_unicode(pattern.get("unicode"))
        except BPEInputError as error:
            return str(error)
    for name in ("tie_break", "layout"):
        if name in run and not isinstance(run[name], str):
            return f"{name} must be a string, not {run[name]!r}"
    try:
        MergeLimits(
            run.get("min_frequency"),
            run.get("max_token_length"),
            run.get("max_words"),
            run.get("no_colon_space", NO_LIMITS.no_colon_space),
        )
    except BPEInputError as error:
        return str(error)
    return None


def run_pattern(run: dict[str, Any] | None) -> Pattern:
    """The pattern a run trained with (read_run_info's metadata, `recorded_rules`): its recorded regex,
    which is a named pattern when it is that pattern's text, with the Unicode version it records (a
    file older than that: None, the installed `regex`'s)."""
    recorded = recorded_rules(run or {})["pattern"]
    return replace(pattern_from_regex(recorded["regex"]), unicode=recorded.get("unicode"))


def run_layout(run: dict[str, Any] | None) -> str:
    """How the run's vocabulary numbers its tokens (`vocab_layout.assemble_vocab`; `recorded_rules`)."""
    return recorded_rules(run or {})["layout"]


def read_run_info(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The run metadata (`bpe_run.json`) in `directory`, or None when there is none."""
    path = Path(directory) / RUN_FILE
    if not path.exists():
        return None
    run = _parse_json(path, _read_bytes(path))
    problem = _run_problem(run)
    if problem is not None:
        raise BPEInputError(f"{path} is not a usable {RUN_FORMAT} metadata file: {problem}")
    return run


def _matches_run(path: Path, data: bytes, run: dict[str, Any]) -> bool:
    expected = run["files"].get(path.name)
    if not isinstance(expected, dict):
        return True  # a file the run did not write under this name: nothing to compare with
    return len(data) == expected.get("bytes") and hashlib.sha256(data).hexdigest() == expected.get("sha256")


def _committed_copy(path: Path, run: dict[str, Any]) -> Path | None:
    """`path`'s file in the commit directory of `run` (see COMMIT_PREFIX), when one is there."""
    run_id = run.get("run_id")
    if not (isinstance(run_id, str) and run_id.isascii() and run_id.isalnum()):
        return None  # not an id this module wrote: never a path out of the directory
    committed = path.parent / f"{COMMIT_PREFIX}{run_id}"
    copy = committed / path.name
    with contextlib.suppress(OSError):
        if not committed.is_symlink() and stat.S_ISREG(os.lstat(copy).st_mode):
            return copy
    return None


def _read_for_run(path: Path, run: dict[str, Any] | None) -> bytes:
    """`path`'s bytes, checked against `run` when given. A file that does not match (or is missing)
    while the run's set is still being moved into place, or was left half moved by a killed run, is
    read from the run's commit directory; if the live run moved it meanwhile, from `path` again."""
    if run is None:
        return _read_bytes(path)
    allowed = recorded_size(path, run)  # the run's own file loads at any size it wrote
    first: bytes | None = None
    with contextlib.suppress(BPEInputError):
        first = _read_bytes(path, allowed)
        if _matches_run(path, first, run):
            return first
    copy = _committed_copy(path, run)
    if copy is not None:
        with contextlib.suppress(BPEInputError):
            data = _read_bytes(copy, allowed)
            if _matches_run(path, data, run):
                return data
        first = None
    data = _read_bytes(path, allowed) if first is None else first  # raises what is wrong with it
    _check_against_run(path, data, run)
    return data


def _check_against_run(path: Path, data: bytes, run: dict[str, Any] | None) -> None:
    if run is None or _matches_run(path, data, run):
        return
    expected = run["files"][path.name]
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
    data = _read_for_run(path, run)
    if path.suffix == ".pkl":
        return _check_vocab(path, _unpickle(path, data))
    entries = _parse_json(path, data, object_pairs_hook=_pairs)
    if not isinstance(entries, _Pairs):
        raise BPEInputError(f"{path} must hold a JSON object of token -> id, not a {type(entries).__name__}")
    vocab: Vocab = {}
    seen: set[str] = set()
    for token, token_id in entries:
        # json.loads would keep the last of two equal keys: a repeated token is a damaged file.
        if token in seen:
            raise BPEInputError(f"{path}: the token {token!r} is listed twice")
        seen.add(token)
        _add_entry(path, vocab, token, token_id)
    extra = (run or {}).get(VOCAB_JSON_EXTRA) or {}
    for id_text, token in extra.items():
        # Ids vocab.json cannot hold (a one-byte special token beside its byte): the run lists them.
        _add_entry(path.parent / RUN_FILE, vocab, token, int(id_text))
    return vocab


class _Pairs(list):
    """A JSON object as its (key, value) pairs, repeated keys kept (load_vocab refuses them)."""


def _pairs(pairs: list[tuple[str, Any]]) -> _Pairs:
    return _Pairs(pairs)


def _add_entry(path: Path, vocab: Vocab, token: str, token_id: object) -> None:
    if not _is_int(token_id):
        raise BPEInputError(f"{path}: the id of {token!r} must be an integer, got {token_id!r}")
    if token_id in vocab:
        raise BPEInputError(f"{path}: id {token_id} is given to two tokens ({vocab[token_id]!r} and {token!r})")
    vocab[token_id] = decode_token(token, path)


def load_merges(path: str | os.PathLike, *, run: dict[str, Any] | None = None) -> Merges:
    """Merges from `merges.pkl` or GPT-2 `merges.txt` (an optional `#version` header line);
    checked against `run` (read_run_info) when given."""
    path = Path(path)
    data = _read_for_run(path, run)
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
