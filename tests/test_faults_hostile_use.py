"""Faults a hostile or careless user meets: every one ends in a clear message or a complete result,
never a crash, a traceback, output files that do not belong together, or code run from a file.

Interrupts are raised at chosen points (from a patched phase, or by a signal sent to a child that
has said, through a pipe, that it reached the point), so no test depends on timing."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cs336_basics.outputs.serialization as serialization
import cs336_basics.tokenizer as tokenizer_module
from cs336_basics import BPEInputError, Tokenizer, bpe_v1, train_bpe
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.encode_cli import main as encode_main
from cs336_basics.native.backend import usable_cores
from cs336_basics.outputs.serialization import (
    LOCK_FILE,
    RUN_FILE,
    STAGING_PREFIX,
    OutputDirectory,
    load_tokenizer_files,
    save_tokenizer,
)
from cs336_basics.rules.contract import ENDOFTEXT, MAX_WORKERS_PER_CORE, check_num_workers
from cs336_basics.rules.splitting import GPT2_REGEX, split_on_special_tokens
from cs336_basics.trainers import trainer_status
from tests.support import FIXTURES, REPO_ROOT, TOKENIZER_MEMORY_CHILD_PRELUDE, require_fixture

OUTPUTS = ["bpe_run.json", "merges.pkl", "merges.txt", "vocab.json", "vocab.pkl"]
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("hello world, hello there<|endoftext|>the cat's hat 12 345\n" * 20, encoding="utf-8")
    return path


def trained_set(corpus: Path, out: Path, vocab_size: int = 280) -> tuple[dict[int, bytes], list]:
    vocab, merges = train_bpe(corpus, vocab_size, [ENDOFTEXT], trainer="bpe_v1")
    save_tokenizer(out, vocab, merges, [ENDOFTEXT])
    return vocab, merges


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


# ---------------------------------------------------------------------------------------------
# Bad arguments


def test_plain_string_special_tokens_refused(corpus: Path) -> None:
    with pytest.raises(BPEInputError, match="wrap '<eos>' in a list"):
        train_bpe(corpus, 300, "<eos>", trainer="bpe_v1")  # type: ignore[arg-type]


def test_lone_surrogate_special_token(corpus: Path) -> None:
    with pytest.raises(BPEInputError, match="not valid Unicode"):
        train_bpe(corpus, 300, ["<\ud800>"], trainer="bpe_v1")
    with pytest.raises(BPEInputError, match="not valid Unicode"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [], ["\udfff"])


@pytest.mark.parametrize("kind", ["fifo", "device", "proc"])
def test_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero" if kind == "device" else "/proc/self/status")
        if not path.exists():
            pytest.skip(f"{path} does not exist here")
    with pytest.raises(BPEInputError, match="not a regular file"):
        train_bpe(path, 300, [], trainer="bpe_v1")


def test_compressed_input_is_read_and_a_corrupt_one_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """Training decompresses as it reads (tests/test_ingest.py checks the results); a stream that is
    not what its magic bytes say stops with one line naming the file, and nothing is written."""
    plain, packed, fake = tmp_path / "train.txt", tmp_path / "train.txt.gz", tmp_path / "train.txt.zst"
    plain.write_bytes(b"hello world " * 100)
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert train_bpe(packed, 300, [], trainer="bpe_v1") == train_bpe(plain, 300, [], trainer="bpe_v1")
    fake.write_bytes(b"\x28\xb5\x2f\xfd" + plain.read_bytes())  # zstd's magic, then no zstd frame
    with pytest.raises(BPEInputError, match=rf'{fake}.*(corrupt or truncated zstd|pip install "cs336-bpe\[data\]")'):
        train_bpe(fake, 300, [], trainer="bpe_v1")
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(fake)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pre-tokenize" not in err  # refused before the progress bar
    assert not (tmp_path / "out" / "merges.txt").exists()


def test_unreadable_input_is_one_line(corpus: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    import cs336_basics.rules.contract as contract

    real_open = open

    def refusing_open(path, *args, **kwargs):
        if Path(path) == corpus:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(contract, "open", refusing_open, raising=False)
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "-q"]) == 2
    err = capsys.readouterr().err
    assert "cannot read training file" in err and "Permission denied" in err and "Traceback" not in err


def test_huge_vocab_size_refused(corpus: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(BPEInputError, match="too large"):
        train_bpe(corpus, 10**23, [], trainer="bpe_v1")
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "-v", str(10**23), "-q"]) == 2
    assert "too large" in capsys.readouterr().err


def test_worker_counts() -> None:
    cores = usable_cores()
    assert check_num_workers(None) is None
    assert check_num_workers(1) == 1
    assert check_num_workers(-1) == cores
    assert check_num_workers(10**6) == MAX_WORKERS_PER_CORE * cores
    assert check_num_workers(2**31) == MAX_WORKERS_PER_CORE * cores
    for bad, error, message in [
        (0, BPEInputError, "must not be 0"),
        (-cores - 1, BPEInputError, "leaves no core"),
        (True, TypeError, "must be an int"),
        (2.0, TypeError, "must be an int"),
    ]:
        with pytest.raises(error, match=message):
            check_num_workers(bad)


@pytest.mark.parametrize("workers", ["0", "-99"])
def test_cli_bad_worker_counts_answer_in_cli_terms(corpus: Path, tmp_path: Path, capsys, workers: str) -> None:
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "--workers", workers, "-q"]) == 2
    err = capsys.readouterr().err
    assert "--workers" in err and "None" not in err


@pytest.mark.parametrize("trainer", ["bpe_v3", "bpe_v7"])
def test_cli_caps_huge_worker_counts(corpus: Path, tmp_path: Path, capsys, trainer: str) -> None:
    if not trainer_status()[trainer].available:
        pytest.skip(trainer_status()[trainer].reason)
    out = tmp_path / "out"
    assert cli_main([trainer, str(out), "-d", str(corpus), "-v", "270", "--workers", str(2**31), "-q"]) == 0
    assert f"capped at {MAX_WORKERS_PER_CORE * usable_cores()}" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The output set is one unit


def test_output_set_carries_its_metadata(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    vocab, merges = trained_set(corpus, out)
    assert sorted(p.name for p in out.iterdir()) == OUTPUTS
    run = json.loads((out / RUN_FILE).read_text())
    assert run["special_tokens"] == [ENDOFTEXT]
    assert run["vocab_size"] == len(vocab) and run["num_merges"] == len(merges)
    assert run["files"]["merges.txt"]["bytes"] == (out / "merges.txt").stat().st_size


def test_files_from_different_runs_are_refused(corpus: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    trained_set(corpus, first, 280)
    trained_set(corpus, second, 290)
    (first / "vocab.json").write_bytes((second / "vocab.json").read_bytes())
    with pytest.raises(BPEInputError, match="vocab.json .*another run"):
        Tokenizer.from_files(first / "vocab.json", first / "merges.txt")
    with pytest.raises(BPEInputError, match="different training runs"):
        Tokenizer.from_files(second / "vocab.pkl", first / "merges.pkl")


def test_merges_cut_at_a_line_end_is_refused(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    trained_set(corpus, out)
    lines = (out / "merges.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    (out / "merges.txt").write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
    with pytest.raises(BPEInputError, match="merges.txt is shorter than"):
        Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    assert len(Tokenizer.from_files(out / "vocab.json", out / "merges.txt", check_run=False).merges) < len(lines)


@pytest.mark.parametrize("failure", [KeyboardInterrupt(), OSError(27, "File too large")])
def test_failed_save_keeps_the_previous_set(corpus: Path, tmp_path: Path, monkeypatch, failure) -> None:
    out = tmp_path / "out"
    trained_set(corpus, out, 280)
    before = {name: (out / name).read_bytes() for name in OUTPUTS}
    vocab, merges = train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")

    def failing_dump(*args, **kwargs):
        raise failure

    monkeypatch.setattr(serialization.pickle, "dump", failing_dump)
    with pytest.raises(type(failure)):
        save_tokenizer(out, vocab, merges)
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before
    assert leftovers(out) == []


def test_write_failure_in_the_cli_is_one_line_and_keeps_the_set(corpus: Path, tmp_path: Path) -> None:
    """A file-size limit (as `prlimit --fsize`) makes a write fail in the middle of saving."""
    out = tmp_path / "out"
    trained_set(corpus, out, 280)
    before = {name: (out / name).read_bytes() for name in OUTPUTS}
    limit = len(before["vocab.json"]) - 1  # the new vocabulary is no smaller: its vocab.json exceeds it
    code = f"import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
    code += "from cs336_basics.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "bpe_v2", str(out), "-d", str(corpus), "-v", "400", "-q"],
        capture_output=True, text=True, env=CHILD_ENV, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "File too large" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before
    assert leftovers(out) == []


KILL_CHILD = textwrap.dedent(
    """
    import os, sys
    import cs336_basics.outputs.serialization as serialization
    from cs336_basics import train_bpe
    moves = 0
    real_replace = os.replace
    def dying_replace(source, target):
        global moves
        moves += 1
        if moves > int(sys.argv[3]):
            os._exit(137)  # as kill -9: no cleanup runs
        real_replace(source, target)
    serialization.os.replace = dying_replace
    vocab, merges = train_bpe(sys.argv[1], 300, ["<|endoftext|>"], trainer="bpe_v1")
    serialization.save_tokenizer(sys.argv[2], vocab, merges)
    """
)


@pytest.mark.parametrize("moves_done", [0, 1, 3, 4])
def test_killed_while_moving_files_into_place_leaves_a_loadable_set(corpus: Path, tmp_path: Path, moves_done: int):
    out = tmp_path / "out"
    trained_set(corpus, out, 280)
    result = subprocess.run(
        [sys.executable, "-c", KILL_CHILD, str(corpus), str(out), str(moves_done)],
        capture_output=True, text=True, env=CHILD_ENV, timeout=120,
    )  # fmt: skip
    assert result.returncode == 137, result.stderr
    # The metadata moves first, then vocab.json, merges.txt, vocab.pkl, merges.pkl; what is not moved
    # yet is read from the commit directory, so each pair loads whole: the old set before any move,
    # the new one after.
    expected_size = 280 if moves_done == 0 else len(train_bpe(corpus, 300, [ENDOFTEXT], trainer="bpe_v1")[0])
    assert json.loads((out / RUN_FILE).read_text())["vocab_size"] == expected_size
    for vocab_name, merges_name in [("vocab.json", "merges.txt"), ("vocab.pkl", "merges.pkl")]:
        assert len(Tokenizer.from_files(out / vocab_name, out / merges_name).vocab) == expected_size
    vocab, _ = trained_set(corpus, out, 270)  # the next run finishes or removes what the killed one left
    assert leftovers(out) == []
    assert Tokenizer.from_files(out / "vocab.json", out / "merges.txt").vocab == vocab


def test_one_run_per_directory(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    with OutputDirectory(out):
        assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q"]) == 2
        assert f"another run (pid {os.getpid()}) is writing to {out}" in capsys.readouterr().err
    assert not (out / LOCK_FILE).exists()
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-v", "270", "-q"]) == 0


def test_stale_staging_files_are_removed(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / f"{STAGING_PREFIX}abc").mkdir(parents=True)
    (out / f"{STAGING_PREFIX}abc" / "vocab.pkl").write_bytes(b"x" * 1000)
    (out / ".vocab.pkl.k2j3h4.tmp").write_bytes(b"x" * 1000)  # what older versions left
    (out / "notes.txt").write_text("the user's own file stays")
    trained_set(corpus, out)
    assert leftovers(out) == [] and (out / "notes.txt").exists()


def test_an_output_name_taken_by_a_directory_is_refused_before_training(corpus, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    (out / "vocab.json").mkdir(parents=True)
    monkeypatch.setattr(bpe_v1, "pretokenize_and_count", lambda *args, **kwargs: pytest.fail("trained"))
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q"]) == 2
    assert "vocab.json" in capsys.readouterr().err


def test_saving_memory_does_not_grow_with_the_output(tmp_path: Path) -> None:
    """Tokens of 64 KB each, 16 MB in all: saving streams, so it never holds a whole file."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges = []
    for index in range(256):
        left = bytes([index]) * (1 << 15)
        merges.append((left, left))
        vocab[256 + index] = left + left
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        baseline = tracemalloc.get_traced_memory()[0]
        save_tokenizer(tmp_path / "out", vocab, merges)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    total = sum(path.stat().st_size for path in (tmp_path / "out").iterdir())
    assert total > 60_000_000
    assert peak < 8_000_000, f"saving {total:,} bytes of output peaked at {peak:,} bytes"
    vocab_back, merges_back, _ = load_tokenizer_files(tmp_path / "out" / "vocab.json", tmp_path / "out" / "merges.txt")
    assert vocab_back == vocab and merges_back == merges


