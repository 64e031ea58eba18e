"""The tools besides training at their faults: --export, cs336-swap-in, cs336-bpe-report, --workers and
--task-mb, encode_file_to (issue 40, items 8, 11 and parts of 10, and the commands the first sweep
did not reach): every hostile input ends in one line naming what was expected, or in a correct
result; never a traceback, a hang, memory without end, or a student's file clobbered.

Nothing here waits on a timer: the threads a merge loop runs on are read from the calls themselves
(a spy on bpe_v7's merge), and where the code before the fix would read a FIFO or /dev/zero for ever,
the call runs in a child whose time and address-space limits only keep such a regression finite."""

from __future__ import annotations

import gzip
import io
import os
import resource
import subprocess
import sys
import textwrap
import types
from array import array
from pathlib import Path

import pytest

import cs336_basics.outputs.serialization as serialization
from cs336_basics import BPEInputError, Tokenizer, WordCounts, count_words
from cs336_basics.commands import report as report_module
from cs336_basics.commands import swap_in
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.native.backend import usable_cores
from cs336_basics.outputs.serialization import EXPORT_FILES, OUTPUT_FILES, RUN_FILE
from cs336_basics.rules.contract import ENDOFTEXT
from cs336_basics.trainers import (
    train_bpe,
    train_bpe_from_counts,
    train_bpe_from_iterator,
    trainer_status,
)
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


# ---------------------------------------------------------------------------------------------
# Item 11: --workers / num_workers reach bpe_v7's merge loop on every path

needs_v7 = pytest.mark.skipif(not trainer_status()["bpe_v7"].available, reason="bpe_v7 is not built here")


class MergeThreads:
    """The threads each bpe_v7 merge loop ran on: the `num_threads` given to `_merge_cpp.merge` (a
    dict), or for a native table its own threads capped by the `num_threads` its merge was given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from cs336_basics import bpe_v7

        self.seen: list[int] = []
        real_merge, real_cpp = bpe_v7.merge, bpe_v7._merge_cpp
        current: list[int] = []

        class Table:
            def __init__(self, table) -> None:
                self.table = table

            def merge(self, *args, num_threads: int | None = None, **kwargs):
                own = self.table.num_threads
                current.append(own if num_threads is None else min(own, num_threads))
                return self.table.merge(*args, num_threads=num_threads, **kwargs)

        def merge(word_counts, *args, **kwargs):
            current[:] = []
            merges = real_merge(word_counts if isinstance(word_counts, dict) else Table(word_counts), *args, **kwargs)
            self.seen.append(current[-1])
            return merges

        def cpp_merge(*args, num_threads: int = 1, **kwargs):
            current.append(num_threads)
            return real_cpp.merge(*args, num_threads=num_threads, **kwargs)

        monkeypatch.setattr(bpe_v7, "merge", merge)
        monkeypatch.setattr(bpe_v7, "_merge_cpp", types.SimpleNamespace(merge=cpp_merge))


@pytest.fixture
def wanted() -> int:
    """One thread: fewer than the tables made without a count get (OpenMP's default, every core)."""
    from cs336_basics.native import _count_cpp

    if not _count_cpp.openmp_enabled() or _count_cpp.omp_default_threads() < 2:
        pytest.skip("one thread is all OpenMP runs here: no merge loop can run on more")
    return 1


@needs_v7
@pytest.mark.parametrize(
    "source", ["counts", "several counts", "two files", "gz", "one file", "several sizes from counts"]
)
def test_workers_reach_the_merge_loop_from_the_command_line(
    corpus: Path, tmp_path: Path, monkeypatch, capsys, wanted: int, source: str
) -> None:
    counts = tmp_path / "corpus.counts"
    WordCounts.load(count_words([corpus], [ENDOFTEXT]).save(counts))
    other = tmp_path / "other.txt"
    other.write_text("more text, more words\n" * 20, encoding="utf-8")
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(corpus.read_bytes()))
    data = {
        "counts": ["--counts", str(counts)],
        "several counts": ["--counts", str(counts), str(counts)],
        "two files": ["-d", str(corpus), str(other)],
        "gz": ["-d", str(packed)],
        "one file": ["-d", str(corpus)],
        "several sizes from counts": ["--counts", str(counts), "-v", "280,300"],
    }[source]
    spy = MergeThreads(monkeypatch)
    argv = ["bpe_v7", str(tmp_path / "out"), *data, "-q", "--workers", str(wanted)]
    assert cli_main(["-v", "300", *argv] if "-v" not in data else argv) == 0, capsys.readouterr().err
    assert spy.seen == [wanted]


