"""`cs336-encode-dataset` (cs336_basics/commands/encode_cli.py): a training output directory as the tokenizer,
the run's special tokens, and the array's dtype (uint16 while every id fits, else uint32). Its refusals
and signals are in test_faults_hostile_use, the script shim and numpy-free writing in test_bpe_tokenizer."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_basics.commands.encode_cli import main
from cs336_basics.outputs.serialization import save_tokenizer
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.tokenizer import Tokenizer, native_available
from tests.support import REPO_ROOT

numpy = pytest.importorskip("numpy", reason="reading the .npy back needs numpy (the test extra)")

PAD = "<|pad|>"
TEXT = f"ab abc{ENDOFTEXT}cab a b{PAD}ab{ENDOFTEXT}\n" * 50
BACKENDS = ["--pure", *(["--threads=2"] if native_available() else [])]


def byte_vocab() -> dict[int, bytes]:
    return {byte: bytes([byte]) for byte in range(256)}


def write_set(out: Path, merged_id: int, special_tokens: list[str]) -> Tokenizer:
    """A run's output set with the specials at 256, 257, ... and one merge, "ab", at `merged_id`."""
    vocab = byte_vocab() | {256 + index: token.encode() for index, token in enumerate(special_tokens)}
    vocab[merged_id] = b"ab"
    merges = [(b"a", b"b")]
    save_tokenizer(out, vocab, merges, special_tokens)
    return Tokenizer(vocab, merges, special_tokens, native=False)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("merged_id", "dtype"), [(258, numpy.uint16), (65_535, numpy.uint16), (65_536, numpy.uint32)])
def test_dtype_is_the_smallest_that_holds_every_id(tmp_path, data, backend, merged_id, dtype, capsys) -> None:
    expected = write_set(tmp_path / "run", merged_id, [ENDOFTEXT, PAD]).encode(TEXT)
    assert merged_id in expected
    out = tmp_path / "ids.npy"
    assert main([str(data), str(out), "--tokenizer", str(tmp_path / "run"), "-q", backend]) == 0
    ids = numpy.load(out)
    assert ids.dtype == dtype
    assert ids.tolist() == expected
    assert f"({numpy.dtype(dtype).name})" in capsys.readouterr().out


def test_the_run_special_tokens_are_the_default(tmp_path: Path, data: Path, capsys) -> None:
    run = tmp_path / "run"
    write_set(run, 258, [ENDOFTEXT, PAD])
    out = tmp_path / "ids.npy"
    assert main([str(data), str(out), "--vocab", str(run / "vocab.json"), "--merges", str(run / "merges.txt")]) == 0
    assert f"special tokens: {ENDOFTEXT}, {PAD}" in capsys.readouterr().err
    ids = numpy.load(out)
    assert (ids == 256).sum() == TEXT.count(ENDOFTEXT) and (ids == 257).sum() == TEXT.count(PAD)

    # --tokenizer reads the same files, the run's special tokens included.
    assert main([str(data), str(tmp_path / "same.npy"), "--tokenizer", str(run), "-q"]) == 0
    assert numpy.load(tmp_path / "same.npy").tolist() == ids.tolist()

    assert main([str(data), str(out), "--tokenizer", str(run), "-q", "--special-token", PAD]) == 0
    ids = numpy.load(out)
    assert (ids == 256).sum() == 0 and (ids == 257).sum() == TEXT.count(PAD)
    assert main([str(data), str(out), "--tokenizer", str(run), "-q", "--no-special-tokens"]) == 0
    assert not {256, 257} & set(numpy.load(out).tolist())


def test_tokenizer_directory_falls_back_to_the_pickles(tmp_path: Path, data: Path) -> None:
    run = tmp_path / "run"
    expected = write_set(run, 258, [ENDOFTEXT]).encode(TEXT)
    (run / "vocab.json").unlink()
    (run / "merges.txt").unlink()
    assert main([str(data), str(tmp_path / "ids.npy"), "--tokenizer", str(run), "-q"]) == 0
    assert numpy.load(tmp_path / "ids.npy").tolist() == expected


