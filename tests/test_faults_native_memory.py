"""Native code that runs out of memory fails cleanly: the first failure in a parallel region stops
the other threads from starting new work, and Python sees MemoryError (not a crash)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cs336_basics.commands.demo import write_demo_corpus
from cs336_basics.native import backend
from tests.support import REPO_ROOT

if backend.pure_python_forced() or not backend.native_available("_count_cpp"):
    pytest.skip("the native word counter is not loaded", allow_module_level=True)
if sys.platform != "linux":
    pytest.skip("the address-space cap is set through Linux's RLIMIT_AS and /proc", allow_module_level=True)

# Runs in a child process: creates the thread team first (so thread stacks are not what fails), then
# caps the address space at what the process holds, plus the file's mapping, plus `headroom`, and
# counts a file whose word tables need far more. The tables outgrow the cap in the first third of
# the file, so every thread still has many small chunks to go when one fails.
CHILD = textwrap.dedent(
    """
    import resource, sys
    from cs336_basics.native import backend

    native = backend.load_native("_count_cpp")
    path, threads, headroom = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    native.count_words_in_buffer(b"warm up every thread of the team " * 20_000, [], threads, 1 << 12)
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    with open(path, "rb") as file:
        size += file.seek(0, 2)
    resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))
    try:
        native.count_words(path, [], threads, 1 << 16)
    except MemoryError:
        print("MemoryError")
        sys.exit(0)
    print("counted without running out of memory")
    sys.exit(1)
    """
)


def letters(number: int) -> str:
    """A distinct word of letters for each number (digits would be pre-tokens of their own)."""
    word = ""
    for _ in range(5):
        number, digit = divmod(number, 26)
        word += chr(ord("a") + digit)
    return word


@pytest.fixture(scope="module")
def many_distinct_words(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 million distinct words (word tables of hundreds of MB), then the same words twice more."""
    path = tmp_path_factory.mktemp("oom") / "distinct.txt"
    with path.open("w") as file:
        for _ in range(3):
            for start in range(0, 3_000_000, 100_000):
                file.write(" ".join(letters(number) for number in range(start, start + 100_000)))
                file.write("\n")
    return path


@pytest.mark.parametrize("threads", [1, 2, 8])  # eight: the threads share a table of words too
def test_counting_out_of_memory_raises_memory_error(many_distinct_words: Path, threads: int) -> None:
    if threads > 1 and not backend.openmp_enabled():
        pytest.skip("built without OpenMP: counting runs on one thread")
    if threads > 2 and os.environ.get("PYTEST_XDIST_WORKER"):
        # Once in a run of the whole tier on two busy workers, a thread aborted in glibc ("cannot
        # allocate memory for thread-local data") instead of raising; not seen in one process.
        pytest.skip("eight threads under a memory cap run in one process (python -m pytest without -n); CI does")
    environment = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": str(threads)}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(many_distinct_words), str(threads), str(32 << 20)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert (result.returncode, result.stdout.strip()) == (0, "MemoryError"), result.stderr[-2000:]


def test_an_interrupt_stops_the_counting(tmp_path: Path) -> None:
    """What the progress callable raises (Ctrl-C arrives there) stops the C++ before the next chunk:
    an invalid byte in the last chunk is never reached, so the interrupt, not a ValueError, comes
    back (one thread: the chunks are counted in order)."""
    native = backend.load_native("_count_cpp")
    path = tmp_path / "interrupted.txt"
    path.write_bytes(b"some words here\n" * 50_000 + b"\xff")

    def interrupt(done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        native.count_words(path, [], 1, 1 << 14, interrupt)
    with pytest.raises(ValueError, match="invalid UTF-8"):
        native.count_words(path, [], 1, 1 << 14)


def test_a_team_that_would_not_fit_an_address_space_limit_runs_smaller(tmp_path: Path) -> None:
    # OpenMP ends the process when it cannot start a thread ("Thread creation failed"); under
    # `ulimit -v` the CLI runs fewer threads, says so, and trains as usual.
    from cs336_basics.trainers import trainer_status

    if not trainer_status()["bpe_v7"].available:
        pytest.skip("bpe_v7 is not built")
    corpus = write_demo_corpus(tmp_path / "demo.txt", size_bytes=400_000)
    code = (
        "import resource, sys\n"
        "from cs336_basics.native.backend import _address_space_bytes\n"
        "limit = _address_space_bytes() + (60 << 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "from cs336_basics.commands.cli import main\n"
        "sys.exit(main(['bpe_v7', sys.argv[1], '-d', sys.argv[2], '-v', '300', '-q', '--workers', '8']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out"), str(corpus)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "the address-space limit has room for no more" in result.stderr
    assert (tmp_path / "out" / "merges.txt").is_file()
