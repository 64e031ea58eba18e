"""The command line where a newcomer meets it first: no data given, a missing file, `| head`; and its
edges: limits too large for the merge loop, a base file nested too deeply, a signal while a local
cluster starts, a pattern that is not UTF-8, and the reason a minimum frequency gives for stopping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cs336_basics.commands.cli import main as cli_main
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
            [sys.executable, "-m", "cs336_basics.commands.cli", "bpe_v2", str(tmp_path / "out"), "-d", str(corpus)]
            + ["-v", "270"],
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


@pytest.mark.parametrize("option", ["--min-frequency", "--max-token-length"])
def test_a_limit_too_large_for_the_merge_loop_is_a_usage_error(
    option: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli_main(["auto", str(tmp_path / "out"), "-d", str(corpus), "-q", option, "99999999999999999999999"])
    assert stopped.value.code == 2
    assert f"argument {option}: expected a whole number" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_limit_too_large_is_refused_by_the_python_api_too(corpus: Path) -> None:
    from cs336_basics import BPEInputError, train_bpe

    with pytest.raises(BPEInputError, match="min_frequency must be at most 2\\*\\*63 - 1"):
        train_bpe(corpus, 300, [], min_frequency=10**23)
    with pytest.raises(BPEInputError, match="max_token_length must be at most 2\\*\\*63 - 1"):
        train_bpe(corpus, 300, [], max_token_length=10**23)


def test_a_start_from_file_nested_too_deeply_is_a_bad_base(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = tmp_path / "tokenizer.json"
    nested.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert cli_main(["bpe_v2", str(tmp_path / "out"), "-d", str(corpus), "-q", "--start-from", str(nested)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply" in err and str(nested) in err


# Trains with a local cluster of two workers and says "ready" on stderr once each worker process is
# either ignoring SIGINT or importing Dask (its YAML module loaded), a second or more before Dask's
# preload could make it ignore Ctrl-C.
CLUSTER_START_CHILD = """
import sys, threading, time
if __name__ == "__main__":
    import distributed.process as process
    from cs336_basics.commands.cli import main

    real_start = process.AsyncProcess.start
    started = []

    def past_the_start(pid):
        try:
            with open(f"/proc/{pid}/status") as status:
                ignored = next(line for line in status if line.startswith("SigIgn:"))
            with open(f"/proc/{pid}/maps") as maps:
                importing = "_yaml" in maps.read()
        except (OSError, StopIteration):
            return False
        return bool(int(ignored.split()[1], 16) & 2) or importing

    def tell_when_both_started():
        while len(started) < 2 or not all(past_the_start(pid) for pid in started):
            time.sleep(0.001)
        print("ready", file=sys.stderr, flush=True)

    def start(self):
        future = real_start(self)
        future.add_done_callback(lambda _: started.append(self.pid))
        return future

    process.AsyncProcess.start = start
    threading.Thread(target=tell_when_both_started, daemon=True).start()
    sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups as a terminal makes them")
def test_ctrl_c_while_the_local_workers_start_ends_the_run_quietly(corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    script = tmp_path / "child.py"  # a file: the workers import it again (and run nothing, by its guard)
    script.write_text(CLUSTER_START_CHILD)
    argv = ["bpe_v2", str(tmp_path / "out"), "-d", str(corpus), "-q", "-v", "270", "--cluster", "local:2"]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, str(script), *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True,
    )  # fmt: skip
    try:
        assert child.stderr.readline() == "ready\n"
        os.killpg(child.pid, signal.SIGINT)  # as the terminal sends Ctrl-C: to every process of the group
        started = time.monotonic()
        _, err = child.communicate(timeout=120)
        # A guard against a hang, not a measure: the run ends within a second (10 s when Dask's exit
        # handler closed the cluster again).
        assert time.monotonic() - started < 60
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
    assert child.returncode == 130
    assert "Traceback" not in err and "never retrieved" not in err
    assert err.strip() == "interrupted", err
    assert not (tmp_path / "out" / "vocab.json").exists()


def test_a_pattern_that_is_not_utf8_is_refused_naming_the_option(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pattern = os.fsdecode(b"\xff|\\w+|.")  # what Python makes of $'\xff|\w+|.' on the command line
    with pytest.raises(SystemExit) as stopped:
        cli_main(["bpe_v2", str(tmp_path / "out"), "-d", str(corpus), "-q", "--pattern", pattern])
    assert stopped.value.code == 2
    assert "argument --pattern: not valid UTF-8 text: b'\\xff|\\\\w+|.'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_minimum_frequency_no_pair_reaches_is_named_as_the_reason(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bpe_v2", str(tmp_path / "out"), "-d", str(corpus), "-q", "-v", "300", "--min-frequency", "100000"]
    assert cli_main([*argv, "--special"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no pair reaches the minimum frequency 100,000 (--min-frequency 100000)" in err
    assert "two bytes" not in err


def test_each_size_a_minimum_frequency_cut_short_is_noted_with_the_reason(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-q", "-v", "258,300", "--min-frequency", "50"]) == 0
    reached = len(json.loads((out / "v300" / "vocab.json").read_text()))
    assert 258 < reached < 300
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note")]
    assert notes == [
        f"note          v300/ stopped at {reached} tokens, short of 300: no pair left reaches the minimum "
        "frequency 50 (--min-frequency 50)"
    ]
