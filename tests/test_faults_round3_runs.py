"""Hardening, third round (issue 40): runs, interrupts, the output directory and Dask. A signal at
the very end never reports "interrupted" over a set already in place; Ctrl-C on a local cluster is
one line and leaves no worker behind; an empty output path is refused; bad input on Dask is refused
at once as it is locally; two runs started together never mix their sets; `kill -9` inside the final
moves leaves a set that loads. (The test_faults_* files are one family; see test_faults_hostile_use.)

Signals are sent only after the child has said, through a pipe, that it reached the point, or from
a patched function at that point; no test depends on timing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cs336_basics import Tokenizer
from cs336_basics.cli import main as cli_main
from cs336_basics.count_cli import main as count_main
from cs336_basics.encode_cli import main as encode_main
from cs336_basics.serialization import read_run_info, save_tokenizer
from tests.support import REPO_ROOT

CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
OUTPUTS = ["bpe_run.json", "merges.pkl", "merges.txt", "vocab.json", "vocab.pkl"]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("hello world, hello there<|endoftext|>the cat's hat 12 345\n" * 20, encoding="utf-8")
    return path


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


def loaded_sets(out: Path) -> list[tuple[dict[int, bytes], list[tuple[bytes, bytes]]]]:
    """The set in `out` as each pair of files loads it, checked against its bpe_run.json."""
    run = read_run_info(out)
    assert run is not None
    sets = []
    for vocab_name, merges_name in (("vocab.json", "merges.txt"), ("vocab.pkl", "merges.pkl")):
        tokenizer = Tokenizer.from_files(out / vocab_name, out / merges_name)
        assert (len(tokenizer.vocab), len(tokenizer.merges)) == (run["vocab_size"], run["num_merges"])
        sets.append((tokenizer.vocab, tokenizer.merges))
    assert sets[0] == sets[1]
    return sets


# ---------------------------------------------------------------------------------------------
# Item 6: an empty output path is refused, never the current directory


@pytest.mark.parametrize("command", ["train", "count", "encode"])
def test_an_empty_output_path_is_refused(corpus: Path, tmp_path: Path, monkeypatch, capsys, command: str) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    argv = {
        "train": (cli_main, ["bpe_v1", "", "-d", str(corpus), "-q", "-v", "260"], "out_dir"),
        "count": (count_main, [str(corpus), "-o", "", "-q"], "-o/--output"),
        "encode": (encode_main, [str(corpus), "", "--tokenizer", str(tmp_path), "-q"], "out"),
    }
    main, arguments, name = argv[command]
    with pytest.raises(SystemExit) as stopped:
        main(arguments)
    assert stopped.value.code == 2
    assert f"error: argument {name}: expected a path, got an empty one" in capsys.readouterr().err
    assert list(here.iterdir()) == []


def test_an_empty_output_directory_is_refused_by_the_api(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    from cs336_basics import BPEInputError

    with pytest.raises(BPEInputError, match="empty"):
        save_tokenizer("", {i: bytes([i]) for i in range(256)}, [])
    assert not (tmp_path / "vocab.json").exists()
