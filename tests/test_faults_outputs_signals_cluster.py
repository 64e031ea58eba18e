"""Runs, interrupts, the output directory and Dask at their faults (hardened in issue 40). A signal at
the very end never reports "interrupted" over a set already in place; Ctrl-C on a local cluster is
one line and leaves no worker behind; an empty output path is refused; bad input on Dask is refused
at once as it is locally; two runs started together never mix their sets; `kill -9` inside the final
moves leaves a set that loads. (The test_faults_* files are one family; see test_faults_hostile_use.)

Signals are sent only after the child has said, through a pipe, that it reached the point, or from
a patched function at that point; no test depends on timing."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import cs336_basics.outputs.serialization as serialization
from cs336_basics import Tokenizer, train_bpe
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.commands.encode_cli import main as encode_main
from cs336_basics.outputs.serialization import RUN_FILE, OutputDirectory, read_run_info, save_tokenizer
from cs336_basics.rules.contract import ENDOFTEXT
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


# ---------------------------------------------------------------------------------------------
# Item 2: once the set is in place the run has succeeded


def _train_into(corpus: Path, out: Path, vocab_size: int) -> tuple[dict[int, bytes], list]:
    vocab, merges = train_bpe(corpus, vocab_size, [ENDOFTEXT], trainer="bpe_v1")
    save_tokenizer(out, vocab, merges, [ENDOFTEXT])
    return vocab, merges


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("when", ["after the save", "during the last move", "from another thread mid-moves"])
def test_a_signal_once_the_set_is_in_place_ends_the_run_as_a_success(
    corpus: Path, tmp_path: Path, monkeypatch, capsys, signum: int, when: str
) -> None:
    out = tmp_path / "out"
    _train_into(corpus, out, 280)
    new_vocab, new_merges = train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")
    if when == "after the save":
        real_save = OutputDirectory.save

        def save(self, *args, **kwargs):
            written = real_save(self, *args, **kwargs)
            os.kill(os.getpid(), signum)  # handled at the next bytecode, in this frame
            return written

        monkeypatch.setattr(OutputDirectory, "save", save)
    else:
        real_replace = serialization.os.replace
        moves = []

        def send_from_another_thread() -> None:
            # A thread that lets the signal in: the main thread's mask alone cannot hold it back.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            signal.pthread_kill(threading.get_ident(), signum)

        def replace(source, target):
            moves.append(target)
            if when == "during the last move" and Path(target).name == "merges.pkl":
                os.kill(os.getpid(), signum)
            if when == "from another thread mid-moves" and Path(target).name == "vocab.json":
                sender = threading.Thread(target=send_from_another_thread)
                sender.start()
                sender.join()
            real_replace(source, target)

        monkeypatch.setattr(serialization.os, "replace", replace)
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q", "-v", "300"]) == 0
    captured = capsys.readouterr()
    assert "interrupted" not in captured.err
    name = signal.Signals(signum).name
    assert captured.err.strip() == f"note: {name} came after the output was in place; the run is complete"
    assert "wrote" in captured.out
    assert loaded_sets(out)[0] == (new_vocab, new_merges)
    assert leftovers(out) == []


def test_a_signal_before_the_commit_still_keeps_the_old_set(corpus: Path, tmp_path: Path, monkeypatch, capsys):
    out = tmp_path / "out"
    _train_into(corpus, out, 280)
    before = {name: (out / name).read_bytes() for name in OUTPUTS}
    real_rename = serialization.os.rename

    def rename(source, target):
        if Path(source).name.startswith(serialization.STAGING_PREFIX):
            raise KeyboardInterrupt  # as a signal handled just before the commit
        real_rename(source, target)

    monkeypatch.setattr(serialization.os, "rename", rename)
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q", "-v", "300"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before
    assert leftovers(out) == []


@pytest.mark.parametrize("command", ["count", "encode"])
def test_a_signal_once_the_file_is_in_place_ends_count_and_encode_as_a_success(
    corpus: Path, tmp_path: Path, monkeypatch, capsys, command: str
) -> None:
    """cs336-count-words and cs336-encode-dataset, whose one file is renamed into place: the same rule."""
    out = tmp_path / ("c.counts" if command == "count" else "ids.npy")
    real_replace = os.replace

    def replace(source, target):
        real_replace(source, target)
        if Path(target) == out:
            os.kill(os.getpid(), signal.SIGINT)  # held back until the rename's block ends

    monkeypatch.setattr(os, "replace", replace)  # the one os module: serialization's and encode_cli's
    if command == "count":
        code = count_main([str(corpus), "-o", str(out), "-q"])
    else:
        _train_into(corpus, tmp_path / "tok", 280)
        code = encode_main([str(corpus), str(out), "--tokenizer", str(tmp_path / "tok"), "-q"])
    assert code == 0
    err = capsys.readouterr().err
    assert err.strip() == "note: SIGINT came after the output was in place; the run is complete"
    assert out.stat().st_size > 0


# Waits at the chosen step of the set's commit (the rename of the staging directory, or the move of
# the nth file), says so, and is killed there by the test (SIGKILL: nothing of the run's own runs).
KILL_IN_COMMIT_CHILD = textwrap.dedent(
    """
    import os, sys
    import cs336_basics.outputs.serialization as serialization
    from cs336_basics.commands.cli import main

    step, argv = sys.argv[1], sys.argv[2:]
    steps = []
    def pause(name, real):
        def call(source, target):
            steps.append(name)
            if f"{name}{steps.count(name) - 1}" == step:
                print("ready", flush=True)
                sys.stdin.readline()
            return real(source, target)
        return call
    serialization.os.rename = pause("rename", os.rename)
    serialization.os.replace = pause("replace", os.replace)
    sys.exit(main(argv))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("step", ["rename0", "replace0", "replace1", "replace2", "replace3", "replace4"])
