#!/usr/bin/env python3
"""Re-run the fault sweep: bad input, hostile files, signals, write failures and memory limits,
each in its own process with a time limit and an address-space limit, and report whether every
case was handled (the expected exit status and message, no traceback, no mixed or partial output).

    python scripts/fault_sweep.py            # every case (a few minutes; builds ~100 MB of inputs)
    python scripts/fault_sweep.py --fast     # the quick subset CI runs (tests/test_faults_sweep.py)

Signals are sent only after the child has said, through a pipe, that it reached the point to
interrupt; nothing waits on a timer. Exit status 0 when every case was handled, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import json
import os
import pickle
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout without installing

from cs336_basics.outputs.serialization import OutputDirectory  # noqa: E402
from cs336_basics.trainers import trainer_status  # noqa: E402

CLI = "import sys; from cs336_basics.commands.cli import main; sys.exit(main(sys.argv[1:]))"
ENCODE = ["-m", "cs336_basics.commands.encode_cli"]  # cs336-encode-dataset, found through PYTHONPATH


@dataclass
class Case:
    name: str
    argv: list[str]  # after `python`
    codes: tuple[int, ...]
    message: str = ""  # a regular expression stderr must match
    fast: bool = True
    memory_mb: int = 1024
    file_size_bytes: int | None = None
    check: Callable[[], str | None] | None = None  # returns what is wrong, or None
    interrupt: int | None = None  # a signal sent once the child prints "ready"
    needs: str | None = None  # a trainer that must be runnable
    notes: str = ""


@dataclass
class Outcome:
    case: Case
    handled: bool
    detail: str
    seconds: float = 0.0
    stderr_tail: list[str] = field(default_factory=list)


def words_corpus(path: Path, size: int, seed: int = 0, fresh_words: float = 0.0) -> Path:
    """Lines of words from a 5000-word vocabulary; a share `fresh_words` of them are new random
    words, so the number of distinct words (and the counting's memory) grows with the size."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzäöüßабвгдежзийклмнопрстуфхцчшщыэюя"
    vocabulary = ["".join(rng.choice(letters[:26]) for _ in range(rng.randint(1, 9))) for _ in range(5000)]

    def word() -> str:
        if rng.random() < fresh_words:
            return "".join(rng.choice(letters) for _ in range(rng.randint(3, 12)))
        return rng.choice(vocabulary)

    with path.open("w", encoding="utf-8") as file:
        written = 0
        while written < size:
            line = " ".join(word() for _ in range(rng.randint(5, 40))) + ".\n"
            if rng.random() < 0.05:
                line += "<|endoftext|>"
            file.write(line)
            written += len(line)
    return path


def set_limits(memory_mb: int, file_size_bytes: int | None, seconds: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
        if file_size_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_bytes, file_size_bytes))

    return apply


def run_case(case: Case, timeout: int) -> Outcome:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, *case.argv],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
        preexec_fn=set_limits(case.memory_mb, case.file_size_bytes, timeout),
    )  # fmt: skip
    try:
        if case.interrupt is not None:
            line = child.stdout.readline()
            if line != "ready\n":
                child.kill()
            else:
                child.send_signal(case.interrupt)
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return Outcome(case, False, f"still running after {timeout} s", time.perf_counter() - started)
    seconds = time.perf_counter() - started
    code = child.returncode
    tail = err.strip().splitlines()[-3:]
    problems = []
    if code not in case.codes:
        problems.append(f"exit {code}, expected {'/'.join(map(str, case.codes))}")
    if "Traceback" in err:
        problems.append("traceback")
    if case.message and not re.search(case.message, err.strip()):
        problems.append(f"no message matching {case.message!r}")
    if case.check is not None and not problems:
        problem = case.check()
        if problem:
            problems.append(problem)
    return Outcome(case, not problems, "; ".join(problems) or f"exit {code}", seconds, tail)


# ---------------------------------------------------------------------------------------------
# The cases


def outputs(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()} if directory.exists() else {}


def unchanged(directory: Path, before: dict[str, bytes]) -> Callable[[], str | None]:
    def check() -> str | None:
        after = outputs(directory)
        if after != before:
            return f"{directory.name} changed: {sorted(set(after) ^ set(before)) or 'contents differ'}"
        hidden = [p.name for p in directory.iterdir() if p.name.startswith(".")]
        return f"left {hidden}" if hidden else None

    return check


SIGNAL_CHILD = textwrap.dedent(
    """
    import sys
    import cs336_basics.trainers as trainers
    from cs336_basics.commands.cli import main
    real_load = trainers.load_trainer
    def load_trainer(name):
        module = real_load(name)
        real_merge = module.merge
        def merge(*args, **kwargs):
            print("ready", flush=True)
            sys.stdin.readline()  # the sweep signals instead of answering
            return real_merge(*args, **kwargs)
        module.merge = merge
        return module
    trainers.load_trainer = load_trainer
    sys.exit(main(sys.argv[1:]))
    """
)

LONG_LINE_CHILD = textwrap.dedent(
    """
    import resource, sys
    from cs336_basics.tokenizer import Tokenizer
    tokenizer = Tokenizer.from_files(sys.argv[1], sys.argv[2])
    def address_space():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    with open(sys.argv[3], encoding="utf-8") as file:
        file.read(1 << 16)
        file.seek(0)
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (address_space() + (64 << 20), hard))
        count = sum(1 for _ in tokenizer.encode_iterable(file))
    print(count)
    """
)