@needs_v7
def test_workers_reach_the_merge_loop_after_a_cluster_counted(
    corpus: Path, tmp_path: Path, monkeypatch, capsys, wanted: int
) -> None:
    pytest.importorskip("distributed")
    spy = MergeThreads(monkeypatch)
    argv = ["bpe_v7", str(tmp_path / "out"), "-d", str(corpus), "--cluster", "local:1", "-v", "300", "-q"]
    assert cli_main([*argv, "--workers", str(wanted)]) == 0, capsys.readouterr().err
    assert spy.seen == [wanted]


@needs_v7
def test_num_workers_reaches_the_merge_loop_from_python(corpus: Path, monkeypatch, wanted: int) -> None:
    spy = MergeThreads(monkeypatch)
    counts = count_words([corpus], [ENDOFTEXT])
    expected = train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")
    assert train_bpe_from_counts(counts, 300, trainer="bpe_v7", num_workers=wanted) == expected
    assert train_bpe_from_counts(counts.counts, 300, [ENDOFTEXT], trainer="bpe_v7", num_workers=wanted) == expected
    documents = corpus.read_text(encoding="utf-8").split(ENDOFTEXT)
    assert train_bpe_from_iterator(documents, 300, [ENDOFTEXT], trainer="bpe_v7", num_workers=wanted) == expected
    assert train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v7", num_workers=wanted) == expected
    assert spy.seen == [wanted] * 4


@needs_v7
def test_more_workers_than_a_table_was_made_on_keep_its_own_threads(corpus: Path, monkeypatch, wanted: int) -> None:
    # Its threads exist already; handing the words over through arrays would only cost time and memory.
    from cs336_basics.native import _count_cpp

    spy = MergeThreads(monkeypatch)
    counts = count_words([corpus], [ENDOFTEXT])
    default = _count_cpp.omp_default_threads()
    train_bpe_from_counts(WordCounts.from_bytes(counts.to_bytes()), 300, trainer="bpe_v7", num_workers=2 * default)
    assert spy.seen == [default]


@needs_v7
def test_num_workers_keeps_refusing_what_workers_refuses(corpus: Path) -> None:
    with pytest.raises(BPEInputError, match="must not be 0"):
        train_bpe_from_counts(count_words([corpus], [ENDOFTEXT]), 300, trainer="bpe_v7", num_workers=0)


# ---------------------------------------------------------------------------------------------
# Item 10 (parts): the tokenizer's messages


@pytest.fixture
def tokenizer(corpus: Path) -> Tokenizer:
    vocab, merges = train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")
    return Tokenizer(vocab, merges, [ENDOFTEXT])