def test_kill_9_inside_the_commit_leaves_a_set_that_loads(corpus: Path, tmp_path: Path, step: str) -> None:
    out = tmp_path / "out"
    old = _train_into(corpus, out, 280)
    new = train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")
    argv = ["bpe_v1", str(out), "-d", str(corpus), "-q", "-v", "300"]
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_IN_COMMIT_CHILD, step, *argv],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV,
    )  # fmt: skip
    try:
        assert child.stdout.readline() == "ready\n", child.stderr.read()
        child.kill()
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
        child.stdin.close()
    assert child.returncode == -signal.SIGKILL
    # Before its metadata moves the old set is whole; after, every file of the new one is read from
    # where it is (moved or still in the commit directory): one run's set, never a mix.
    assert loaded_sets(out)[0] == (old if step in ("rename0", "replace0") else new)
    # The next run finishes the killed one's moves (or finds nothing to do), then writes its own.
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q", "-v", "270"]) == 0
    assert loaded_sets(out)[0] == train_bpe(corpus, 270, [ENDOFTEXT], trainer="bpe_v1")
    assert leftovers(out) == [] and sorted(p.name for p in out.iterdir()) == OUTPUTS


def test_the_next_run_finishes_the_moves_of_a_killed_one(corpus: Path, tmp_path: Path) -> None:
    """The killed run's set is moved in whole when the next run opens the directory, even if that
    run then fails: the directory never stays half moved."""
    out = tmp_path / "out"
    _train_into(corpus, out, 280)
    new = train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")
    result = subprocess.run(
        [sys.executable, "-c", KILL_IN_COMMIT_CHILD.replace('print("ready", flush=True)', "os._exit(137)"),
         "replace2", "bpe_v1", str(out), "-d", str(corpus), "-q", "-v", "300"],
        capture_output=True, text=True, env=CHILD_ENV, timeout=120,
    )  # fmt: skip
    assert result.returncode == 137, result.stderr
    with OutputDirectory(out):
        pass  # opened, and left without saving
    assert leftovers(out) == []
    assert loaded_sets(out)[0] == new
    run = json.loads((out / RUN_FILE).read_text())
    for name in OUTPUTS[1:]:
        assert (out / name).stat().st_size == run["files"][name]["bytes"]