# ---------------------------------------------------------------------------------------------
# Untrusted files


class RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("which", ["vocab.pkl", "merges.pkl"])
def test_a_crafted_pickle_runs_no_code(corpus: Path, tmp_path: Path, which: str, capsys) -> None:
    out = tmp_path / "out"
    trained_set(corpus, out)
    marker = tmp_path / "code-ran"
    (out / which).write_bytes(pickle.dumps({0: RunsCode(marker)} if which == "vocab.pkl" else [RunsCode(marker)]))
    with pytest.raises(BPEInputError, match=f"{which}: refused to load this pickle"):
        Tokenizer.from_files(out / "vocab.pkl", out / "merges.pkl", check_run=False)
    assert not marker.exists()
    arguments = [str(corpus), str(tmp_path / "ids.npy"), "--vocab", str(out / "vocab.pkl")]
    assert encode_main([*arguments, "--merges", str(out / "merges.pkl"), "--quiet"]) == 2
    assert not marker.exists() and "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("vocab.json", b'{"a": 0,'),
        ("vocab.json", b"\xff\xfe"),
        ("vocab.json", b"[1, 2]"),
        ("vocab.json", b'{"a": "zero"}'),
        ("vocab.pkl", b"\x80\x04garbage"),
        ("vocab.pkl", pickle.dumps({0: "not bytes"})),
        ("merges.pkl", pickle.dumps([(b"a",)])[:-3]),
        ("merges.pkl", pickle.dumps({"a": 1})),
        ("merges.txt", b"a b c\n"),
        ("merges.txt", b"\xff \xfe\n"),
    ],
)
def test_corrupt_files_name_the_file(tmp_path: Path, name: str, content: bytes) -> None:
    good_vocab = json.dumps({serialization.encode_token(bytes([i])): i for i in range(256)})
    (tmp_path / "vocab.json").write_text(good_vocab, encoding="utf-8")
    (tmp_path / "vocab.pkl").write_bytes(pickle.dumps({i: bytes([i]) for i in range(256)}))
    (tmp_path / "merges.txt").write_text("", encoding="utf-8")
    (tmp_path / "merges.pkl").write_bytes(pickle.dumps([]))
    (tmp_path / name).write_bytes(content)
    kind = Path(name).suffix
    vocab, merges = (("vocab.pkl", "merges.pkl") if kind == ".pkl" else ("vocab.json", "merges.txt"))
    with pytest.raises(BPEInputError, match=name.replace(".", r"\.")):
        Tokenizer.from_files(tmp_path / vocab, tmp_path / merges)


