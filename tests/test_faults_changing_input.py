"""A file that changes while it is read: the run ends with "FILE changed while it was read" (an
OSError; the CLI prints one line and exits 1) instead of dying of SIGBUS when the file shrinks under
a memory-mapped read. The file is cut from inside the progress callback, at a known point of the
read, so nothing depends on timing; each case runs in a child process, since without the guard the
process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_basics.tokenizer import native_available
from cs336_basics.trainers import trainer_status
from tests.support import REPO_ROOT

CHILD = """\
import os, sys
from cs336_basics.native import _count_cpp
from cs336_basics.tokenizer import Tokenizer
path, what = sys.argv[1], sys.argv[2]

def shrink(_):
    if os.path.getsize(path) > 5000:
        os.truncate(path, 5000)  # the pages past here are gone from the mapping

try:
    if what == "count":
        _count_cpp.count_words(path, ["<|endoftext|>"], 1, 1 << 16, shrink)
    else:
        tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], native=True)
        tokenizer._native.encode_file(path, 1, 1 << 16, 4, -1, shrink)
except OSError as error:
    print(f"OSError: {error}")
    sys.exit(1)
print("no error")
"""


def run_child(path: Path, what: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(path), what], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def write_text(path: Path) -> Path:
    path.write_text("hello world, once upon a time " * 300_000, encoding="utf-8")  # 9 MB, many 64 KiB chunks
    return path


@pytest.mark.parametrize("what", ["count", "encode"])
def test_a_file_that_shrinks_while_it_is_read_is_an_error_not_a_crash(tmp_path: Path, what: str) -> None:
    needed = trainer_status()["bpe_v7"].available if what == "count" else native_available()
    if not needed:
        pytest.skip("the compiled extensions are not built")
    path = write_text(tmp_path / "growing.txt")
    result = run_child(path, what)
    assert result.returncode != -signal.SIGBUS, "killed by SIGBUS"
    assert (result.returncode, result.stdout.strip()) == (1, f"OSError: {path} changed while it was read")


def test_a_file_that_stays_put_reads_as_before(tmp_path: Path) -> None:
    if not trainer_status()["bpe_v7"].available:
        pytest.skip("the compiled extensions are not built")
    from cs336_basics.native import _count_cpp

    path = write_text(tmp_path / "still.txt")
    assert _count_cpp.count_words(str(path), [], 1, 1 << 16).to_dict()[b" world"] == 300_000


def test_the_cli_says_so_in_one_line(tmp_path: Path) -> None:
    if not trainer_status()["bpe_v7"].available:
        pytest.skip("the compiled extensions are not built")
    path = write_text(tmp_path / "data.txt")
    # The CLI's progress bar calls back into Python while counting; cut the file from there.
    code = (
        "import os, sys, tqdm\n"
        "from cs336_basics.commands.cli import main\n"
        "real = tqdm.tqdm.update\n"
        "def update(self, n=1):\n"
        "    if self.desc == 'pre-tokenize' and os.path.getsize(sys.argv[1]) > 5000:\n"
        "        os.truncate(sys.argv[1], 5000)\n"
        "    return real(self, n)\n"
        "tqdm.tqdm.update = update\n"
        "sys.exit(main(['bpe_v7', sys.argv[2], '-d', sys.argv[1], '-v', '300', '--workers', '1']))\n"
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-c", code, str(path), str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"error: {path} changed while it was read"
    assert not out.exists()


def test_the_python_counters_read_instead_of_mapping_and_notice_a_short_read(tmp_path: Path) -> None:
    # bpe_v3's workers and the pure-Python task counter read their bytes (no mapping to fault on);
    # a file that shrank since its chunks were planned is a one-line error, not a count of less text.
    from cs336_basics import BPEInputError, bpe_v3
    from cs336_basics.ingest.counting import Segment, count_task
    from cs336_basics.rules.pattern import resolve_pattern

    path = write_text(tmp_path / "shrinking.txt")
    size = path.stat().st_size
    os.truncate(path, size // 2)
    with pytest.raises(BPEInputError, match="changed while it was read"):
        bpe_v3._count_chunk(str(path), 0, size, ["<|endoftext|>"], resolve_pattern(None))
    with pytest.raises(BPEInputError, match="changed while it was read"):
        count_task((Segment(str(path), 0, size),), ["<|endoftext|>"])
