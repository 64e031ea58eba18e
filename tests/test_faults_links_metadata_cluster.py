"""Links, metadata and the cluster: the lock file and staging never follow symbolic links, one run
gives one vocabulary in every format (one-byte special tokens), Dask edges end in one line, damaged
metadata and count files are refused naming the file, and every command shares one exit-status table.
(The test_faults_* files are one family: bad input, hostile use, changing input, native memory, the
sweep, and these.)

Interrupts are sent only after the child has said, through a pipe, that it reached the point; no test
depends on timing."""

from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cs336_basics.ingest.cluster as cluster_module
from cs336_basics import BPEInputError, Tokenizer
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.ingest.word_counts import WordCountFileError, WordCounts
from cs336_basics.native.backend import usable_cores
from cs336_basics.outputs.serialization import LOCK_FILE, RUN_FILE, OutputDirectory, save_tokenizer
from cs336_basics.rules.contract import MAX_WORKERS_PER_CORE
from tests.support import REPO_ROOT

CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
ONE_BYTE_SPECIALS = ["a", " ", "[", "$"]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("a banana and a [cat] costs $5 each, a bargain\n" * 40, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Item 2: the lock file, staging and temporary files never follow symbolic links


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / LOCK_FILE).symlink_to(victim)
    with pytest.raises(BPEInputError, match="symbolic link"):
        with OutputDirectory(out):
            pass
    assert victim.read_text() == "precious\n"


def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / LOCK_FILE)
    with pytest.raises(BPEInputError, match="not a regular file"):
        with OutputDirectory(out):
            pass


def test_a_hard_linked_lock_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.link(victim, out / LOCK_FILE)
    with pytest.raises(BPEInputError, match="hard links"):
        with OutputDirectory(out):
            pass
    assert victim.read_text() == "precious\n"