# ---------------------------------------------------------------------------------------------
# The tokenizer


def test_from_files_takes_the_special_tokens_of_the_run(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    vocab, _ = trained_set(corpus, out)
    tokenizer = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    assert tokenizer.special_tokens == [ENDOFTEXT]
    assert tokenizer.encode(ENDOFTEXT) == [256]
    assert Tokenizer.from_files(out / "vocab.json", out / "merges.txt", []).special_tokens == []


@pytest.mark.parametrize("bad", [1.0, True, False, "1", None])
def test_decode_rejects_what_is_not_an_integer(bad: object) -> None:
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    with pytest.raises(BPEInputError, match="integers"):
        tokenizer.decode([104, bad])  # type: ignore[list-item]


def test_decode_accepts_numpy_integers() -> None:
    numpy = pytest.importorskip("numpy")
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    assert tokenizer.decode(numpy.array([104, 105], dtype=numpy.uint16)) == "hi"


@pytest.fixture(scope="module")
def small_tokenizer() -> Tokenizer:
    vocab, merges = train_bpe(require_fixture("corpus.en"), 400, [ENDOFTEXT, "<|end|>"], trainer="bpe_v4")
    return Tokenizer(vocab, merges, [ENDOFTEXT, "<|end|>"], native=False)


ALPHABET = "ab zA1'\n\t.,-'sltve<|>endoftx\u00e9\u0301\u4e2d\u0663 \u00a0"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(st.text(alphabet=ALPHABET, max_size=12) | st.sampled_from([ENDOFTEXT, "<|end|>", "'s", "  "])),
    block=st.integers(1, 9),
)
def test_stream_pieces_give_the_ids_of_the_whole(small_tokenizer: Tokenizer, monkeypatch, parts, block) -> None:
    monkeypatch.setattr(tokenizer_module, "_MIN_PIECE_CHARS", block)
    monkeypatch.setattr(tokenizer_module, "_READ_BLOCK_CHARS", block)
    text = "".join(parts)
    pieces = list(small_tokenizer.split_stream(tokenizer_module._blocks(parts)))
    assert "".join(pieces) == text
    specials = small_tokenizer.special_tokens

    def pretokens(piece: str) -> list[str]:
        return [word for chunk in split_on_special_tokens(piece, specials) for word in GPT2_REGEX.findall(chunk)]

    assert [word for piece in pieces for word in pretokens(piece)] == pretokens(text)
    assert list(small_tokenizer.encode_iterable(parts)) == small_tokenizer.encode(text)


