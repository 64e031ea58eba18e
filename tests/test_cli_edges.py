"""The command line where a newcomer meets it first: no data given, a missing file, `| head`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_basics.cli import main as cli_main
from tests.support import REPO_ROOT


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("low lower lowest newer newest wider widest\n" * 50, encoding="utf-8")
    return path


def test_no_data_and_no_demo_says_how_to_give_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli_main(["bpe_v2", str(tmp_path / "out")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "-d PATH" in err and "--demo" in err
    assert not (tmp_path / "out").exists()


def test_missing_data_names_the_file_and_how_to_pass_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main(["bpe_v2", "out", "-d", "data/owt_train.txt", "-q"]) == 2
    err = capsys.readouterr().err
    assert "data/owt_train.txt does not exist" in err
    assert f"(looked in {tmp_path})" in err  # relative paths are resolved against the working directory
    assert " -d " in err and "--demo" in err
    assert "wget" not in err  # no download instructions for a file the user may not have meant


def test_output_into_a_closed_pipe_is_not_a_traceback(corpus: Path, tmp_path: Path) -> None:
    """`cs336-train-bpe ... | head`: the reader is gone before the summary is printed."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the CLI starts, so every write fails, whatever the timing
    try:
        result = subprocess.run(
            [sys.executable, "-m", "cs336_basics.cli", "bpe_v2", str(tmp_path / "out"), "-d", str(corpus), "-v", "270"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
    assert result.returncode == 0
    assert (tmp_path / "out" / "merges.txt").is_file()
