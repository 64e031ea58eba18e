"""Bad input gets a clear error naming the problem, before any long work, and nothing half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cs336_basics import BPEInputError, train_bpe
from cs336_basics.commands.cli import main as cli_main


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("hello world<|endoftext|>hello there", encoding="utf-8")
    return path


def test_missing_file(trainer: str, tmp_path: Path) -> None:
    with pytest.raises(BPEInputError, match="not found"):
        train_bpe(tmp_path / "nope.txt", 300, [], trainer=trainer)


def test_directory(trainer: str, tmp_path: Path) -> None:
    with pytest.raises(BPEInputError, match="directory"):
        train_bpe(tmp_path, 300, [], trainer=trainer)


def test_empty_file(trainer: str, tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with pytest.raises(BPEInputError, match="empty"):
        train_bpe(path, 300, [], trainer=trainer)


@pytest.mark.parametrize("offset", [0, 5, 4095, 70_001])
def test_invalid_utf8_names_the_byte_offset(trainer: str, tmp_path: Path, offset: int) -> None:
    data = bytearray(b"some words and more words\n" * 3000)
    data[offset] = 0xFF
    path = tmp_path / "bad.txt"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"invalid UTF-8 at byte offset {offset}\\b"):
        train_bpe(path, 300, [], trainer=trainer, num_workers=2, num_chunks=8)


def test_truncated_multibyte_character_at_the_end(trainer: str, tmp_path: Path) -> None:
    path = tmp_path / "cut.txt"
    path.write_bytes("héllo wörld ".encode() * 10 + "é".encode()[:1])
    with pytest.raises(ValueError, match=f"invalid UTF-8 at byte offset {path.stat().st_size - 1}\\b"):
        train_bpe(path, 300, [], trainer=trainer)


@pytest.mark.parametrize(
    ("vocab_size", "special_tokens", "message"),
    [
        (255, [], "too small"),
        (256, ["<|endoftext|>"], "too small"),
        (300.0, [], "must be an integer"),
        ("300", [], "must be an integer"),
        (True, [], "must be an integer"),
        (300, [""], "must not be empty"),
        (300, ["<s>", "<s>"], "distinct"),
        (300, [7], "must be strings"),
    ],
)
def test_bad_arguments(corpus: Path, vocab_size: object, special_tokens: list, message: str) -> None:
    with pytest.raises(BPEInputError, match=message):
        train_bpe(corpus, vocab_size, special_tokens, trainer="bpe_v1")  # type: ignore[arg-type]


def test_smallest_vocab_is_allowed(trainer: str, corpus: Path) -> None:
    vocab, merges = train_bpe(corpus, 257, ["<|endoftext|>"], trainer=trainer)
    assert merges == [] and len(vocab) == 257


def test_cli_refuses_unwritable_output_before_training(corpus: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert cli_main(["bpe_v1", str(blocker / "out"), "-d", str(corpus), "-q"]) == 2
    assert "cannot write to output directory" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only directories")
def test_cli_refuses_read_only_output(corpus: Path, tmp_path: Path, capsys) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert cli_main(["bpe_v1", str(locked), "-d", str(corpus), "-q"]) == 2
    finally:
        locked.chmod(0o700)
    assert "cannot write to output directory" in capsys.readouterr().err


def test_cli_missing_data_explains_what_to_do(tmp_path: Path, capsys) -> None:
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(tmp_path / "owt_train.txt"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "--demo" in err


def test_cli_writes_every_output_and_no_temporary_file(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "270", "-q"]) == 0
    names = sorted(path.name for path in out.iterdir())
    assert names == ["bpe_run.json", "merges.pkl", "merges.txt", "vocab.json", "vocab.pkl"]
    assert "stopped early" not in capsys.readouterr().out
