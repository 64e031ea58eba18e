"""Saving and loading a trained vocabulary and merge list.

Two formats: pickles of the Python objects (`vocab.pkl`, `merges.pkl`), and GPT-2's `vocab.json`
(token -> id) + `merges.txt` (one merge per line), where every byte is shown as a printable
character by GPT-2's byte-to-unicode table. Files are written to a temporary name and renamed, so an
interrupted run never leaves a half-written output.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from functools import cache
from pathlib import Path

from ._common import BPEInputError, Merges, Vocab


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


def encode_token(token: bytes) -> str:
    table = gpt2_bytes_to_unicode()
    return "".join(table[byte] for byte in token)


def decode_token(text: str, source: str | Path = "<input>") -> bytes:
    table = gpt2_unicode_to_bytes()
    try:
        return bytes(table[char] for char in text)
    except KeyError:
        raise BPEInputError(f"{source}: {text!r} is not in GPT-2's byte-to-unicode encoding") from None


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


def save_tokenizer(out_dir: str | os.PathLike, vocab: Vocab, merges: Merges) -> dict[str, Path]:
    """Write vocab.pkl, merges.pkl, vocab.json and merges.txt into `out_dir`; return their paths."""
    directory = check_output_dir(out_dir)
    paths = {
        "vocab.pkl": directory / "vocab.pkl",
        "merges.pkl": directory / "merges.pkl",
        "vocab.json": directory / "vocab.json",
        "merges.txt": directory / "merges.txt",
    }
    write_atomically(paths["vocab.pkl"], pickle.dumps(vocab))
    write_atomically(paths["merges.pkl"], pickle.dumps(merges))
    # Token strings can repeat (a merge may spell a special token); json keeps the last id for it.
    vocab_json = {encode_token(token): token_id for token_id, token in vocab.items()}
    write_atomically(paths["vocab.json"], json.dumps(vocab_json, ensure_ascii=False, indent=0).encode("utf-8"))
    lines = "".join(f"{encode_token(left)} {encode_token(right)}\n" for left, right in merges)
    write_atomically(paths["merges.txt"], lines.encode("utf-8"))
    return paths


def load_vocab(path: str | os.PathLike) -> Vocab:
    """A vocabulary from `vocab.pkl` (id -> bytes) or GPT-2 `vocab.json` (token string -> id)."""
    path = Path(path)
    if path.suffix == ".pkl":
        with path.open("rb") as file:
            return pickle.load(file)
    with path.open(encoding="utf-8") as file:
        entries = json.load(file)
    return {int(token_id): decode_token(token, path) for token, token_id in entries.items()}


def load_merges(path: str | os.PathLike) -> Merges:
    """Merges from `merges.pkl` or GPT-2 `merges.txt` (an optional `#version` header line)."""
    path = Path(path)
    if path.suffix == ".pkl":
        with path.open("rb") as file:
            return pickle.load(file)
    merges: Merges = []
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            line = line.rstrip("\n")
            if not line or (number == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise BPEInputError(f"{path}:{number}: expected two tokens separated by one space, got {line!r}")
            merges.append((decode_token(parts[0], path), decode_token(parts[1], path)))
    return merges