def test_a_line_without_whitespace_is_still_cut(small_tokenizer: Tokenizer) -> None:
    text = "abc,def;12.5-x(y)" * 10_000
    pieces = list(small_tokenizer.split_stream(tokenizer_module._blocks([text])))
    assert max(map(len, pieces)) <= 2 * tokenizer_module._READ_BLOCK_CHARS
    assert list(small_tokenizer.encode_iterable([text])) == small_tokenizer.encode(text)


LONG_LINE_CHILD = TOKENIZER_MEMORY_CHILD_PRELUDE + textwrap.dedent(
    """
    count = 0
    with open(text_path, encoding="utf-8") as file:
        file.read(1 << 16)  # let Python's text I/O set up its buffers before the limit
        file.seek(0)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (address_space() + (4 << 20), hard))
        try:
            for token_id in tokenizer.encode_iterable(file):
                count += 1
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    print(count)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status are Linux-only")
@pytest.mark.parametrize("backend", ["pure", "native"])
def test_encode_iterable_over_one_long_line_in_constant_memory(tmp_path: Path, backend: str) -> None:
    if backend == "native" and not tokenizer_module.native_available():
        pytest.skip("the compiled encoder is not built")
    line = require_fixture("tinystories_sample.txt").read_text(encoding="utf-8").replace("\n", " ")
    path = tmp_path / "one_line.txt"
    path.write_text(line * max(1, (12 << 20) // len(line)), encoding="utf-8")  # 12 MB, no newline
    result = subprocess.run(
        [sys.executable, "-c", LONG_LINE_CHILD, str(FIXTURES / "gpt2_vocab.json"), str(FIXTURES / "gpt2_merges.txt"),
         str(path), backend],
        capture_output=True, text=True, env=CHILD_ENV, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout) > 1_000_000


# ---------------------------------------------------------------------------------------------
# The command line: interrupts and failures


def raising_merge(error: BaseException):
    def merge(*args, **kwargs):
        raise error

    return merge


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (KeyboardInterrupt(), 130, "interrupted"),
        (MemoryError(), 1, "out of memory"),
        (PermissionError(13, "Permission denied", "some/file"), 1, "some/file: Permission denied"),
    ],
)
def test_cli_failures_are_one_line_and_leave_no_output(corpus, tmp_path, monkeypatch, capsys, error, code, message):
    out = tmp_path / "out"
    monkeypatch.setattr(bpe_v1, "merge", raising_merge(error))
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q"]) == code
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # the run made it, wrote nothing, and took it away again


class InterruptedInDel:
    """Raises SIGINT while Python runs its __del__, where an exception is printed and dropped."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)
        for _ in range(3):  # a backward jump: the pending signal handler runs here, inside __del__
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_swallowed_in_a_del_still_ends_the_run(corpus, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    real_merge = bpe_v1.merge

    def merge(*args, **kwargs):
        InterruptedInDel()  # dropped at once: __del__ runs here
        return real_merge(*args, **kwargs)

    monkeypatch.setattr(bpe_v1, "merge", merge)
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists()  # the run made it, wrote nothing, and took it away again


class SignalInDel:
    """Sends `signum` to this process while Python runs its __del__, where the handler's exception is
    printed and dropped."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        signal.raise_signal(self.signum)
        for _ in range(3):  # a backward jump: the pending signal handler runs here, inside __del__
            pass


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"])
def test_an_interrupt_swallowed_in_a_del_stops_the_wait_it_came_in(
    corpus, tmp_path, monkeypatch, capsys, signum: int, code: int
) -> None:
    # As a Dask client waits for its counting tasks: the garbage collector runs a finalizer in the main
    # thread, the signal comes then, and the wait would last until the whole count is done.
    import threading

    out = tmp_path / "out"
    waited_out = []
    hook = sys.unraisablehook
    real_merge = bpe_v1.merge

    def merge(*args, **kwargs):
        SignalInDel(signum)  # dropped at once: __del__ runs here
        # A hang guard, not a measure: the signal is sent again at once and ends this wait.
        waited_out.append(threading.Event().wait(60) or "the wait ran out")
        return real_merge(*args, **kwargs)

    monkeypatch.setattr(bpe_v1, "merge", merge)
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-q"]) == code
    assert waited_out == []
    assert capsys.readouterr().err == "interrupted\n"  # nothing of the finalizer's ignored exception
    assert sys.unraisablehook is hook
    assert not out.exists()


SIGNAL_CHILD = textwrap.dedent(
    """
    import sys
    import cs336_basics.bpe_v1 as bpe_v1
    import cs336_basics.outputs.serialization as serialization
    from cs336_basics.commands.cli import main

    def wait_here(*args, **kwargs):
        print("ready", flush=True)
        sys.stdin.readline()  # the parent signals instead of answering

    if sys.argv[1] == "merge":
        bpe_v1.merge = wait_here
    else:
        real_dump = serialization.pickle.dump
        def dump(*args, **kwargs):
            wait_here()
            return real_dump(*args, **kwargs)
        serialization.pickle.dump = dump
    sys.exit(main(sys.argv[2:]))
    """
)


def signal_when_ready(child_code_and_arguments: list[str], signum: int) -> tuple[int, str]:
    """Run `python -c CODE ARGS...`, send `signum` once it writes "ready", and return its exit code and
    stderr (no sleeps: the child says when it is inside the part to interrupt)."""
    child = subprocess.Popen(
        [sys.executable, "-c", *child_code_and_arguments],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV,
    )  # fmt: skip
    try:
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signum)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("phase", ["merge", "save"])
def test_a_signal_ends_the_run_cleanly(corpus: Path, tmp_path: Path, signum: int, code: int, phase: str) -> None:
    out = tmp_path / "out"
    trained_set(corpus, out, 280)
    before = {name: (out / name).read_bytes() for name in OUTPUTS}
    returncode, err = signal_when_ready(
        [SIGNAL_CHILD, phase, "bpe_v1", str(out), "-d", str(corpus), "-v", "300", "-q"], signum
    )
    assert returncode == code, err
    assert err.strip() == "interrupted"
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before
    assert leftovers(out) == []


def test_reported_peak_memory_includes_saving(corpus: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """The peak is read after saving: memory used only while saving shows in it."""
    from cs336_basics.trainers import peak_rss_bytes

    extra = peak_rss_bytes() + (64 << 20)
    real_dumps = json.dumps
    held = []

    def dumps_using_memory(*args, **kwargs):
        if not held:
            held.append(b"\x01" * extra)  # written, so resident
        return real_dumps(*args, **kwargs)

    monkeypatch.setattr(serialization.json, "dumps", dumps_using_memory)
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "-v", "270", "-q"]) == 0
    del held[:]
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("peak memory"))
    value, unit = line.split()[2:4]
    reported = float(value.replace(",", "")) * {"MB": 1e6, "GB": 1e9}[unit]
    assert reported >= extra


# A shell that runs `pip install -e . && python cs336_basics/test_trainer.py ...` execs the last
# command: the run's process image starts with the peak of children it never had (the compiler).
EXEC_AFTER_A_BIG_CHILD = """
import os, subprocess, sys
subprocess.run([sys.executable, "-c", "held = b'x' * (256 << 20)"], check=True)
probe = "from cs336_basics.trainers import peak_rss_bytes; print(peak_rss_bytes())"
os.execv(sys.executable, [sys.executable, "-c", probe])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the children's peak survives exec on Linux")
def test_the_peak_leaves_out_children_of_the_process_image_before_exec() -> None:
    result = subprocess.run(
        [sys.executable, "-c", EXEC_AFTER_A_BIG_CHILD], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert 0 < int(result.stdout) < (128 << 20)  # the package's own peak, not the 256 MiB child's


# ---------------------------------------------------------------------------------------------
# cs336-encode-dataset (encode_cli)


def test_encode_dataset_takes_the_special_tokens_of_the_run(corpus: Path, tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    out = tmp_path / "out"
    trained_set(corpus, out)
    ids_path = tmp_path / "ids.npy"
    arguments = [str(corpus), str(ids_path), "--vocab", str(out / "vocab.json"), "--merges", str(out / "merges.txt")]
    assert encode_main([*arguments, "--quiet"]) == 0
    ids = numpy.load(ids_path)
    assert (ids == 256).sum() == corpus.read_text().count(ENDOFTEXT)


def test_encode_dataset_refuses_compressed_input_by_name(corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    trained_set(corpus, out)
    packed = tmp_path / "data.txt.gz"
    packed.write_bytes(gzip.compress(corpus.read_bytes()))
    arguments = [str(packed), str(tmp_path / "ids.npy"), "--vocab", str(out / "vocab.json")]
    assert encode_main([*arguments, "--merges", str(out / "merges.txt")]) == 2
    err = capsys.readouterr().err
    assert str(packed) in err and "gunzip" in err and "encode" not in err.split("error:")[0]


ENCODE_SIGNAL_CHILD = textwrap.dedent(
    """
    import sys
    from cs336_basics.commands import encode_cli as module
    real_encode_file_to = module.Tokenizer.encode_file_to
    def encode_file_to(self, path, out, progress, **options):
        def report(done):  # called from inside the encoding (the compiled encoder's chunk loop)
            print("ready", flush=True)
            sys.stdin.readline()  # the parent signals instead of answering
            progress(done)
        return real_encode_file_to(self, path, out, progress=report, **options)
    module.Tokenizer.encode_file_to = encode_file_to
    sys.exit(module.main(sys.argv[1:]))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_encode_dataset_signal_leaves_no_partial_array(corpus: Path, tmp_path: Path, signum: int, code: int) -> None:
    out = tmp_path / "out"
    trained_set(corpus, out)
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    arguments = [str(corpus), str(arrays / "ids.npy"), "--vocab", str(out / "vocab.json")]
    returncode, err = signal_when_ready(
        [ENCODE_SIGNAL_CHILD, *arguments, "--merges", str(out / "merges.txt"), "--quiet"], signum
    )
    assert returncode == code, err
    assert err.strip() == "interrupted"
    assert list(arrays.iterdir()) == []


COUNT_SIGNAL_CHILD = textwrap.dedent(
    """
    import sys
    from cs336_basics.commands import count_cli as module
    real_count_inputs = module.count_inputs
    def count_inputs(*args, **options):
        print("ready", flush=True)  # counting starts: the parent signals now
        sys.stdin.readline()
        return real_count_inputs(*args, **options)
    module.count_inputs = count_inputs
    sys.exit(module.main(sys.argv[1:]))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_count_words_signal_writes_no_count_file(corpus: Path, tmp_path: Path, signum: int, code: int) -> None:
    """cs336-count-words ends on SIGINT or SIGTERM as the trainer does: "interrupted", 130 or 143."""
    counts = tmp_path / "counts"
    counts.mkdir()
    output = counts / "corpus.counts"
    returncode, err = signal_when_ready([COUNT_SIGNAL_CHILD, str(corpus), "-o", str(output), "-q"], signum)
    assert returncode == code, err
    assert err.strip() == "interrupted"
    assert list(counts.iterdir()) == []


@pytest.mark.parametrize("phase", ["pre-tokenize", "merges"])
def test_ctrl_c_inside_every_versions_phases_ends_the_cli_run(trainer, corpus, tmp_path, monkeypatch, capsys, phase):
    """Ctrl-C delivered while a phase reports progress (for bpe_v7, from inside its native loop):
    the phase stops, the CLI says "interrupted", exits 130 and writes nothing."""
    import tqdm

    real_update = tqdm.tqdm.update

    def update(self, n=1):
        if self.desc == phase:
            raise KeyboardInterrupt
        return real_update(self, n)

    monkeypatch.setattr(tqdm.tqdm, "update", update)
    out = tmp_path / "out"
    assert cli_main([trainer, str(out), "-d", str(corpus), "-v", "300", "--workers", "1"]) == 130
    assert capsys.readouterr().err.strip().endswith("interrupted")
    assert not out.exists()  # the run made it, wrote nothing, and took it away again


def test_special_tokens_are_inferred_only_from_a_training_layout(corpus: Path, tmp_path: Path) -> None:
    vocab, merges = train_bpe(corpus, 280, [ENDOFTEXT, "<pad>"], trainer="bpe_v1")
    save_tokenizer(tmp_path / "trained", vocab, merges)
    assert json.loads((tmp_path / "trained" / RUN_FILE).read_text())["special_tokens"] == [ENDOFTEXT, "<pad>"]
    # One extra token after the merged ones (as GPT-2's <|endoftext|> is): not a training layout.
    other = {token_id: vocab[token_id] for token_id in range(256)}
    other.update({256 + index: left + right for index, (left, right) in enumerate(merges)})
    other[len(other)] = b"<x>"
    save_tokenizer(tmp_path / "other", other, merges)
    assert json.loads((tmp_path / "other" / RUN_FILE).read_text())["special_tokens"] == []