def test_encode_file_to_a_path_writes_the_ids(tokenizer: Tokenizer, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "ids.bin"
    out.write_bytes(b"an older file")
    count = tokenizer.encode_file_to(corpus, out)
    ids = array(tokenizer.id_typecode, out.read_bytes())
    assert count == len(ids) and ids == tokenizer.encode_file(corpus)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt", "ids.bin"]  # no temporary left


def test_encode_file_to_a_path_keeps_the_old_file_when_encoding_fails(
    tokenizer: Tokenizer, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text " * 50_000 + b"\xff")
    out = tmp_path / "ids.bin"
    out.write_bytes(b"an older file")
    with pytest.raises(BPEInputError, match="UTF-8"):
        tokenizer.encode_file_to(bad, out, chunk_bytes=4096)
    assert out.read_bytes() == b"an older file"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.txt", "corpus.txt", "ids.bin"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("text mode", "open it with open(path, 'wb')"),
        ("an int", "a binary file or a path"),
        ("a directory", "it is a directory"),
        ("the input", "it is the input file"),
        ("a missing folder", "cannot write the ids to"),
    ],
)
def test_encode_file_to_refuses_what_it_cannot_write_to(
    tokenizer: Tokenizer, corpus: Path, tmp_path: Path, target: str, message: str
) -> None:
    before = corpus.read_bytes()
    with open(tmp_path / "text.out", "w", encoding="utf-8") as text_file:
        out = {
            "text mode": text_file,
            "an int": 7,
            "a directory": tmp_path,
            "the input": corpus,
            "a missing folder": tmp_path / "nowhere" / "ids.bin",
        }[target]
        with pytest.raises(BPEInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            tokenizer.encode_file_to(corpus, out)  # type: ignore[arg-type]
    assert corpus.read_bytes() == before


def test_encode_file_to_names_what_a_file_without_a_descriptor_lacks(tokenizer: Tokenizer, corpus: Path) -> None:
    if not tokenizer.native:
        pytest.skip("the pure path writes to any binary file")
    with pytest.raises(BPEInputError, match="file descriptor, which a BytesIO lacks"):
        tokenizer.encode_file_to(corpus, io.BytesIO())


LOAD_CHILD = """
    import sys
    from cs336_basics import BPEInputError, Tokenizer
    try:
        Tokenizer.from_files(sys.argv[1], sys.argv[2])
    except BPEInputError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
"""


@pytest.mark.parametrize("kind", ["/dev/zero", "FIFO", "over 256 MiB"])
def test_from_files_refuses_what_cannot_be_a_tokenizer_file(tmp_path: Path, kind: str) -> None:
    merges = tmp_path / "merges.txt"
    merges.write_text("")
    if kind == "/dev/zero":
        vocab = Path("/dev/zero")
        expected = "/dev/zero is not a regular file"
    elif kind == "FIFO":
        vocab = tmp_path / "vocab.json"
        os.mkfifo(vocab)
        expected = "vocab.json is not a regular file"
    else:
        vocab = tmp_path / "vocab.json"
        with open(vocab, "wb") as file:
            file.truncate(serialization.MAX_TOKENIZER_FILE_BYTES + 1)  # sparse: no disk, no reading
        expected = "larger than a tokenizer file may be (256 MiB)"
    result = run_child(LOAD_CHILD, str(vocab), str(merges))
    assert result.returncode == 1 and expected in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1


def test_native_cache_slots_past_the_maximum_is_refused_before_any_memory() -> None:
    vocab = {index: bytes([index]) for index in range(256)}
    for native in (None, False):
        with pytest.raises(ValueError, match=r"native_cache_slots must be at most 67,108,864 \(2\*\*26"):
            Tokenizer(vocab, [], native=native, native_cache_slots=2**62)


@pytest.mark.parametrize("native", [None, False])
@pytest.mark.parametrize("method", ["encode_batch", "encode_file", "encode_file_to"])
def test_num_threads_follows_the_workers_rule(
    tokenizer: Tokenizer, corpus: Path, tmp_path: Path, native: bool | None, method: str
) -> None:
    tokenizer = Tokenizer(tokenizer.vocab, tokenizer.merges, [ENDOFTEXT], native=native)
    calls = {
        "encode_batch": lambda threads: tokenizer.encode_batch(["a b c"], num_threads=threads),
        "encode_file": lambda threads: tokenizer.encode_file(corpus, num_threads=threads),
        "encode_file_to": lambda threads: tokenizer.encode_file_to(corpus, tmp_path / "ids.bin", num_threads=threads),
    }
    call = calls[method]
    too_many = -(usable_cores() + 5)
    with pytest.raises(BPEInputError, match=f"num_threads={too_many} leaves no core"):
        call(too_many)
    with pytest.raises(BPEInputError, match="num_threads must not be 0"):
        call(0)
    assert call(-1) == call(1)


# ---------------------------------------------------------------------------------------------
# --export: bad names, targets that cannot be written; never a half-written set


@pytest.fixture
def exported(corpus: Path, tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "300", "-q", "--export", "hf,tiktoken"]) == 0
    return out, {path.name: path.read_bytes() for path in out.iterdir()}