def test_the_cli_refuses_a_symlinked_lock_file_in_one_line(tmp_path: Path, corpus: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / LOCK_FILE).symlink_to(victim)
    assert cli_main(["bpe_v1", str(out), "-d", str(corpus), "-v", "270", "-q"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert victim.read_text() == "precious\n"


def test_staged_files_are_created_new_never_through_a_link(tmp_path: Path) -> None:
    from cs336_basics.outputs import serialization

    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    link = tmp_path / "staged"
    link.symlink_to(target)
    with pytest.raises(BPEInputError):
        serialization._write_file(link, lambda out: out.write(b"written"))
    assert target.read_text() == "keep\n"


# ---------------------------------------------------------------------------------------------
# Item 3: one-byte special tokens: one vocabulary in every format


@pytest.mark.parametrize("special", ONE_BYTE_SPECIALS, ids=["a", "space", "bracket", "dollar"])
def test_one_byte_special_tokens_give_one_tokenizer_from_every_format(tmp_path: Path, corpus: Path, special: str):
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", str(corpus), "-v", "300", "-q", "--special", special]) == 0
    from_json = Tokenizer.from_files(out / "vocab.json", out / "merges.txt")
    from_pickle = Tokenizer.from_files(out / "vocab.pkl", out / "merges.pkl")
    with open(out / "vocab.pkl", "rb") as file:
        saved = pickle.load(file)
    assert from_json.vocab == from_pickle.vocab == saved
    # The byte keeps its id for regular text; the special token has its own, 256.
    assert saved[ord(special)] == saved[256] == special.encode()
    text = f"a banana{special}[x] $ a{special}"
    assert from_json.encode(text) == from_pickle.encode(text)
    assert 256 in from_json.encode(text)
    run = json.loads((out / RUN_FILE).read_text())
    assert run["vocab_size"] == len(saved)
    assert run["files"]["vocab.json"]["entries"] + len(run["vocab_json_extra_ids"]) == len(saved)
    assert from_json.decode(from_json.encode(text)) == text


@pytest.mark.parametrize("special", ONE_BYTE_SPECIALS, ids=["a", "space", "bracket", "dollar"])
def test_one_byte_special_tokens_survive_save_and_load(tmp_path: Path, special: str) -> None:
    vocab = {byte: bytes([byte]) for byte in range(256)}
    vocab[256] = special.encode()
    vocab[257] = b"xy"
    merges = [(b"x", b"y")]
    save_tokenizer(tmp_path, vocab, merges, [special])
    tokenizers = [
        Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", native=native)
        for native in (False, None)
    ] + [
        Tokenizer.from_files(tmp_path / "vocab.pkl", tmp_path / "merges.pkl", native=native) for native in (False, None)
    ]
    text = f"xy{special}x{special}{special}y"
    expected = [257, 256, ord("x"), 256, 256, ord("y")]
    for tokenizer in tokenizers:
        assert tokenizer.vocab == vocab
        assert tokenizer.encode(text) == expected


def test_tiktoken_export_keeps_the_byte_and_the_special_apart(tmp_path: Path) -> None:
    from cs336_basics.outputs.export import _split_ids

    vocab = {byte: bytes([byte]) for byte in range(256)}
    vocab[256] = b"a"
    regular, specials = _split_ids(vocab, ["a"])
    assert regular[b"a"] == 97 and specials == {"a": 256}


# ---------------------------------------------------------------------------------------------
# Item 4: Dask edges


def test_an_empty_cluster_spec_is_refused(tmp_path: Path, corpus: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "--cluster", ""])
    assert stopped.value.code == 2
    with pytest.raises(SystemExit) as stopped:
        count_main([str(corpus), "-o", str(tmp_path / "c.counts"), "--cluster", " "])
    assert stopped.value.code == 2
    assert not (tmp_path / "out").exists() and not (tmp_path / "c.counts").exists()


@pytest.mark.parametrize("address", ["tcp://bad host:8786", "tcp://host:99999", "tcp://:8786", "http://host:1"])
def test_an_invalid_scheduler_address_is_refused_at_once(address: str) -> None:
    with pytest.raises(BPEInputError, match="not a scheduler address"):
        with cluster_module.connect(address, timeout=600):
            pass


def test_local_workers_are_capped_with_a_note(capsys) -> None:
    limit = MAX_WORKERS_PER_CORE * usable_cores()
    assert cluster_module.local_worker_count("local:100000") == limit
    assert f"capped at local:{limit}" in capsys.readouterr().err
    assert cluster_module.local_worker_count("local:1") == 1
    assert capsys.readouterr().err == ""


def test_a_cluster_that_cannot_start_ends_in_one_line(tmp_path: Path, corpus: Path, monkeypatch, capsys) -> None:
    distributed = pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Nanny failed to start.\nTraceback (most recent call last): ...")

    monkeypatch.setattr(distributed, "LocalCluster", failing)
    assert count_main([str(corpus), "-o", str(tmp_path / "c.counts"), "-q", "--cluster", "local:1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not start" in err and "Nanny failed" in err


def test_an_unreachable_scheduler_gives_up_after_the_timeout(tmp_path: Path, corpus: Path, capsys) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    import socket

    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    argv = [str(corpus), "-o", str(tmp_path / "c.counts"), "-q", "--cluster", f"tcp://127.0.0.1:{port}"]
    assert count_main([*argv, "--cluster-timeout", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the Dask scheduler" in err


# Pauses inside LocalCluster's start (once Dask has registered the cluster for its exit handler),
# tells the test, and waits for the signal instead of an answer.
CLUSTER_START_CHILD = textwrap.dedent(
    """
    import sys, weakref
    import distributed.deploy.spec as spec
    from cs336_basics.commands.cli import main

    class Pausing(weakref.WeakSet):
        def add(self, item):
            super().add(item)
            print("ready", flush=True)
            sys.stdin.readline()

    spec.SpecCluster._instances = Pausing()
    sys.exit(main(sys.argv[1:]))
    """
)


def test_ctrl_c_while_the_local_cluster_starts_prints_only_interrupted(tmp_path: Path, corpus: Path) -> None:
    pytest.importorskip("distributed", reason="Dask is an optional extra: pip install -e '.[cluster]'")
    argv = ["bpe_v1", str(tmp_path / "out"), "-d", str(corpus), "-q", "--cluster", "local:1", "-v", "260"]
    child = subprocess.Popen(
        [sys.executable, "-c", CLUSTER_START_CHILD, *argv],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV,
    )  # fmt: skip
    try:
        assert child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 130
    assert err.strip() == "interrupted"


# ---------------------------------------------------------------------------------------------
# Item 5: one line instead of tracebacks


@pytest.mark.parametrize(
    "counts",
    [{b"ab": 1 << 63}, {b"ab": 1 << 62, b"cd": 1 << 62}, {b"abcdefgh": 1 << 61}],
    ids=["one count", "their sum", "pair counts"],
)
def test_counts_that_overflow_training_are_refused_on_load(tmp_path: Path, counts: dict[bytes, int]) -> None:
    path = tmp_path / "big.counts"
    WordCounts(counts, []).save(path)  # a valid checksum: only the values are wrong
    with pytest.raises(WordCountFileError, match="big.counts.*64-bit"):
        WordCounts.load(path)


def test_sane_large_counts_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.counts"
    WordCounts({b"ab": 1 << 40, b"c": 3}, []).save(path)
    assert WordCounts.load(path).counts == {b"ab": 1 << 40, b"c": 3}


def _saved_set(tmp_path: Path) -> Path:
    vocab = {byte: bytes([byte]) for byte in range(256)}
    vocab[256] = b"<|endoftext|>"
    vocab[257] = b"ab"
    save_tokenizer(tmp_path, vocab, [(b"a", b"b")], ["<|endoftext|>"])
    return tmp_path


def _edit_run(directory: Path, edit) -> None:
    run = json.loads((directory / RUN_FILE).read_text())
    edit(run)
    (directory / RUN_FILE).write_text(json.dumps(run))


@pytest.mark.parametrize(
    "edit",
    [
        lambda run: run["files"]["vocab.json"].update(bytes="12"),
        lambda run: run.update(special_tokens="<|endoftext|>"),
        lambda run: run.update(vocab_size=[1]),
        lambda run: run.update(run_id=7),
        lambda run: run.update(vocab_json_extra_ids={"x": "a"}),
    ],
    ids=["string size", "string special tokens", "list size", "int run id", "bad extra id"],
)
def test_bpe_run_json_with_wrong_field_types_is_refused_naming_it(tmp_path: Path, edit) -> None:
    directory = _saved_set(tmp_path)
    _edit_run(directory, edit)
    with pytest.raises(BPEInputError, match=RUN_FILE):
        Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt")


def test_deeply_nested_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    directory = _saved_set(tmp_path)
    (directory / RUN_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BPEInputError, match=f"{RUN_FILE}.*nested"):
        Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt")
    (directory / RUN_FILE).unlink()
    (directory / "vocab.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(BPEInputError, match="vocab.json.*nested"):
        Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt")


def test_an_id_of_5001_digits_is_refused_naming_the_file(tmp_path: Path) -> None:
    directory = _saved_set(tmp_path)
    _edit_run(directory, lambda run: None)
    text = (directory / RUN_FILE).read_text().replace('"vocab_size": 258', '"vocab_size": ' + "9" * 5001)
    (directory / RUN_FILE).write_text(text)
    with pytest.raises(BPEInputError, match=RUN_FILE):
        Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt")
    (directory / RUN_FILE).unlink()
    (directory / "vocab.json").write_text('{"a": ' + "1" * 5001 + "}")
    with pytest.raises(BPEInputError, match="vocab.json"):
        Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt")


# ---------------------------------------------------------------------------------------------
# Item 6: refusals from Tokenizer.from_files name the file


def _unchecked_set(tmp_path: Path, vocab: dict[str, int], merges: str) -> tuple[Path, Path]:
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges, encoding="utf-8")
    return tmp_path / "vocab.json", tmp_path / "merges.txt"


def _byte_vocab() -> dict[str, int]:
    from cs336_basics.outputs.serialization import encode_token

    return {encode_token(bytes([byte])): byte for byte in range(256)}


def test_an_unknown_merge_token_names_the_merges_file(tmp_path: Path) -> None:
    vocab_path, merges_path = _unchecked_set(tmp_path, _byte_vocab(), "a b\n")
    with pytest.raises(BPEInputError, match=r"merges\.txt.*not in the vocabulary"):
        Tokenizer.from_files(vocab_path, merges_path)


def test_a_missing_byte_names_the_vocab_file(tmp_path: Path) -> None:
    vocab = _byte_vocab()
    del vocab["a"]
    vocab_path, merges_path = _unchecked_set(tmp_path, vocab, "")
    with pytest.raises(BPEInputError, match=r"vocab\.json.*lacks 1 of the 256"):
        Tokenizer.from_files(vocab_path, merges_path)


def test_an_id_out_of_range_names_the_vocab_file(tmp_path: Path) -> None:
    vocab = _byte_vocab()
    vocab["ab"] = 1 << 40
    vocab_path, merges_path = _unchecked_set(tmp_path, vocab, "")
    with pytest.raises(BPEInputError, match=r"vocab\.json.*ids must be integers in"):
        Tokenizer.from_files(vocab_path, merges_path)


def test_a_repeated_token_in_vocab_json_is_refused(tmp_path: Path) -> None:
    text = json.dumps(_byte_vocab())[:-1] + ', "ab": 256, "ab": 257}'
    (tmp_path / "vocab.json").write_text(text, encoding="utf-8")
    (tmp_path / "merges.txt").write_text("", encoding="utf-8")
    with pytest.raises(BPEInputError, match=r"vocab\.json.*'ab' is listed twice"):
        Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


def test_one_id_for_two_tokens_in_vocab_json_is_refused(tmp_path: Path) -> None:
    vocab = _byte_vocab()
    vocab["ab"] = 97
    vocab_path, merges_path = _unchecked_set(tmp_path, vocab, "")
    with pytest.raises(BPEInputError, match=r"vocab\.json.*id 97 is given to two tokens"):
        Tokenizer.from_files(vocab_path, merges_path)


# ---------------------------------------------------------------------------------------------
# Item 7: symlink loops, and one exit-status table


def test_a_symlink_loop_as_data_is_named_as_one(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    assert cli_main(["bpe_v1", str(tmp_path / "out"), "-d", str(loop), "-q"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link loop" in err and "does not exist" not in err


def test_count_words_exits_1_when_the_count_file_cannot_be_written(tmp_path: Path, corpus: Path) -> None:
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))  # a full disk, as far as the writer knows

    command = [sys.executable, "-m", "cs336_basics.commands.count_cli", str(corpus), "-o", str(tmp_path / "c.counts")]
    command.append("-q")
    done = subprocess.run(command, capture_output=True, text=True, env=CHILD_ENV, preexec_fn=small_files)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "c.counts" in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".c.counts.*"))


def test_count_words_exits_2_on_bad_input_and_an_unusable_output(tmp_path: Path, corpus: Path) -> None:
    assert count_main([str(tmp_path / "missing.txt"), "-o", str(tmp_path / "c.counts"), "-q"]) == 2
    assert count_main([str(corpus), "-o", str(tmp_path), "-q"]) == 2  # a directory by that name
    assert count_main([str(corpus), "-o", str(corpus / "c.counts"), "-q"]) == 2  # under a file