class RunsCommand:
    """Pickles into a call of os.system: what a hostile vocab.pkl holds."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def python_api(statement: str) -> list[str]:
    """A library call whose BPEInputError is printed as one line (a library raises; that is right)."""
    code = f"import sys\nfrom cs336_basics import BPEInputError\ntry:\n    {statement}\n"
    code += "except BPEInputError as error:\n    print(error, file=sys.stderr)\n    sys.exit(1)"
    return ["-c", code]


def reading_input_cases(work: Path, full: bool) -> Iterator[Case]:
    """Reading input (hardened in issue 40, items 4, 5, 9, 10, 12, and URL inputs): no text is
    refused alike everywhere, a FIFO in a directory as when named, a reused buffer or a record is read
    right, a missing special token is noted, bad paths, Parquet files and URLs are named in one line."""
    root = work / "reading-input"
    root.mkdir()
    corpus = root / "corpus.txt"
    corpus.write_text("hello world, the cat sat on the mat<|endoftext|>low lower lowest\n" * 200)
    count_words = ["-m", "cs336_basics.commands.count_cli"]

    def cli(out: str, *data: Path | str, options: tuple[str, ...] = ()) -> list[str]:
        return ["-c", CLI, "bpe_v2", str(root / out), "-d", *map(str, data), "-v", "300", "-q", *options]

    def script(code: str) -> list[str]:
        return ["-c", textwrap.dedent(code)]

    # Item 5: no text at all, in every format and command
    (root / "empty.jsonl").write_bytes(b"")
    (root / "blank.jsonl").write_bytes(b"\n \n\t\n")
    (root / "bad.jsonl").write_bytes(b'{"body": "elsewhere"}\nnot json\n')
    (root / "a.txt").write_bytes(b"")
    (root / "b.txt").write_bytes(b"")
    no_text = r"\A(note: .*\n)?error: .*hold(s)? no text: .*{}"
    yield Case("input: empty .jsonl", cli("o1", root / "empty.jsonl"), (2,), no_text.format(r"empty\.jsonl"))
    yield Case("input: blank-lines .jsonl", cli("o2", root / "blank.jsonl"), (2,), no_text.format(r"blank\.jsonl"))
    yield Case("input: every record skipped", cli("o3", root / "bad.jsonl", options=("--skip-bad-records",)), (2,),
               no_text.format(r"bad\.jsonl \(every record was skipped: 2 bad records\)"))  # fmt: skip
    yield Case("input: two empty .txt", cli("o4", root / "a.txt", root / "b.txt"), (2,), no_text.format(r"a\.txt"))
    yield Case("input: count-words on an empty .jsonl", [*count_words, str(root / "empty.jsonl"), "-o",
               str(root / "c1.counts"), "-q"], (2,), no_text.format(r"empty\.jsonl"))  # fmt: skip
    yield Case("input: no documents (Python)", python_api("from cs336_basics import train_bpe_from_iterator; "
               "train_bpe_from_iterator(['', ''], 300, [])"), (1,), r"\Athe documents hold no text")  # fmt: skip
    stray = root / "stray"
    stray.mkdir()
    (stray / "readme.md").write_text("#\n")
    yield Case("input: a directory of one 2-byte readme.md", cli("o5", stray), (2,),
               r"\A(note: .*\n)?error: nothing to train on in .*readme\.md",
               check=lambda: "wrote an output set" if (root / "o5").exists() else None)  # fmt: skip
    parquet = importlib.util.find_spec("pyarrow") is not None
    if parquet:
        subprocess.run([sys.executable, "-c", textwrap.dedent(
            """
            import sys, pyarrow, pyarrow.parquet as parquet
            documents = [f"hello world {index}, the cat sat on the mat" for index in range(3000)]
            no_rows = pyarrow.table({"text": pyarrow.array([], pyarrow.string())})
            parquet.write_table(no_rows, sys.argv[1] + "/zero.parquet")
            parquet.write_table(pyarrow.table({"text": documents}), sys.argv[1] + "/plain.parquet")
            column = pyarrow.array(documents).dictionary_encode()
            parquet.write_table(pyarrow.table({"text": column}), sys.argv[1] + "/dictionary.parquet")
            data = bytearray(open(sys.argv[1] + "/plain.parquet", "rb").read())
            data[100:300] = bytes(byte ^ 0x5A for byte in data[100:300])
            open(sys.argv[1] + "/corrupt.parquet", "wb").write(bytes(data))
            """), str(root)], check=True)  # fmt: skip
        yield Case("input: zero-row Parquet", cli("o6", root / "zero.parquet"), (2,),
                   no_text.format(r"zero\.parquet"), memory_mb=4096)  # fmt: skip

    # Item 9: a FIFO in a -d directory is refused as when named
    with_fifo = root / "with-fifo"
    with_fifo.mkdir()
    (with_fifo / "a.txt").write_text("hello world\n")
    os.mkfifo(with_fifo / "pipe")
    fifo = r"\Aerror: training file .*with-fifo/pipe is not a regular file \(a FIFO, device or socket\)"
    yield Case("input: FIFO inside a -d directory", cli("o7", with_fifo), (2,), fifo)
    yield Case("input: FIFO matched by a -d glob", cli("o8", f"{with_fifo}/*"), (2,), fifo)
    yield Case("input: count-words, FIFO inside a directory", [*count_words, str(with_fifo), "-o",
               str(root / "c2.counts"), "-q"], (2,), fifo)  # fmt: skip

    # Item 12: a special token the text never holds, noted once
    noted = r"\Anote: special token '<\|eot\|>' never occurs in the training text \(a typo\?\)\Z"
    yield Case("input: --special '<|eot|>' on text of <|endoftext|>",
               cli("o9", corpus, options=("--special", "<|eot|>")), (0,), noted)  # fmt: skip

    # Item 4 and 10: reused buffers, records, bytes paths, Parquet
    yield Case("input: one bytearray refilled for every document (every trainer)", script(
        """
        import sys
        from cs336_basics import TRAINERS, train_bpe_from_iterator, trainer_status
        documents = ["hello world, the cat sat", "on the mat with a hat", "low lower lowest newest"] * 40
        def refilled():
            buffer = bytearray()
            for document in documents:
                buffer[:] = document.encode()
                yield buffer
        for name in TRAINERS:
            if trainer_status()[name].available:
                for specials in (["<|endoftext|>"], []):
                    expected = train_bpe_from_iterator(documents, 300, specials, trainer=name)
                    if train_bpe_from_iterator(refilled(), 300, specials, trainer=name) != expected:
                        sys.exit(f"{name} {specials}: other merges from the reused buffer")
        """), (0,), r"\A\Z")  # fmt: skip
    yield Case("input: records with text_field (Python)", script(
        """
        import sys
        from cs336_basics import train_bpe_from_iterator
        documents = ["hello world, the cat sat", "on the mat with a hat"] * 40
        records = [{"id": index, "text": document} for index, document in enumerate(documents)]
        same = train_bpe_from_iterator(records, 280, ["<|endoftext|>"], text_field="text") == \\
            train_bpe_from_iterator(documents, 280, ["<|endoftext|>"])
        sys.exit(0 if same else "records give other merges")
        """), (0,), r"\A\Z")  # fmt: skip
    yield Case("input: train_bpe(b'/path') (Python)", python_api(f"from cs336_basics import train_bpe; "
               f"train_bpe({os.fsencode(corpus)!r}, 300, ['<|endoftext|>'])"), (1,),
               r"\Ainput_path must be a path as str or os\.PathLike, not bytes")  # fmt: skip
    if parquet:
        yield Case("input: corrupt Parquet", cli("o10", root / "corrupt.parquet"), (2,),
                   r"\Aerror: .*corrupt\.parquet: cannot read Parquet row group 0 \(column 'text'\): \S",
                   memory_mb=4096)  # fmt: skip
        yield Case("input: dictionary-encoded Parquet column", script(
            f"""
            import sys
            from cs336_basics import train_bpe
            same = train_bpe({str(root / "dictionary.parquet")!r}, 300, ["<|endoftext|>"]) == \\
                train_bpe({str(root / "plain.parquet")!r}, 300, ["<|endoftext|>"])
            sys.exit(0 if same else "the dictionary-encoded column gives other merges")
            """), (0,), r"\A\Z", memory_mb=4096)  # fmt: skip

    # URL inputs: missing, unknown protocol, empty, and memory:// as the local file (in one process)
    yield Case("input: URL that does not exist", cli("o11", f"file://{root}/missing.txt"), (2,),
               r"\Aerror: training file not found: file://.*missing\.txt\Z")  # fmt: skip
    unknown = r"\Aerror: .*Protocol not known: nosuchprotocol; give a local path or a URL"
    yield Case("input: URL of an unknown protocol", [*count_words, "nosuchprotocol://bucket/a.txt", "-o",
               str(root / "c3.counts"), "-q"], (2,), unknown)  # fmt: skip
    if importlib.util.find_spec("fsspec") is not None:
        yield Case("input: memory:// URL trains as the local file", script(
            f"""
            import sys, fsspec
            from cs336_basics.commands.cli import main
            data = open({str(corpus)!r}, "rb").read()
            fsspec.filesystem("memory").pipe("/reading/corpus.txt", data)
            fsspec.filesystem("memory").pipe("/reading/empty.txt", b"")
            for name, source in (("url", "memory:///reading/corpus.txt"), ("file", {str(corpus)!r})):
                if main(["bpe_v2", {str(root)!r} + "/o12-" + name, "-d", source, "-v", "300", "-q"]) != 0:
                    sys.exit(name + " failed")
            read = lambda name: open({str(root)!r} + "/o12-" + name + "/merges.txt").read()
            if read("url") != read("file"):
                sys.exit("the URL gives other merges")
            sys.exit(main(["bpe_v2", {str(root)!r} + "/o13", "-d", "memory:///reading/empty.txt", "-q"]))
            """), (2,), r"\Aerror: training file holds no text: memory:///reading/empty\.txt")  # fmt: skip


def tool_cases(work: Path, full: bool) -> Iterator[Case]:
    """The tools besides training on hostile input: --export, cs336-swap-in and cs336-bpe-report (issue 40,
    items 8, 11 and parts of 10, and the commands the first sweep did not reach)."""
    small = words_corpus(work / "tools-small.txt", 20_000, seed=3)
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    def train(out: Path, *options: str) -> dict[str, bytes]:
        command = [sys.executable, "-c", CLI, "bpe_v2", str(out), "-d", str(small), "-v", "400", "-q", *options]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=environment)
        return outputs(out)

    def cli_args(out: Path, data: Path, *options: str) -> list[str]:
        return ["-c", CLI, "bpe_v2", str(out), "-d", str(data), "-v", "300", "-q", *options]

    # Item 8: --task-mb within what --help says (0 meant the default, 99999 was taken)
    count_words = ["-m", "cs336_basics.commands.count_cli", str(small), "-q"]
    for task_mb in ("0", "99999", "-3"):
        yield Case(f"count-words --task-mb {task_mb}", [*count_words, "-o", str(work / "tools.counts"), "--task-mb",
                   task_mb], (2,), r"\Aerror: --task-mb must be from 1 to 4096")  # fmt: skip

    # Item 11: --workers reaches the merge loop; the child exits 3 when a loop ran on other threads
    counts = work / "tools-small.counts"
    subprocess.run([sys.executable, *count_words, "-o", str(counts)], check=True, stdout=subprocess.DEVNULL,
                   env=environment)  # fmt: skip
    merge_threads = textwrap.dedent(
        """
        import sys, types
        from cs336_basics import bpe_v7
        from cs336_basics.commands.cli import main
        seen, real_merge, real_cpp = [], bpe_v7.merge, bpe_v7._merge_cpp
        class Table:  # a native table's merge runs on its own threads, capped by num_threads
            def __init__(self, table):
                self.table = table
            def merge(self, *args, num_threads=None, **kwargs):
                own = self.table.num_threads
                seen[-1] = own if num_threads is None else min(own, num_threads)
                return self.table.merge(*args, num_threads=num_threads, **kwargs)
        def merge(word_counts, *args, **kwargs):
            seen.append(None)
            native = not isinstance(word_counts, dict)
            return real_merge(Table(word_counts) if native else word_counts, *args, **kwargs)
        def cpp_merge(*args, num_threads=1, **kwargs):
            seen[-1] = num_threads
            return real_cpp.merge(*args, num_threads=num_threads, **kwargs)
        bpe_v7.merge, bpe_v7._merge_cpp = merge, types.SimpleNamespace(merge=cpp_merge)
        status = main(sys.argv[1:])
        if status == 0 and seen != [1]:
            print(f"merge loops ran on {seen} threads, not [1]", file=sys.stderr)
            sys.exit(3)
        sys.exit(status)
        """
    )
    yield Case("--counts --workers 1: one merge thread", ["-c", merge_threads, "bpe_v7", str(work / "tool-o1"),
               "--counts", str(counts), "-v", "300", "-q", "--workers", "1"], (0,), needs="bpe_v7")  # fmt: skip
    yield Case("--cluster local:1 --workers 1: one merge thread", ["-c", merge_threads, "bpe_v7", str(work / "tool-o2"),
               "-d", str(small), "--cluster", "local:1", "-v", "300", "-q", "--workers", "1"], (0,), fast=False,
               needs="bpe_v7", memory_mb=4096)  # fmt: skip

    # Item 10 (parts): the tokenizer's messages
    base = work / "tools-base"
    train(base)
    vocab, merges = str(base / "vocab.json"), str(base / "merges.txt")
    fifo = work / "tools-vocab-fifo.json"
    os.mkfifo(fifo)
    oversized = work / "tools-oversized-vocab.json"
    with open(oversized, "wb") as file:
        file.truncate((256 << 20) + 1)  # sparse
    for name, path, message in (
        ("/dev/zero", "/dev/zero", "not a regular file"),
        ("a FIFO", str(fifo), "not a regular file"),
        ("a file over 256 MiB", str(oversized), "larger than a tokenizer file may be"),
    ):
        load = f"from cs336_basics import Tokenizer; Tokenizer.from_files({path!r}, {merges!r})"
        yield Case(f"Tokenizer.from_files of {name} (Python)", python_api(load), (1,), message)
    tokenizer = f"from cs336_basics import Tokenizer; t = Tokenizer.from_files({vocab!r}, {merges!r})"
    yield Case("native_cache_slots=2**62 (Python)", python_api(f"{tokenizer}; Tokenizer(t.vocab, t.merges, "
               "native_cache_slots=2**62)"), (1,), r"native_cache_slots must be at most")  # fmt: skip
    yield Case("encode_batch(num_threads=-99) (Python)", python_api(f"{tokenizer}; t.encode_batch(['a'], "
               "num_threads=-99)"), (1,), "num_threads=-99 leaves no core")  # fmt: skip
    ids = work / "tools-ids.bin"
    wrote_ids = lambda: None if ids.is_file() and ids.stat().st_size > 0 else "no ids written"  # noqa: E731
    yield Case("encode_file_to a path (Python)", python_api(f"{tokenizer}; t.encode_file_to({str(small)!r}, "
               f"{str(ids)!r})"), (0,), check=wrote_ids)  # fmt: skip
    text_out = f"open({str(work / 'tools-ids.txt')!r}, 'w')"
    yield Case("encode_file_to a text-mode file (Python)", python_api(f"{tokenizer}; t.encode_file_to("
               f"{str(small)!r}, {text_out})"), (1,), r"open it with open\(path, 'wb'\)")  # fmt: skip

    # --export: bad names, a taken target, a write that fails; never a half-written set
    exported = work / "tools-export"
    before = train(exported, "--export", "hf,tiktoken")
    yield Case("--export hf,bogus", cli_args(exported, small, "--export", "hf,bogus"), (2,),
               r"--export: unknown format\(s\) \['bogus'\]", check=unchanged(exported, before))  # fmt: skip
    taken = work / "tools-export-taken"
    taken_files = train(taken, "--export", "hf")
    (taken / "tokenizer.json").unlink()
    del taken_files["tokenizer.json"]
    (taken / "tokenizer.json").mkdir()
    yield Case("--export into a directory named tokenizer.json", cli_args(taken, small, "--export", "hf"), (2,),
               "a directory or special file has that name", check=unchanged(taken, taken_files))  # fmt: skip
    # The same run again: its core files fit under the limit, its tokenizer.json (vocabulary and merges) does not.
    largest_core = max(len(before[name]) for name in ("vocab.json", "merges.txt", "vocab.pkl", "merges.pkl"))
    limit = (largest_core + len(before["tokenizer.json"])) // 2
    if len(before["tokenizer.json"]) > largest_core + 64:
        yield Case("--export write failure (--fsize)", cli_args(exported, small, "--export", "hf", "-v", "400"), (1,),
                   r"\Aerror: File too large", file_size_bytes=limit,
                   check=unchanged(exported, before))  # fmt: skip

    # cs336-swap-in on hostile files: one line, exit 1, the student's file as it was
    swap = ["-m", "cs336_basics.commands.swap_in"]
    stub = '    """A stub."""\n    raise NotImplementedError\n'
    handout = (f"from __future__ import annotations\n\nimport os\n\n\ndef get_tokenizer(vocab, merges, "
               f"special_tokens=None):\n{stub}\n\ndef run_train_bpe(input_path, vocab_size, special_tokens, "
               f"**kwargs):\n{stub}")  # fmt: skip
    hostile: dict[str, tuple[Callable[[Path], None], str]] = {
        "over 4 MiB": (lambda path: os.truncate(path, (4 << 20) + 1), "too large for the handout's adapters.py"),
        "binary": (lambda path: path.write_bytes(bytes(range(256)) * 64), "not Python source text"),
        "not UTF-8": (lambda path: path.write_bytes(handout.replace("stub", "café").encode("latin-1")),
                      "not Python source text"),
        "nested 200,000 deep": (lambda path: path.write_text("x = " + "+".join(["a"] * 200_000) + "\n"),
                                "nested too deeply"),
        "a FIFO": (lambda path: os.mkfifo(path), "not a regular file"),
        "a link to /dev/zero": (lambda path: path.symlink_to("/dev/zero"), "not a regular file"),
        "a dangling link": (lambda path: path.symlink_to(path.parent / "gone.py"), "is a symbolic link to"),
        "code of your own": (lambda path: path.write_text(handout.replace("raise NotImplementedError", "return 1")),
                             "--force"),
    }  # fmt: skip
    for index, (name, (make, message)) in enumerate(hostile.items()):
        checkout = work / f"tools-swap-{index}"
        (checkout / "tests").mkdir(parents=True)
        path = checkout / "tests" / "adapters.py"
        if name == "over 4 MiB":
            path.write_bytes(b"")
        make(path)
        kept = outputs(checkout / "tests")
        yield Case(f"swap-in: adapters.py {name}", [*swap, str(checkout)], (1,), rf"\Aerror: .*{message}",
                   check=unchanged(checkout / "tests", kept))  # fmt: skip
    linked = work / "tools-swap-linked"
    (linked / "tests").mkdir(parents=True)
    (linked / "elsewhere.py").write_text(handout)
    (linked / "tests" / "adapters.py").symlink_to(linked / "elsewhere.py")

    def swapped_where_it_lives() -> str | None:
        if not (linked / "tests" / "adapters.py").is_symlink():
            return "the link was replaced by a file"
        swapped = "cs336_bpe" in (linked / "elsewhere.py").read_text()
        if not swapped or (linked / "elsewhere.py.orig").read_text() != handout:
            return "the linked file was not swapped in with its backup beside it"
        return None

    yield Case("swap-in: a symlinked adapters.py", [*swap, str(linked)], (0,), check=swapped_where_it_lives)

    # cs336-bpe-report on a bad directory: one line, exit 2
    report = ["-m", "cs336_basics.commands.report"]
    empty = work / "tools-report-empty"
    empty.mkdir()
    corrupt_run = work / "tools-report-corrupt-run"
    train(corrupt_run)
    (corrupt_run / "bpe_run.json").write_bytes(b"\xff not json")
    cut_vocab = work / "tools-report-cut-vocab"
    train(cut_vocab)
    (cut_vocab / "vocab.json").write_bytes((cut_vocab / "vocab.json").read_bytes()[:100])
    for name, directory, message in (
        ("missing", work / "tools-report-nowhere", "tokenizer directory not found"),
        ("empty", empty, "holds no tokenizer"),
        ("a file", small, "not a directory"),
        ("bpe_run.json corrupt", corrupt_run, r"bpe_run\.json is not UTF-8"),
        ("vocab.json cut short", cut_vocab, r"vocab\.json is shorter than"),
    ):
        kept = outputs(directory) if directory.is_dir() else {}
        check = unchanged(directory, kept) if directory.is_dir() else None
        yield Case(f"bpe-report on a directory {name}", [*report, str(directory), "--text", str(small), "-q"], (2,),
                   rf"\Aerror: .*{message}", check=check)  # fmt: skip


def run_and_signal_cases(work: Path, full: bool) -> Iterator[Case]:
    """Runs, interrupts, the output directory and Dask (hardened in issue 40)."""
    import importlib.util

    from cs336_basics.outputs.serialization import COMMIT_PREFIX, LOCK_FILE, STAGING_PREFIX, read_run_info
    from cs336_basics.tokenizer import Tokenizer

    # Runs `main` of the module argv[1] in the directory argv[2], with the arguments after them: what an
    # empty output path would write lands there, where the check looks.
    in_directory = (
        "import importlib, os, sys; os.chdir(sys.argv[2]); "
        "sys.exit(importlib.import_module(sys.argv[1]).main(sys.argv[3:]))"
    )

    # The training CLI, saying "ready" and waiting at a point of the final commit: after the whole save
    # ("saved"), or at the move of one file ("moving:NAME"), where the signals are held back.
    commit_point_child = textwrap.dedent(
        """
        import os, sys
        import cs336_basics.outputs.serialization as serialization
        from cs336_basics.commands.cli import main

        def wait_here():
            print("ready", flush=True)
            sys.stdin.readline()  # the sweep signals instead of answering

        point, argv = sys.argv[1], sys.argv[2:]
        if point == "saved":
            real_save = serialization.OutputDirectory.save
            def save(self, *args, **kwargs):
                written = real_save(self, *args, **kwargs)
                wait_here()
                return written
            serialization.OutputDirectory.save = save
        else:
            real_replace = os.replace
            def replace(source, target):
                if os.path.basename(target) == point.partition(":")[2]:
                    wait_here()
                return real_replace(source, target)
            serialization.os.replace = replace
        sys.exit(main(argv))
        """
    )

    # Two training runs into one directory (argv: CLI code, OUT, DATA), released at the same instant:
    # each waits for one byte of the same pipe. Exits 0 when one won and the other was refused in one
    # line, or both finished; else says what happened.
    two_runs_child = textwrap.dedent(
        """
        import os, subprocess, sys
        cli, out, data = sys.argv[1:4]
        read_end, write_end = os.pipe()
        wait = f"import os; os.read({read_end}, 1); "
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", wait + cli, "bpe_v2", out, "-d", data, "-q", "-v", size],
                pass_fds=(read_end,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )
            for size in ("300", "400")
        ]
        os.write(write_end, b"go")
        results = [(run.wait(), run.stderr.read()) for run in runs]
        codes = sorted(code for code, _ in results)
        refused = [err for code, err in results if code == 2]
        if codes not in ([0, 0], [0, 2]) or any("another run" not in err or err.count("\\n") != 1 for err in refused):
            sys.exit(f"unexpected: {results}")
        """
    )

    # Training on a local cluster (argv: PIDS MODE CLI-ARGS...): the run's process writes its workers'
    # pids to PIDS; the workers, inside their tasks, either say "ready" (MODE run: the sweep signals the
    # run's process) or, the first of them, send SIGINT to the whole process group as Ctrl-C in a terminal
    # does (MODE group). A script file: the workers import it again, and this checkout's package with it.
    cluster_signal_child = textwrap.dedent(
        """
        import os, signal, sys, time
        import cs336_basics.ingest.cluster as cluster
        from cs336_basics.commands.cli import main

        def count_then_signal(tasks, special_tokens, threads, storage_options, **options):
            if sys.argv[2] == "run":
                print("ready", flush=True)  # the workers write to the run's stdout
            else:
                try:
                    os.close(os.open(sys.argv[1] + ".sent", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    pass  # one Ctrl-C: a second one would end the run at once, by design
                else:
                    os.killpg(os.getpgid(0), signal.SIGINT)
            time.sleep(600)

        def with_pids(real):
            def count_plan_on_cluster(client, *args, **kwargs):
                with open(sys.argv[1], "w") as pids:
                    pids.write(" ".join(map(str, client.run(os.getpid).values())))
                return real(client, *args, count=count_then_signal, **kwargs)
            return count_plan_on_cluster

        if __name__ == "__main__":
            os.setpgid(0, 0)  # a process group of its own, as a shell gives a command: the workers join it
            cluster.count_plan_on_cluster = with_pids(cluster.count_plan_on_cluster)
            sys.exit(main(sys.argv[3:]))
        """
    )


    def _running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as status:
                return status.read().rpartition(")")[2].split()[0] != "Z"  # a zombie runs nothing
        except FileNotFoundError:
            return False

    corpus = words_corpus(work / "runs.txt", 20_000, seed=3)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}

    def train(out: Path, vocab_size: int) -> subprocess.CompletedProcess:
        command = [sys.executable, "-c", CLI, "bpe_v2", str(out), "-d", str(corpus), "-q", "-v", str(vocab_size)]
        return subprocess.run(command, capture_output=True, text=True, env=environment)

    def loads_whole(out: Path, vocab_sizes: tuple[int, ...], killed: bool = False) -> str | None:
        """What is wrong with the set in `out`: it must load, both pairs of files alike, as the set of
        one run of one of `vocab_sizes` that its bpe_run.json describes; nothing hidden left, but
        what a killed run leaves (its lock file, staging or commit directory) when `killed`."""
        try:
            run = read_run_info(out) or {}
            pairs = (("vocab.json", "merges.txt"), ("vocab.pkl", "merges.pkl"))
            loaded = [Tokenizer.from_files(out / vocab, out / merges) for vocab, merges in pairs]
        except Exception as error:  # whatever it is, the case was not handled
            return f"{out.name} does not load: {error}"
        if any((len(t.vocab), len(t.merges)) != (run.get("vocab_size"), run.get("num_merges")) for t in loaded):
            return f"{out.name}: the files do not match bpe_run.json"
        if run.get("vocab_size") not in vocab_sizes or loaded[0].vocab != loaded[1].vocab:
            return f"{out.name}: not the set of one run ({run.get('vocab_size')} tokens)"
        allowed = (LOCK_FILE, STAGING_PREFIX, COMMIT_PREFIX) if killed else ()
        hidden = [p.name for p in out.iterdir() if p.name.startswith(".") and not p.name.startswith(allowed)]
        return f"left {hidden}" if hidden else None

    # Item 6: an empty output path is refused, never the current directory
    here = work / "runs-cwd"
    here.mkdir()

    def nothing_written() -> str | None:
        return f"wrote into the current directory: {sorted(os.listdir(here))}" if os.listdir(here) else None

    for command, module, arguments, name in (
        ("cs336-train-bpe", "cs336_basics.commands.cli", ["bpe_v2", "", "-d", str(corpus), "-q"], "out_dir"),
        ("cs336-count-words", "cs336_basics.commands.count_cli", [str(corpus), "-o", "", "-q"], "-o/--output"),
        ("cs336-encode-dataset", "cs336_basics.commands.encode_cli", [str(corpus), "", "--tokenizer", str(work), "-q"],
         "out"),
    ):
        yield Case(f"{command} with an empty output path", ["-c", in_directory, module, str(here), *arguments], (2,),
                   rf"argument {name}: expected a path, got an empty one", check=nothing_written)  # fmt: skip

    # Item 2: a signal once the set is in place (after the save, or inside the final moves) is a success
    for point in ("saved", "moving:merges.pkl"):
        for signum in (signal.SIGINT, signal.SIGTERM):
            target = work / f"runs-late-{point.replace(':', '-')}-{signum}"
            train(target, 300)
            name = signal.Signals(signum).name
            yield Case(
                f"{name} once the set is in place ({point})",
                ["-c", commit_point_child, point, "bpe_v2", str(target), "-d", str(corpus), "-q", "-v", "400"],
                (0,),
                rf"\Anote: {name} came after the output was in place; the run is complete\Z",
                interrupt=signum,
                check=lambda target=target: loads_whole(target, (400,)),
            )

    # kill -9 inside the final moves: the directory loads one run's set, and the next run works
    for point in ("moving:bpe_run.json", "moving:merges.txt", "moving:merges.pkl"):
        target = work / f"runs-kill-{point.partition(':')[2]}"
        train(target, 300)

        def killed_check(target: Path = target) -> str | None:
            problem = loads_whole(target, (300, 400), killed=True)
            if problem:
                return problem
            after = train(target, 350)
            if after.returncode != 0:
                return f"the next run failed: {after.stderr.strip()}"
            return loads_whole(target, (350,))

        yield Case(
            f"kill -9 inside the final moves ({point})",
            ["-c", commit_point_child, point, "bpe_v2", str(target), "-d", str(corpus), "-q", "-v", "400"],
            (-signal.SIGKILL,),
            interrupt=signal.SIGKILL,
            check=killed_check,
        )

    # Two runs started in the same instant on one output directory
    together = work / "runs-together"
    yield Case("two runs started together into one directory", ["-c", two_runs_child, CLI, str(together),
               str(corpus)], (0,), r"\A\Z", check=lambda: loads_whole(together, (300, 400)))  # fmt: skip

    # Dask, slow: each case starts a local cluster of worker processes
    if importlib.util.find_spec("distributed") is None:
        return
    bad = work / "runs-bad.txt"
    bad.write_bytes(b"fine text " * 100 + b"\xff")
    message = r"\Aerror: \S*runs-bad\.txt: invalid UTF-8 at byte offset 1000\Z"
    for command, arguments in (
        ("cs336-count-words", ["-m", "cs336_basics.commands.count_cli", str(bad), "-o", str(work / "runs-bad.counts")]),
        ("cs336-train-bpe", ["-m", "cs336_basics.commands.cli", "bpe_v2", str(work / "runs-bad-out"), "-d", str(bad)]),
    ):
        yield Case(f"{command} --cluster local:2 on invalid UTF-8", [*arguments, "-q", "--cluster", "local:2"], (2,),
                   message, fast=False, memory_mb=8192)  # fmt: skip
    script = work / "runs_cluster_child.py"
    script.write_text(cluster_signal_child)
    for mode, signum, label in (("group", signal.SIGINT, "Ctrl-C to the process group"),
                                ("run", signal.SIGTERM, "SIGTERM to the run")):  # fmt: skip
        pids = work / f"runs-cluster-pids-{mode}"

        def no_worker_left(pids: Path = pids) -> str | None:
            workers = [int(pid) for pid in pids.read_text().split()]
            deadline = time.monotonic() + 10  # only catches a leak: the workers end well within a second
            while any(map(_running, workers)) and time.monotonic() < deadline:
                time.sleep(0.05)
            left = [pid for pid in workers if _running(pid)]
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            return f"workers {left} outlived the run" if left else None

        yield Case(
            f"--cluster local:2, {label} while counting",
            [str(script), str(pids), mode, "bpe_v2", str(work / f"runs-cluster-{mode}"), "-d", str(corpus), "-q",
             "--cluster", "local:2"],  # fmt: skip
            (128 + signum,),
            r"\Ainterrupted\Z",
            fast=False,
            memory_mb=8192,
            interrupt=None if mode == "group" else signum,
            check=no_worker_left,
        )


def start_from_base_cases(work: Path, full: bool) -> Iterator[Case]:
    """Bases (--start-from; hardened in issue 51, items 7, 8 and 10): a base whose ids cannot all be kept is refused
    when read, naming the token and the ids; start_from values that are no base are named; the report's
    exit status is REPORT.md's; the note on a missing special token is shown only on a near miss."""
    from cs336_basics.outputs.export import hf_tokenizer_json, save_tiktoken_ranks

    root = work / "base-ids"
    root.mkdir()
    text = root / "text.txt"
    text.write_text("the cat sat on the mat, a bat and a hat\n" * 200)
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    base = root / "base"
    subprocess.run([sys.executable, "-c", CLI, "bpe_v2", str(base), "-d", str(text), "-v", "280", "-q"], check=True,
                   stdout=subprocess.DEVNULL, env=environment)  # fmt: skip
    vocab = pickle.loads((base / "vocab.pkl").read_bytes())
    merges = pickle.loads((base / "merges.pkl").read_bytes())

    def cli(out: str, *start_from: str, data: Path = text, options: tuple[str, ...] = ()) -> list[str]:
        return ["-c", CLI, "bpe_v2", str(root / out), "-d", str(data), "-v", "300", "-q", *options,
                "--start-from", *start_from]  # fmt: skip

    def nothing_in(out: str) -> Callable[[], str | None]:
        return lambda: "wrote an output set" if (root / out).exists() else None

    # Item 7: an HF added token at the byte a's id; a rank file listing a token twice; an id past 2**32 - 2
    document = hf_tokenizer_json(vocab, merges, ["<|endoftext|>"])
    document["added_tokens"][0]["id"] = 97
    del document["model"]["vocab"]["<|endoftext|>"]
    (root / "clash.json").write_text(json.dumps(document))
    yield Case("base: tokenizer.json's special token at the id of b'a'", cli("o1", str(root / "clash.json")), (2,),
               r"\Aerror: start_from: .*clash\.json: the added token '<\|endoftext\|>' has id 97, which b'a' has too",
               check=nothing_in("o1"))  # fmt: skip
    ranks = root / "twice.tiktoken"
    save_tiktoken_ranks(ranks, {token_id: token for token_id, token in vocab.items() if token != b"<|endoftext|>"})
    lines = ranks.read_text().splitlines(keepends=True)
    token, last = lines[-1].split()
    ranks.write_text("".join(lines) + f"{token} {int(last) + 1}\n")
    yield Case("base: a rank file listing a token twice", cli("o2", str(ranks)), (2,),
               rf"\Aerror: .*twice\.tiktoken:{len(lines) + 1}: the token b'.*' is listed twice, at ranks "
               rf"{last} and {int(last) + 1}", check=nothing_in("o2"))  # fmt: skip
    far = root / "far"
    far.mkdir()
    moved = {token_id: token for token_id, token in vocab.items() if token != b"<|endoftext|>"}
    moved[2**40] = b"<|endoftext|>"
    (far / "vocab.pkl").write_bytes(pickle.dumps(moved))
    (far / "merges.pkl").write_bytes(pickle.dumps(merges))
    yield Case("base: a base token at id 2**40", cli("o3", str(far / "vocab.pkl"), str(far / "merges.pkl")), (2,),
               r"\Aerror: .*: the token b'<\|endoftext\|>' is at id 1,099,511,627,776, past the largest id a "
               r"tokenizer may hold \(4,294,967,294, 2\*\*32 - 2\)", check=nothing_in("o3"))  # fmt: skip

    # Item 8: an empty path, a device, a value of another type, the report's -o under /proc
    yield Case("base: --start-from ''", cli("o4", ""), (2,), r"\Aerror: start_from: the path is empty\b",
               check=nothing_in("o4"))  # fmt: skip
    yield Case("base: --start-from /dev/zero", cli("o5", "/dev/zero"), (2,),
               r"\Aerror: start_from: /dev/zero is not a tokenizer file: not a regular file")  # fmt: skip
    yield Case("base: start_from=([1], []) (Python)", python_api(
               f"from cs336_basics import train_bpe; train_bpe({str(text)!r}, 300, [], start_from=([1], []))"), (1,),
               r"\Astart_from must be \(vocab, merges\) .*; got \(list, list\)\Z")  # fmt: skip
    if Path("/proc/self").is_dir():
        report = ["-m", "cs336_basics.commands.report", str(base), "--text", str(text), "-o", "/proc/rp", "-q"]
        yield Case("base: cs336-bpe-report -o /proc/rp", report, (2,),
                   r"\Aerror: cannot write to output directory /proc/rp")  # fmt: skip

    # Item 10: no note for <|endoftext|> on text without anything like it; a note on a near miss
    plain = root / "plain.txt"
    plain.write_text("if a < b | c > d: the cat sat\n" * 200)
    near = root / "near.txt"
    near.write_text("the cat sat.\n<|EndOfText|>\na bat and a hat\n" * 200)
    special = ("--special", "<|endoftext|>")
    yield Case("base: <|endoftext|> on text without it, no note",
               ["-c", CLI, "bpe_v2", str(root / "o6"), "-d", str(plain), "-v", "300", "-q", *special], (0,), r"\A\Z")
    yield Case("base: <|endoftext|> on text of <|EndOfText|>, noted",
               ["-c", CLI, "bpe_v2", str(root / "o7"), "-d", str(near), "-v", "300", "-q", *special], (0,),
               r"\Anote: special token '<\|endoftext\|>' never occurs in the training text \(a typo\?\)\Z")


def option_edge_cases(work: Path, full: bool) -> Iterator[Case]:
    """Options at their edges (hardened in issue 51, items 2, 4 and 6): no traceback at the new surfaces, no
    silent or late failure, and a run's own output that always loads."""
    root = work / "option-edges"
    root.mkdir()
    corpus = words_corpus(root / "corpus.txt", 20_000, seed=4)

    def cli(out: str, *options: str, data: Path = corpus) -> list[str]:
        return ["-c", CLI, "auto", str(root / out), "-d", str(data), "-q", *options]  # the fastest here

    # Item 4: limits too large for the C++ loop, a base nested too deeply, signals as a cluster starts
    for option in ("--min-frequency", "--max-token-length"):
        yield Case(f"options: {option} 10**23", cli(f"o-{option}", option, str(10**23)), (2,),
                   rf"argument {option}: expected a whole number up to 2\*\*63 - 1")  # fmt: skip
    nested = root / "nested.json"
    nested.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    yield Case("options: --start-from a tokenizer.json nested 100,000 deep", cli("o-nested", "--start-from",
               str(nested)), (2,), r"\Aerror: start_from: cannot read .*nested\.json .*nested too deeply")  # fmt: skip

    # Item 2: a run's own output loads, whatever its tokens' size (the 64 MB run of one letter, scaled
    # down by lowering the limit a tokenizer file may hold), and the run says so before writing
    huge_out = root / "o-huge"
    huge_word = textwrap.dedent(
        f"""
        import sys
        import cs336_basics.outputs.serialization as serialization
        from cs336_basics import Tokenizer
        from cs336_basics.commands.cli import main
        serialization.MAX_TOKENIZER_FILE_BYTES = 64 << 10
        open({str(root / "run.txt")!r}, "wb").write(b"a" * 64_000)
        code = main(["bpe_v2", {str(huge_out)!r}, "-d", {str(root / "run.txt")!r}, "-q", "-v", "300", "--special"])
        for vocab, merges in (("vocab.json", "merges.txt"), ("vocab.pkl", "merges.pkl")):
            Tokenizer.from_files({str(huge_out)!r} + "/" + vocab, {str(huge_out)!r} + "/" + merges)
        sys.exit(code)
        """
    )
    yield Case("options: a run of one letter writes files past the limit, which load", ["-c", huge_word], (0,),
               r"\Anote: the vocabulary's tokens total 0\.\d MB, the longest 0\.\d MB .* loads only beside the "
               r"bpe_run\.json written with it\Z")  # fmt: skip

    # Item 6: silent or late: an undeclared <|endoftext|>, a pattern that is not UTF-8, the real reason
    # a minimum frequency stopped the run (for every size it cut short)
    plain = root / "plain"
    subprocess.run([sys.executable, "-c", CLI, "bpe_v2", str(plain), "-d", str(corpus), "-q", "-v", "300",
                    "--special"], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})  # fmt: skip
    yield Case("options: encoding text of <|endoftext|> it does not declare", [*ENCODE, str(corpus),
               str(root / "ids.npy"), "--tokenizer", str(plain), "-q"], (0,),
               r"\Anote: '<\|endoftext\|>' \(\d+ ids\) occurs in the text but is not a special token here.* "
               r"pass --special-token '<\|endoftext\|>'")  # fmt: skip
    yield Case("options: --pattern $'\\xff|\\w+'", cli("o-pattern", "--pattern", os.fsdecode(b"\xff|\\w+")), (2,),
               r"argument --pattern: not valid UTF-8 text")  # fmt: skip
    yield Case("options: --min-frequency above every count", cli("o-minfreq", "-v", "300", "--min-frequency",
               "10000000"), (2,), r"error: no merge made from .*: no pair reaches the minimum frequency "
               r"10,000,000 \(--min-frequency 10000000\)\Z")  # fmt: skip
    # The summary (stdout) must say which size stopped short, where, and why: checked inside the child.
    cut_short = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from cs336_basics.commands.cli import main
        out = {str(root / "o-cut-short")!r}
        summary = io.StringIO()
        with contextlib.redirect_stdout(summary):
            code = main(["bpe_v2", out, "-d", {str(corpus)!r}, "-q", "-v", "300,2000", "--min-frequency", "20"])
        tokens = len(json.load(open(out + "/v2000/vocab.json")))
        note = (f"note          v2000/ stopped at {{tokens:,}} tokens, short of 2,000: no pair left reaches the "
                "minimum frequency 20 (--min-frequency 20)")
        sys.exit(code if code else None if note in summary.getvalue().splitlines() else "no such note: " + note)
        """
    )
    yield Case("options: -v 300,2000 --min-frequency 20 notes v2000/ and why", ["-c", cut_short], (0,), r"\A\Z")

    if importlib.util.find_spec("distributed") is not None:
        # The run's process says "ready" (on stdout) at one moment of a local cluster's first seconds: as
        # the first worker process is spawned, or as the cluster closes after counting, holding Dask's
        # loop there until the signal has arrived (where Dask's exit handler used to close it for 10 s).
        # Not held while the workers start: the main thread, waiting on Dask, sees a signal another
        # thread received only once the start is done.
        moment_child = root / "cluster_moment.py"
        moment_child.write_text(textwrap.dedent(
            """
            import sys, threading
            if __name__ == "__main__":
                import distributed.deploy.spec as spec, distributed.process as process
                from cs336_basics.commands import command_line
                from cs336_basics.commands.cli import main

                arrived, told = threading.Event(), []
                real_handle = command_line.InterruptHandling._handle
                def handle(self, signum, frame):
                    arrived.set()
                    return real_handle(self, signum, frame)
                command_line.InterruptHandling._handle = handle

                def ready(hold=True):
                    if not told:
                        told.append(True)
                        print("ready", flush=True)
                        if hold:
                            arrived.wait(60)

                if sys.argv[1] == "spawned":
                    real_start = process.AsyncProcess.start
                    def start(self):
                        future = real_start(self)
                        future.add_done_callback(lambda _: ready(hold=False))
                        return future
                    process.AsyncProcess.start = start
                else:
                    real_close = spec.SpecCluster._close
                    async def close(self):
                        ready()
                        return await real_close(self)
                    spec.SpecCluster._close = close
                sys.exit(main(sys.argv[2:]))
            """))  # fmt: skip
        for moment in ("spawned", "closing"):
            for signum in (signal.SIGINT, signal.SIGTERM):
                yield Case(
                    f"options: {signal.Signals(signum).name} as a local cluster's workers are {moment}",
                    [str(moment_child), moment, "bpe_v2", str(root / f"o-cluster-{moment}-{signum}"), "-d",
                     str(corpus), "-q", "-v", "300", "--cluster", "local:2"],  # fmt: skip
                    (128 + signum,),
                    r"\Ainterrupted\Z",
                    fast=False,
                    memory_mb=8192,
                    interrupt=signum,
                )


def custom_pattern_cases(work: Path, full: bool) -> Iterator[Case]:
    """Custom patterns (hardened in issue 51, items 1, 3, 5): text a pattern leaves unmatched
    is noted at training and kept by encoding; an export that HF or tiktoken could not read is refused
    before training, naming the construct, and one that can be translated loads; a runaway regex is
    bounded with a message naming it, and Ctrl-C still stops it."""
    root = work / "custom-pattern"
    root.mkdir()
    corpus = root / "corpus.txt"
    corpus.write_text("hello, World 42! the cat sat on the mat<|endoftext|>low lower lowest\n" * 200)

    def cli(out: str, pattern: str, *options: str) -> list[str]:
        return ["-c", CLI, "bpe_v2", str(root / out), "-d", str(corpus), "-v", "300", "-q", "--pattern", pattern,
                "--special", "<|endoftext|>", *options]  # fmt: skip

    def script(code: str) -> list[str]:
        return ["-c", textwrap.dedent(code)]

    def nothing_written(out: str) -> Callable[[], str | None]:
        return lambda: "wrote an output set" if (root / out / "vocab.json").exists() else None

    # Item 1: unmatched text noted, then encoded and decoded whole (the dataset encoder too)
    yield Case("pattern: --pattern '[a-z]+' notes the text it leaves unmatched", cli("p1", "[a-z]+"), (0,),
               r"(\A|\n)note: pattern '\[a-z\]\+' matches no part of [\d,]+ bytes \(\d+\.\d%\)")  # fmt: skip
    yield Case("pattern: a '[a-z]+' run encodes and decodes every character", script(
        f"""
        import subprocess, sys, numpy
        from cs336_basics import Tokenizer
        run, data, ids = {str(root / "p2")!r}, {str(corpus)!r}, {str(root / "p2.npy")!r}
        subprocess.run([sys.executable, "-c", {CLI!r}, "bpe_v2", run, "-d", data, "-v", "300", "-q",
                        "--pattern", "[a-z]+", "--special", "<|endoftext|>"], check=True, capture_output=True)
        tokenizer = Tokenizer.from_files(run + "/vocab.json", run + "/merges.txt")
        text = "hello, World 42! <|endoftext|> ünï 😀"
        assert tokenizer.decode(tokenizer.encode(text)) == text
        subprocess.run([sys.executable, "-m", "cs336_basics.commands.encode_cli", data, ids, "--tokenizer", run, "-q"],
                       check=True)
        assert tokenizer.decode(numpy.load(ids).tolist()) == open(data, encoding="utf-8").read()
        """), (0,))  # fmt: skip

    # Item 3: exports HF or tiktoken cannot read are refused before training; named groups and (?s) load
    yield Case("pattern: \\X at --export tiktoken", cli("p3", r"\X", "--export", "tiktoken"), (2,),
               r"\Aerror: cannot export pattern '\\X' to tiktoken: it has the grapheme cluster \\X",
               check=nothing_written("p3"))  # fmt: skip
    yield Case("pattern: (?x) at --export hf", cli("p4", r"(?x) \w+ | .", "--export", "hf"), (2,),
               r"\Aerror: cannot export pattern .* to HF tokenizers: it has the inline flag VERBOSE \(\?x\)",
               check=nothing_written("p4"))  # fmt: skip
    if importlib.util.find_spec("tokenizers") is not None:
        yield Case("pattern: named groups and (?s) export for HF", script(
            f"""
            import subprocess, sys, tokenizers
            from cs336_basics import Tokenizer
            run = {str(root / "p5")!r}
            subprocess.run([sys.executable, "-c", {CLI!r}, "bpe_v2", run, "-d", {str(corpus)!r}, "-v", "300", "-q",
                            "--pattern", r"(?s)(?P<w>\\p{{L}}+)|(?P<n>\\p{{N}})|.", "--export", "hf"], check=True)
            text = "hello, World 42!\\n\\n ok"
            ours = Tokenizer.from_files(run + "/vocab.json", run + "/merges.txt").encode(text)
            assert tokenizers.Tokenizer.from_file(run + "/tokenizer.json").encode(text).ids == ours
            """), (0,))  # fmt: skip

    # Item 5: a runaway regex is bounded, named, and interruptible
    runaway = root / "runaway.txt"
    runaway.write_text("a" * 40_000 + "!")
    bounded = "import os; os.environ['CS336_REGEX_TIMEOUT'] = '0.01'; "
    yield Case("pattern: runaway regex in Tokenizer.encode", python_api(
        bounded + "from cs336_basics import Tokenizer; "
        "Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern='(a+)+$|.').encode('a' * 40_000 + '!')"),
        (1,), r"\Apattern '\(a\+\)\+\$\|\.' ran past its time bound")  # fmt: skip
    yield Case("pattern: runaway regex in training", ["-c", bounded + CLI, "bpe_v1", str(root / "p6"), "-d",
               str(runaway), "-v", "260", "-q", "--pattern", "(a+)+$|."], (2,),
               r"\Aerror: pattern '\(a\+\)\+\$\|\.' ran past its time bound")  # fmt: skip
    yield Case("pattern: Ctrl-C during a runaway encode", script(
        """
        import sys
        from cs336_basics import Tokenizer
        tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], pattern="(a+)+$|.")
        try:
            print("ready", flush=True)  # inside: the signal may come before the encode starts
            tokenizer.encode("a" * 40_000 + "!")
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            sys.exit(130)
        """), (130,), r"\Ainterrupted\Z", interrupt=signal.SIGINT)  # fmt: skip


def build_cases(work: Path, full: bool) -> Iterator[Case]:
    small = words_corpus(work / "small.txt", 20_000)
    def train_quietly(out: Path, vocab_size: int = 400) -> dict[str, bytes]:
        command = [sys.executable, "-c", CLI, "bpe_v2", str(out), "-d", str(small), "-v", str(vocab_size), "-q"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        return outputs(out)

    base = work / "base"
    base_files = train_quietly(base)

    def cli(out: Path | str, *options: str, trainer: str = "bpe_v2", data: Path | None = small) -> list[str]:
        return ["-c", CLI, trainer, str(out), *(["-d", str(data)] if data else []), "-q", *options]

    def encode(vocab: Path, merges: Path, data: Path = small) -> list[str]:
        return [*ENCODE, str(data), str(work / "ids.npy"), "--vocab", str(vocab), "--merges", str(merges), "-q"]

    # Bad input, refused before any work
    yield Case("missing data file", cli(work / "o1", data=work / "nope.txt"), (2,), "nope.txt")
    (work / "empty.txt").write_bytes(b"")
    yield Case("empty file", cli(work / "o2", data=work / "empty.txt"), (2,), "empty")
    # A directory is read as its files; these include pickles, refused naming the file they are in.
    yield Case("directory as data", cli(work / "o3", data=work), (2,), r"\.pkl: .*invalid UTF-8 at byte offset \d")
    os.mkfifo(work / "fifo")
    yield Case("FIFO as data", cli(work / "o4", data=work / "fifo"), (2,), "not a regular file")
    yield Case("/dev/zero as data", cli(work / "o5", data=Path("/dev/zero")), (2,), "not a regular file")
    yield Case("/proc file as data", cli(work / "o6", data=Path("/proc/self/status")), (2,), "not a regular file")
    (work / "bad.txt").write_bytes(b"fine text " * 100 + b"\xff")
    yield Case("invalid UTF-8", cli(work / "o7", data=work / "bad.txt"), (2,), "byte offset 1000")
    (work / "data.txt.gz").write_bytes(gzip.compress(small.read_bytes()))
    yield Case(".gz input, streamed", cli(work / "o8", data=work / "data.txt.gz"), (0,))
    (work / "fake.txt.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"not a zstd frame" * 4)
    yield Case("damaged .zst input", cli(work / "o8z", data=work / "fake.txt.zst"), (2,), r"fake\.txt\.zst")
    if os.geteuid() != 0:
        locked = work / "locked.txt"
        locked.write_text("text")
        locked.chmod(0)
        yield Case("unreadable input", cli(work / "o9", data=locked), (2,), "Permission denied")
    yield Case("-v 10**23", cli(work / "o10", "-v", str(10**23)), (2,), "too large")
    yield Case("-v 255", cli(work / "o11", "-v", "255"), (2,), "too small")
    yield Case("--workers 0", cli(work / "o12", "--workers", "0"), (2,), "--workers must not be 0")
    yield Case("--workers -99", cli(work / "o13", "--workers", "-99"), (2,), "leaves no core")
    for trainer in ("bpe_v3", "bpe_v7"):
        for workers in ("1000000", str(2**31)):
            yield Case(
                f"{trainer} --workers {workers}",
                cli(work / f"o14-{trainer}-{workers}", "--workers", workers, "-v", "300", trainer=trainer),
                (0,),
                "capped at",
                needs=trainer,
            )
    surrogate = cli(work / "o15", "--special", "\udcff")  # reaches the child as the byte 0xff
    yield Case("special token with a lone surrogate", surrogate, (2,), "not valid Unicode")
    yield Case(
        "special_tokens as a plain string (Python)",
        python_api(f"from cs336_basics import train_bpe; train_bpe({str(small)!r}, 300, '<eos>')"),
        (1,),
        "wrap '<eos>' in a list",
    )
    yield Case(
        "decode a float id (Python)",
        python_api(
            "from cs336_basics import Tokenizer; Tokenizer({i: bytes([i]) for i in range(256)}, []).decode([1.5])"
        ),
        (1,),
        "token ids must be integers",
    )

    # Outputs
    taken = work / "taken"
    (taken / "vocab.json").mkdir(parents=True)
    yield Case("vocab.json is a directory", cli(taken), (2,), "vocab.json", check=unchanged(taken, {}))
    (work / "a-file").write_text("x")
    yield Case("output under a file", cli(work / "a-file" / "out"), (2,), "cannot write to output directory")
    for name, limit in (("write failure (--fsize)", len(base_files["vocab.json"]) - 1),):
        target = work / "fsize"
        train_quietly(target)
        yield Case(name, cli(target, "-v", "500"), (1,), "File too large", file_size_bytes=limit,
                   check=unchanged(target, outputs(target)))  # fmt: skip
    busy = work / "busy"
    yield Case("second run into a busy directory", cli(busy), (2,), "another run .* is writing to", check=None)
    for signum in (signal.SIGINT, signal.SIGTERM):
        target = work / f"signal-{signum}"
        train_quietly(target)
        yield Case(
            f"{signal.Signals(signum).name} during training",
            ["-c", SIGNAL_CHILD, "bpe_v2", str(target), "-d", str(small), "-v", "500", "-q"],
            (128 + signum,),
            r"\Ainterrupted\Z",
            interrupt=signum,
            check=unchanged(target, outputs(target)),
        )

    # Loading untrusted or damaged files (through cs336-encode-dataset)
    evil = work / "evil"
    evil.mkdir()
    marker = work / "code-ran"
    (evil / "vocab.pkl").write_bytes(pickle.dumps(RunsCommand(f"touch {marker}")))
    (evil / "merges.pkl").write_bytes(pickle.dumps([]))
    yield Case("crafted pickle", encode(evil / "vocab.pkl", evil / "merges.pkl"), (2,), "refused to load",
               check=lambda: "the pickle ran code" if marker.exists() else None)  # fmt: skip
    broken = work / "broken"
    broken.mkdir()
    (broken / "vocab.json").write_text('{"a": 0,')
    (broken / "merges.txt").write_text("")
    corrupt = encode(broken / "vocab.json", broken / "merges.txt")
    yield Case("corrupt vocab.json", corrupt, (2,), "vocab.json is not valid")
    cut = work / "cut"
    cut.mkdir()
    for name, data in base_files.items():
        (cut / name).write_bytes(data)
    lines = base_files["merges.txt"].splitlines(keepends=True)
    (cut / "merges.txt").write_bytes(b"".join(lines[: len(lines) // 2]))
    yield Case("merges.txt cut at a line end", encode(cut / "vocab.json", cut / "merges.txt"), (2,), "shorter than")
    mixed = work / "mixed"
    train_quietly(mixed, 300)
    (mixed / "merges.txt").write_bytes(base_files["merges.txt"])
    yield Case("files of two runs", encode(mixed / "vocab.json", mixed / "merges.txt"), (2,), "another run")
    yield Case("encoding a .gz", encode(base / "vocab.json", base / "merges.txt", work / "data.txt.gz"), (2,),
               "gunzip")  # fmt: skip

    # Links, locks, cluster addresses and count files (hardened in issue 23)
    shared = work / "shared-out"
    shared.mkdir()
    victim = work / "victim.txt"
    victim.write_text("precious\n")
    (shared / ".cs336_basics.lock").symlink_to(victim)
    intact = lambda: None if victim.read_text() == "precious\n" else "the link's target was written"  # noqa: E731
    yield Case("lock file a symlink to another file", cli(shared), (2,), "symbolic link", check=intact)
    loop = work / "loop.txt"
    loop.symlink_to(loop)
    yield Case("symlink loop as data", cli(work / "o30", data=loop), (2,), r"\Aerror: .*symbolic link loop")
    yield Case("--cluster ''", cli(work / "o31", "--cluster", ""), (2,), "--cluster")
    count_words = ["-m", "cs336_basics.commands.count_cli"]
    yield Case("invalid scheduler address", [*count_words, str(small), "-o", str(work / "c1.counts"), "-q",
               "--cluster", "tcp://no such host:1"], (2,), "not a scheduler address")  # fmt: skip
    yield Case("count-words write failure (--fsize)", [*count_words, str(small), "-o", str(work / "c2.counts"), "-q"],
               (1,), r"\Aerror: cannot write .*c2\.counts", file_size_bytes=1024)  # fmt: skip
    huge = work / "huge.counts"
    subprocess.run([sys.executable, "-c", "import sys; from cs336_basics.ingest.word_counts import WordCounts; "
                    "WordCounts({b'ab': 2**63}, ['<|endoftext|>']).save(sys.argv[1])", str(huge)],
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})  # fmt: skip
    yield Case("count of 2**63 in a count file", ["-c", CLI, "bpe_v2", str(work / "o32"), "--counts", str(huge), "-q"],
               (2,), r"huge\.counts.*64-bit")  # fmt: skip
    def nested(directory: Path) -> None:
        (directory / "bpe_run.json").write_text("[" * 100_000 + "]" * 100_000)

    def string_size(directory: Path) -> None:
        run = json.loads((directory / "bpe_run.json").read_text())
        run["files"]["vocab.json"]["bytes"] = str(run["files"]["vocab.json"]["bytes"])
        (directory / "bpe_run.json").write_text(json.dumps(run))

    def long_id(directory: Path) -> None:
        (directory / "bpe_run.json").unlink()
        (directory / "vocab.json").write_text('{"a": ' + "7" * 5001 + "}")

    def repeated_token(directory: Path) -> None:
        (directory / "bpe_run.json").unlink()
        text = (directory / "vocab.json").read_text()
        (directory / "vocab.json").write_text(text[: text.rindex("}")] + ',\n"a": 9999\n}')

    for name, damage in (
        ("bpe_run.json nested 100,000 deep", nested),
        ("bpe_run.json with a string size", string_size),
        ("vocab.json with a 5,001-digit id", long_id),
        ("vocab.json with a repeated token", repeated_token),
    ):
        damaged = work / name.replace(" ", "-").replace(",", "")
        damaged.mkdir()
        for file_name, data in base_files.items():
            (damaged / file_name).write_bytes(data)
        damage(damaged)
        refused = r"\Aerror: .*(vocab|bpe_run)\.json"
        yield Case(name, encode(damaged / "vocab.json", damaged / "merges.txt"), (2,), refused)

    # Memory and size limits
    big = words_corpus(work / "big.txt", (40 if full else 2) << 20, seed=1, fresh_words=0.3)
    one_line = work / "one_line.txt"
    one_line.write_text(big.read_text(encoding="utf-8").replace("\n", " "), encoding="utf-8")
    yield Case(
        "encode_iterable over one long line, 64 MB headroom",
        ["-c", LONG_LINE_CHILD, str(base / "vocab.json"), str(base / "merges.txt"), str(one_line)],
        (0,),
        fast=True,
    )
    repeated = work / "repeated.txt"
    repeated.write_bytes(b"a" * ((50 if full else 1) << 20))
    # Its tokens double up to the word's length: the vocabulary is 5 bytes a byte here, the run's peak 260 MB
    # (before: 28 bytes a byte, 1.4 GB, and minutes for 300 MB).
    yield Case("one huge pre-token", cli(work / "o20", "-v", "300", trainer="bpe_v7", data=repeated), (0,),
               needs="bpe_v7", memory_mb=640 if full else 256)  # fmt: skip
    # A team that would not fit under the address-space limit runs smaller (before: libgomp's
    # "Thread creation failed" ended the process).
    yield Case("bpe_v7 --workers 8 in 120 MB of address space", cli(work / "o22", "-v", "300", "--workers", "8",
               trainer="bpe_v7"), (0,), "room for no more", memory_mb=120, needs="bpe_v7")  # fmt: skip
    # The input shrinks while it is counted (a download still running): one line, exit 1 (before: SIGBUS).
    shrinking = work / "shrinking.txt"
    shrink = (
        "import os, shutil, sys, tqdm\n"
        "from cs336_basics.commands.cli import main\n"
        "shutil.copyfile(sys.argv[3], sys.argv[2])\n"
        "real = tqdm.tqdm.update\n"
        "def update(self, n=1):\n"
        "    if os.path.getsize(sys.argv[2]) > 5000:\n"
        "        os.truncate(sys.argv[2], 5000)\n"
        "    return real(self, n)\n"
        "tqdm.tqdm.update = update\n"
        "sys.exit(main(['bpe_v7', sys.argv[1], '-d', sys.argv[2], '-v', '300', '--workers', '1']))\n"
    )
    growing = words_corpus(work / "to_shrink.txt", 3_000_000)
    yield Case("input shrinks while counted", ["-c", shrink, str(work / "o23"), str(shrinking), str(growing)], (1,),
               r"changed while it was read\Z", needs="bpe_v7")  # fmt: skip
    if full:
        for megabytes in (200, 150):
            yield Case(
                f"bpe_v7 --workers 2 in {megabytes} MB of address space",
                cli(work / f"o21-{megabytes}", "-v", "1000", "--workers", "2", trainer="bpe_v7", data=big),
                (0, 1),
                r"\A\Z|\Aerror: out of memory",  # trained, or one line of ours
                fast=False,
                memory_mb=megabytes,
                needs="bpe_v7",
                notes="native: the lead's integration (ThreadCounts::add, libgomp)",
            )
    yield from reading_input_cases(work, full)
    yield from tool_cases(work, full)
    yield from run_and_signal_cases(work, full)
    yield from start_from_base_cases(work, full)
    yield from option_edge_cases(work, full)
    yield from custom_pattern_cases(work, full)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="only the quick cases (what CI runs)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per case (300)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args(argv)
    status = trainer_status()
    outcomes: list[Outcome] = []
    with contextlib.ExitStack() as stack:
        work = Path(tempfile.mkdtemp(prefix="cs336-fault-sweep-")) if args.keep else Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="cs336-fault-sweep-"))
        )
        for case in build_cases(work, full=not args.fast):
            if args.fast and not case.fast:
                continue
            if case.needs and not status[case.needs].available:
                print(f"skip  {case.name}: {status[case.needs].reason}")
                continue
            if case.name.startswith("second run"):
                with OutputDirectory(work / "busy"):  # this process holds the directory meanwhile
                    outcome = run_case(case, args.timeout)
            else:
                outcome = run_case(case, args.timeout)
            outcomes.append(outcome)
            mark = "ok  " if outcome.handled else "FAIL"
            print(f"{mark}  {case.name}: {outcome.detail} ({outcome.seconds:.1f} s)", flush=True)
            if not outcome.handled:
                if case.notes:
                    print(f"        ({case.notes})")
                for line in outcome.stderr_tail:
                    print(f"        {line}")
        if args.keep:
            print(f"kept {work}")
    failed = [outcome for outcome in outcomes if not outcome.handled]
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} cases handled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