def files_of(out: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}


@pytest.mark.parametrize("formats", ["hf,bogus", "HF", "tiktoken,hf,json"])
def test_export_names_an_unknown_format(exported, corpus: Path, capsys, formats: str) -> None:
    out, before = exported
    with pytest.raises(SystemExit) as stopped:
        cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "280", "-q", "--export", formats])
    assert stopped.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--export: unknown format(s)" in message and message.endswith("choose from hf, tiktoken")
    assert files_of(out) == before


@pytest.mark.parametrize("occupant", ["directory", "FIFO"])
@pytest.mark.parametrize("name", EXPORT_FILES)
def test_export_target_taken_by_a_non_file_is_refused_before_training(
    exported, corpus: Path, capsys, occupant: str, name: str
) -> None:
    out, before = exported
    (out / name).unlink()
    del before[name]
    (out / name).mkdir() if occupant == "directory" else os.mkfifo(out / name)
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "280", "-q", "--export", "hf,tiktoken"]) == 2
    one_error_line(capsys.readouterr(), f"cannot write {out / name}: a directory or special file has that name")
    assert files_of(out) == before


def test_export_through_a_symbolic_link_replaces_the_link_not_its_target(exported, corpus: Path, tmp_path) -> None:
    out, _ = exported
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "tokenizer.json").unlink()
    (out / "tokenizer.json").symlink_to(victim)
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "280", "-q", "--export", "hf"]) == 0
    assert victim.read_text() == "precious\n" and not (out / "tokenizer.json").is_symlink()
    Tokenizer.from_files(out / "vocab.json", out / "merges.txt")  # the set is whole and its own


def test_an_export_that_cannot_be_written_leaves_the_old_set(exported, corpus: Path, monkeypatch, capsys) -> None:
    out, before = exported
    real_write = serialization._write_file

    def write_file(path: Path, fill):
        if path.name == "tokenizer.json":
            raise OSError(28, "No space left on device", str(path))
        return real_write(path, fill)

    monkeypatch.setattr(serialization, "_write_file", write_file)
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "280", "-q", "--export", "hf"]) == 1
    one_error_line(capsys.readouterr(), "tokenizer.json: No space left on device")
    assert files_of(out) == before  # the old set, exports included, and nothing staged left
    assert sorted(path.name for path in out.iterdir()) == sorted(before)
    assert set(before) == {*OUTPUT_FILES, *EXPORT_FILES, RUN_FILE}


# ---------------------------------------------------------------------------------------------
# cs336-swap-in on hostile files


def swap_refusal(capsys, argv: list[str], *expected: str) -> None:
    assert swap_in.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    one_error_line(captured, *expected)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("huge", "too large for the handout's adapters.py"),
        ("binary", "is not Python source text"),
        ("latin-1 without a cookie", "is not Python source text"),
        ("nested too deeply", "nested too deeply for Python's parser"),
        ("not-not chain", "nested too deeply for Python's parser"),
        ("a dangling symbolic link", "is a symbolic link to"),
        ("a symbolic link loop", "symbolic link loop"),
        ("a directory", "is a directory"),
    ],
)
def test_swap_in_refuses_hostile_files_writing_nothing(tmp_path: Path, capsys, kind: str, expected: str) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    path = tests / "adapters.py"
    if kind == "huge":
        with open(path, "wb") as file:
            file.truncate(swap_in.MAX_SOURCE_BYTES + 1)
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "latin-1 without a cookie":
        path.write_bytes("# Café\ndef run_train_bpe():\n    raise NotImplementedError\n".encode("latin-1"))
    elif kind == "nested too deeply":
        path.write_text("x = " + " + ".join(["a"] * 200_000) + "\n")
    elif kind == "not-not chain":
        path.write_text("x = " + "not " * 100_000 + "a\n")
    elif kind == "a dangling symbolic link":
        path.symlink_to(tmp_path / "gone.py")
    elif kind == "a symbolic link loop":
        path.symlink_to(path)
    else:
        path.mkdir()
    before = {entry: (entry.read_bytes() if entry.is_file() and entry.stat().st_size < 1 << 20 else None)
              for entry in tmp_path.rglob("*") if not entry.is_symlink()}  # fmt: skip
    swap_refusal(capsys, [str(tmp_path)], str(path), expected)
    after = {entry: (entry.read_bytes() if entry.is_file() and entry.stat().st_size < 1 << 20 else None)
             for entry in tmp_path.rglob("*") if not entry.is_symlink()}  # fmt: skip
    assert after == before  # no backup, no temporary file, nothing changed