def test_a_commit_directory_that_is_not_a_set_is_removed_not_moved_in(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    old = _train_into(corpus, out, 280)
    stray = out / f"{serialization.COMMIT_PREFIX}0123abcd"
    stray.mkdir()
    (stray / "vocab.json").write_text("{}")  # no metadata of that id anywhere
    with OutputDirectory(out):
        pass
    assert leftovers(out) == [] and loaded_sets(out)[0] == old


# ---------------------------------------------------------------------------------------------
# Two runs started in the same instant on one output directory

# Says it is ready, then starts the CLI when the test answers: both children are released together.
START_TOGETHER_CHILD = textwrap.dedent(
    """
    import sys
    from cs336_basics.commands.cli import main
    print("ready", flush=True)
    sys.stdin.readline()
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_two_runs_started_together_give_one_whole_set(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sizes = (280, 300)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", START_TOGETHER_CHILD, "bpe_v1", str(out), "-d", str(corpus), "-q", "-v", str(size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV,
        )  # fmt: skip
        for size in sizes
    ]
    results = []
    try:
        for child in children:
            assert child.stdout.readline() == "ready\n"
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            _, err = child.communicate(timeout=120)
            results.append((child.returncode, err))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    codes = [code for code, _ in results]
    assert 0 in codes and set(codes) <= {0, 2}, results
    for code, err in results:
        if code == 2:  # refused at once, in one line naming the directory
            assert len(err.strip().splitlines()) == 1
            assert err.startswith("error: another run") and f"is writing to {out}" in err
    # One run's set, whole: the one that finished last when both ran.
    sets = {size: train_bpe(corpus, size, [ENDOFTEXT], trainer="bpe_v1") for size in sizes}
    assert loaded_sets(out)[0] in sets.values()
    assert leftovers(out) == [] and sorted(p.name for p in out.iterdir()) == OUTPUTS


# ---------------------------------------------------------------------------------------------
# Item 7: bad input on Dask is refused at once, as locally, never retried


def refusing_count(marks: Path, tasks: object, special_tokens: object, threads: object, storage_options: object,
                   **options: object) -> None:  # fmt: skip
    """A counting task that meets bad input; each run of it leaves a mark."""
    from cs336_basics import BPEInputError

    with marks.open("a") as file:
        file.write("ran\n")
    raise BPEInputError("part.txt: invalid UTF-8 at byte offset 7")


def test_bad_input_on_the_cluster_is_not_retried(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    from functools import partial

    from distributed import Client, LocalCluster

    from cs336_basics import BPEInputError
    from cs336_basics.ingest.cluster import count_words_on_cluster

    text = tmp_path / "part.txt"
    text.write_text("some words to count " * 100)
    marks = tmp_path / "marks"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            with pytest.raises(BPEInputError, match=r"\Apart.txt: invalid UTF-8 at byte offset 7\Z"):
                count_words_on_cluster(client, [text], [ENDOFTEXT], retries=3, count=partial(refusing_count, marks))
    assert marks.read_text() == "ran\n"  # once: not retried


def run_module(module: str, *argv: str) -> subprocess.CompletedProcess:
    """`python -m cs336_basics.MODULE ARGV...`: run by name, so that Dask's worker processes import the
    package from this checkout as the command does (the name of the main module is what they import)."""
    return subprocess.run(
        [sys.executable, "-m", f"cs336_basics.commands.{module}", *argv],
        capture_output=True, text=True, env=CHILD_ENV, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["text", "jsonl"])
def test_bad_input_on_a_local_cluster_ends_as_it_does_locally(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    if kind == "text":
        data = tmp_path / "bad.txt"
        data.write_bytes(b"hello world " * 100 + b"\xff\xfe bad\n" + b"more text " * 100)
    else:
        data = tmp_path / "bad.jsonl"
        data.write_text("".join(json.dumps({"text": f"document {n}"}) + "\n" for n in range(300)) + "{broken\n")
    argv = [str(data), "-o", str(tmp_path / "c.counts"), "-q"]
    local = run_module("count_cli", *argv)
    assert local.returncode == 2 and local.stderr.startswith("error: ") and str(data) in local.stderr
    on_cluster = run_module("count_cli", *argv, "--cluster", "local:2")
    assert (on_cluster.returncode, on_cluster.stderr) == (2, local.stderr)
    trained = run_module("cli", "bpe_v1", str(tmp_path / "out"), "-d", str(data), "-q", "--cluster", "local:2")
    assert (trained.returncode, trained.stderr) == (2, local.stderr)
    assert not (tmp_path / "c.counts").exists() and not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Item 3: Ctrl-C on --cluster local:N is one line, and no worker outlives the command

# A script file, not `python -c`: Dask's worker processes import the main script again, and with it
# this checkout's package. Its counting tasks tell the test through a FIFO that they are counting,
# then wait; the run's process prints its workers' pids first.
SLOW_SCRATCH_CHILD = textwrap.dedent(
    """
    import warnings
    from cs336_basics.ingest.cluster import connect

    def slow_scratch():  # what Dask says when making a scratch directory takes over a second
        warnings.warn("Creating scratch directories is taking a surprisingly long time. (1.01s)", UserWarning)

    if __name__ == "__main__":
        with connect("local:1") as client:
            client.run(slow_scratch)
            slow_scratch()
        print("done", flush=True)
    """
)


def test_a_local_cluster_says_nothing_of_slow_scratch_directories(tmp_path: Path) -> None:
    # A busy machine makes them slow (a run printed the warning before its "interrupted"); the advice, a
    # network file system's, is not the local cluster's.
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    script = tmp_path / "child.py"
    script.write_text(SLOW_SCRATCH_CHILD)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=CHILD_ENV, timeout=300)
    assert done.stdout == "done\n", done.stderr
    assert "scratch" not in done.stderr


CLUSTER_CHILD = textwrap.dedent(
    """
    import os, sys, time
    import cs336_basics.ingest.cluster as cluster
    from cs336_basics.commands.cli import main

    def counting_forever(tasks, special_tokens, threads, storage_options, **options):
        try:
            handle = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # the test reads one worker's line; another may find no reader left
            pass
        else:
            os.write(handle, b"counting\\n")
            os.close(handle)
        time.sleep(600)

    def with_pids_told(real):
        def count_plan_on_cluster(client, *args, **kwargs):
            print("workers", *client.run(os.getpid).values(), flush=True)
            return real(client, *args, count=counting_forever, **kwargs)
        return count_plan_on_cluster

    if __name__ == "__main__":
        cluster.count_plan_on_cluster = with_pids_told(cluster.count_plan_on_cluster)
        sys.exit(main(sys.argv[2:]))
    """
)


def _gone(pid: int) -> bool:
    """No such process, or a zombie waiting to be reaped (it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as status:
            return status.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, FIFOs and /proc")
@pytest.mark.parametrize(
    ("signum", "to_group"),
    [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGINT, False), (signal.SIGTERM, False)],
    ids=["ctrl-c", "sigterm to the group", "sigint to the run", "sigterm to the run"],
)
def test_a_signal_on_a_local_cluster_is_one_line_and_leaves_no_worker(
    corpus: Path, tmp_path: Path, signum: int, to_group: bool
) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    import time

    script = tmp_path / "child.py"
    script.write_text(CLUSTER_CHILD)
    fifo = tmp_path / "counting"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDWR)  # read and write: opening never waits, reading waits for a line
    argv = ["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "-q", "--cluster", "local:2"]
    child = subprocess.Popen(
        [sys.executable, str(script), str(fifo), *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV, start_new_session=True,
    )  # fmt: skip
    workers: list[int] = []
    try:
        told = child.stdout.readline().split()
        assert told[:1] == ["workers"], child.stderr.read()
        workers = [int(pid) for pid in told[1:]]
        # A hang guard (the FIFO never ends, its reader writes too): a child that died never writes the line.
        assert select.select([reader], [], [], 300)[0], "no worker reached its task"
        assert os.read(reader, 9) == b"counting\n"  # a worker is inside its task
        if to_group:
            os.killpg(child.pid, signum)  # as the terminal sends Ctrl-C: to every process of the group
        else:
            child.send_signal(signum)
        _, err = child.communicate(timeout=120)
        # A hang guard that only catches a leak, not a measure of speed: exiting takes well under a second
        # on a quiet machine, and this must hold on a busy laptop too.
        deadline = time.monotonic() + 60
        while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [pid for pid in workers if not _gone(pid)]
    finally:
        os.close(reader)
        if child.poll() is None:
            child.kill()
            child.communicate()
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
    assert child.returncode == 128 + signum
    assert "Traceback" not in err and err.strip() == "interrupted", err
    assert left == []
    assert not (tmp_path / "out").exists()
