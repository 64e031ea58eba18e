"""Issue 40, items 8, 11 and parts of 10, and the commands the first sweep did not reach (--export,
cs336-swap-in, cs336-bpe-report): every hostile input ends in one line naming what was expected, or in
a correct result; never a traceback, a hang, memory without end, or a student's file clobbered.

Nothing here waits on a timer: the threads a merge loop runs on are read from the calls themselves
(a spy on bpe_v7's merge), and where the code before the fix would read a FIFO or /dev/zero for ever,
the call runs in a child whose time and address-space limits only keep such a regression finite."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cs336_basics import WordCounts, count_words
from cs336_basics.contract import ENDOFTEXT
from cs336_basics.count_cli import main as count_main
from tests.support import REPO_ROOT

CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
DOCUMENT = "the cat sat on the mat, the dog sat on the log; 12 cats and 345 dogs.\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text((DOCUMENT + ENDOFTEXT) * 40 + "hello there, hello world\n" * 30, encoding="utf-8")
    return path


def one_error_line(captured: pytest.CaptureResult[str], *expected: str) -> str:
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    for part in expected:
        assert part in lines[0], lines[0]
    return lines[0]


def run_child(code: str, *args: str, memory_mb: int = 2048) -> subprocess.CompletedProcess[str]:
    """`code` in a child whose limits only bound a regression (reading /dev/zero, waiting on a FIFO):
    the fixed code answers at once."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=CHILD_ENV,
        cwd=REPO_ROOT,
        preexec_fn=limits,
        timeout=120,
    )


# ---------------------------------------------------------------------------------------------
# Item 8: --task-mb within what --help says


@pytest.mark.parametrize("task_mb", ["0", "99999", "-3", "4097"])
def test_task_mb_outside_1_to_4096_is_refused_naming_it(corpus: Path, tmp_path: Path, capsys, task_mb: str) -> None:
    out = tmp_path / "counts.bin"
    assert count_main([str(corpus), "-o", str(out), "-q", "--task-mb", task_mb]) == 2
    one_error_line(capsys.readouterr(), "--task-mb must be from 1 to 4096", f"got {task_mb}")
    assert not out.exists()


@pytest.mark.parametrize("task_mb", ["1", "4096"])
def test_task_mb_within_range_counts_as_the_default(corpus: Path, tmp_path: Path, task_mb: str) -> None:
    out = tmp_path / "counts.bin"
    assert count_main([str(corpus), "-o", str(out), "-q", "--task-mb", task_mb]) == 0
    assert WordCounts.load(out) == count_words([corpus], [ENDOFTEXT])