@pytest.mark.parametrize("kind", ["FIFO", "symbolic link to /dev/zero"])
def test_swap_in_never_reads_a_fifo_or_device(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "adapters.py"
    os.mkfifo(path) if kind == "FIFO" else path.symlink_to("/dev/zero")
    code = "import sys; from cs336_basics.commands.swap_in import main; sys.exit(main(sys.argv[1:]))"
    result = run_child(code, str(path))
    assert result.returncode == 1 and result.stdout == "", result.stderr
    assert result.stderr.strip() == (
        f"error: {path} is not a regular file (a FIFO, device or socket); give the assignment checkout or its "
        "tests/adapters.py"
    )


def test_swap_in_runs_as_a_module_of_the_checkout(tmp_path: Path) -> None:
    # Through the checkout's name the module has no __file__ of its own (before: a TypeError traceback).
    result = subprocess.run(
        [sys.executable, "-m", "cs336_basics.commands.swap_in", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=CHILD_ENV,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().startswith("error: ") and "not found" in result.stderr


# ---------------------------------------------------------------------------------------------
# cs336-bpe-report on a bad directory: one line, exit 2, nothing written


@pytest.fixture
def run_dir(corpus: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "300", "-q"]) == 0
    return out


def damage(directory: Path, how: str) -> str:
    """Damages a run directory; returns what the refusal must say."""
    if how == "bpe_run.json not JSON":
        (directory / RUN_FILE).write_bytes(b"\xff\xfe not json")
        return "bpe_run.json is not UTF-8 text"
    if how == "bpe_run.json of another shape":
        (directory / RUN_FILE).write_text("[1, 2]")
        return "bpe_run.json is not a usable"
    if how == "vocab.json cut short":
        (directory / "vocab.json").write_bytes((directory / "vocab.json").read_bytes()[:40])
        return "vocab.json is shorter than the file the run"
    if how == "vocab.json a FIFO, pickles gone":
        for name in ("vocab.json", "vocab.pkl"):
            (directory / name).unlink()
        os.mkfifo(directory / "vocab.json")
        return "holds no tokenizer"
    if how == "vocab.json over 256 MiB":
        with open(directory / "vocab.json", "wb") as file:
            file.truncate(serialization.MAX_TOKENIZER_FILE_BYTES + 1)
        return "vocab.json is larger than a tokenizer file may be"
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "missing",
        "empty",
        "a file",
        "bpe_run.json not JSON",
        "bpe_run.json of another shape",
        "vocab.json cut short",
        "vocab.json a FIFO, pickles gone",
        "vocab.json over 256 MiB",
    ],
)
def test_report_on_a_bad_directory_is_one_line_and_exit_2(
    run_dir: Path, corpus: Path, tmp_path: Path, capsys, how: str
) -> None:
    if how == "missing":
        directory, expected = tmp_path / "nowhere", "tokenizer directory not found"
    elif how == "empty":
        directory, expected = tmp_path / "empty", "holds no tokenizer"
        directory.mkdir()
    elif how == "a file":
        directory, expected = corpus, "not a directory"
    else:
        directory, expected = run_dir, damage(run_dir, how)
    listing = sorted(path.name for path in tmp_path.rglob("*"))
    assert report_module.main([str(directory), "--text", str(corpus), "-q"]) == 2
    captured = capsys.readouterr()
    one_error_line(captured, expected)
    assert captured.out == ""
    assert sorted(path.name for path in tmp_path.rglob("*")) == listing  # no report, nothing else