def test_tokenizer_directory_refusals(tmp_path: Path, data: Path, capsys) -> None:
    out = str(tmp_path / "ids.npy")
    assert main([str(data), out, "--tokenizer", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(data), out, "--tokenizer", str(tmp_path / "empty")]) == 2
    assert "no vocab.json and merges.txt or vocab.pkl and merges.pkl" in capsys.readouterr().err
    run = tmp_path / "run"
    write_set(run, 258, [ENDOFTEXT])
    (run / "merges.txt").unlink()
    assert main([str(data), out, "--tokenizer", str(run)]) == 2
    assert "merges.txt" in capsys.readouterr().err
    assert not Path(out).exists()


@pytest.mark.parametrize(
    "options",
    [[], ["--vocab", "v.json"], ["--tokenizer", "run", "--merges", "m.txt"], ["--tokenizer", "run", "--threads", "0"]],
)
def test_bad_options_are_usage_errors(tmp_path: Path, data: Path, options: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([str(data), str(tmp_path / "ids.npy"), *options])
    assert exit_info.value.code == 2
    assert "cs336-encode-dataset: error:" in capsys.readouterr().err


@pytest.mark.parametrize("package", ["cs336_basics", "cs336_bpe"])
def test_runs_as_a_module(tmp_path: Path, data: Path, package: str) -> None:
    """`python -m cs336_bpe.commands.encode_cli` where the package is installed, as cs336_basics in a checkout."""
    environment = dict(os.environ)
    if package == "cs336_basics":
        environment["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    elif importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (pip install -e .)")
    expected = write_set(tmp_path / "run", 258, [ENDOFTEXT]).encode(TEXT)
    out = tmp_path / "ids.npy"
    result = subprocess.run(
        [sys.executable, "-m", f"{package}.encode_cli", str(data), str(out), "--tokenizer", str(tmp_path / "run")],
        capture_output=True, text=True, env=environment, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "bytes/token" in result.stdout and f"special tokens: {ENDOFTEXT}" in result.stderr
    assert "B/s" in result.stderr, "the progress bar counts input bytes"
    assert numpy.load(out).tolist() == expected


def gpt2_like_files(directory: Path) -> tuple[Path, Path]:
    """GPT-2's shape of files: <|endoftext|> an ordinary entry of vocab.json, and no bpe_run.json."""
    vocab = byte_vocab() | {256: b"ab", 257: ENDOFTEXT.encode()}
    save_tokenizer(directory, vocab, [(b"a", b"b")], [])
    (directory / "bpe_run.json").unlink()
    return directory / "vocab.json", directory / "merges.txt"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_undeclared_endoftext_in_the_text_is_noted_with_the_flag_to_pass(
    tmp_path: Path, data: Path, backend: str, capsys
) -> None:
    vocab, merges = gpt2_like_files(tmp_path)
    out = tmp_path / "ids.npy"
    assert main([str(data), str(out), "--vocab", str(vocab), "--merges", str(merges), "-q", backend]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"'{ENDOFTEXT}' (13 ids) occurs in the text but is not a special token here" in err
    assert f"pass --special-token '{ENDOFTEXT}'" in err
    declared = ["--special-token", ENDOFTEXT]
    assert main([str(data), str(out), "--vocab", str(vocab), "--merges", str(merges), "-q", *declared]) == 0
    assert main([str(data), str(out), "--vocab", str(vocab), "--merges", str(merges), "-q", "--no-special-tokens"]) == 0
    plain = tmp_path / "plain.txt"  # no note where no token of that form occurs
    plain.write_text("ab abc <| not one |> <|endof text|> cab\n" * 20, encoding="utf-8")
    assert main([str(plain), str(out), "--vocab", str(vocab), "--merges", str(merges), "-q"]) == 0
    assert capsys.readouterr().err == ""
