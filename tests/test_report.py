"""The tokenizer report (`cs336_basics.commands.report`): its numbers are checked against counts made here
independently (the pure-Python encoder, str.split, a reservoir sampler of our own), never timed."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_basics.commands import report
from cs336_basics.commands.cli import main as train_main
from cs336_basics.commands.report import escape_token, main, scan_documents
from cs336_basics.tokenizer import Tokenizer
from tests.support import REPO_ROOT

SEP = "<|endoftext|>"
ASCII_WHITESPACE = " \t\n\r\x0b\x0c"


def stories(count: int) -> str:
    animals = ["cat", "dog", "bird", "frog", "fox", "bear"]
    feelings = ["happy", "sad", "sleepy", "brave"]
    docs = [
        f"Once upon a time, Lily saw a {animals[i % 6]}. The {animals[i % 6]} was {feelings[i % 4]}. "
        f"They played all day, {i} times.\n"
        for i in range(count)
    ]
    return "\n" + f"\n{SEP}\n".join(docs) + f"\n{SEP}\n"  # a blank piece at each end


def web(count: int) -> str:
    docs = [
        f"The company reported revenue of ${i * 37 % 1000}.{i % 10} million in {1990 + i % 30}; "
        f"analysts (café, naïve, Zürich) expected {i * 13 % 97}% growth — “über” results.\n"
        for i in range(count)
    ]
    docs.insert(3, "  \n\t ")  # a document of whitespace only is no document
    return SEP.join(docs)


def documents_of(text: str) -> list[str]:
    return [piece for piece in text.split(SEP) if piece.strip(ASCII_WHITESPACE)]


def reservoir(items: list[str], size: int, seed: int) -> list[str]:
    """Algorithm R written out once more, to check the sample the report took."""
    rng = random.Random(seed)
    chosen: list[tuple[int, str]] = []
    for index, item in enumerate(items):
        if index < size:
            chosen.append((index, item))
        else:
            slot = rng.randrange(index + 1)
            if slot < size:
                chosen[slot] = (index, item)
    return [item for _, item in sorted(chosen)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report")
    paths = {"ts_text": root / "ts.txt", "owt_text": root / "owt.txt"}
    paths["ts_text"].write_text(stories(60), encoding="utf-8")
    paths["owt_text"].write_text(web(60), encoding="utf-8")
    for name, text in (("ts_tok", "ts_text"), ("owt_tok", "owt_text")):
        paths[name] = root / name
        assert train_main(["bpe_v2", str(paths[name]), "-d", str(paths[text]), "-v", "300", "-q"]) == 0
    return paths


@pytest.fixture
def workspace(setup: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """The trained directories copied, so that reports written into them stay within one test."""
    paths = dict(setup)
    for name in ("ts_tok", "owt_tok"):
        copy = tmp_path / name
        copy.mkdir()
        for file in setup[name].iterdir():
            if file.is_file() and not file.name.startswith((".", "report")):
                (copy / file.name).write_bytes(file.read_bytes())
        paths[name] = copy
    return paths


def reference(directory: Path) -> Tokenizer:
    return Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt", native=False)


def read_report(directory: Path) -> dict:
    return json.loads((directory / "report.json").read_text(encoding="utf-8"))


def counts_of(data: dict) -> list[list[tuple[int, int]]]:
    return [[(result["bytes"], result["tokens"]) for result in entry["results"]] for entry in data["tokenizers"]]


def check_vocabulary_summary(entry: dict, tokenizer: Tokenizer) -> None:
    specials = {token.encode() for token in tokenizer.special_tokens}
    learned = {token_id: token for token_id, token in tokenizer.vocab.items() if token not in specials}
    histogram = {int(length): count for length, count in entry["token_length_histogram"].items()}
    assert sum(histogram.values()) == len(learned)
    for length, count in histogram.items():
        assert count == sum(1 for token in learned.values() if len(token) == length)
    longest = entry["longest_tokens"]
    assert len(longest) == 10
    assert [token["bytes"] for token in longest] == sorted((token["bytes"] for token in longest), reverse=True)
    assert longest[0]["bytes"] == max(histogram)
    for token in longest:
        assert token["bytes"] == len(learned[token["id"]])
        assert token["text"] == escape_token(learned[token["id"]])
    assert entry["vocab_size"] == len(tokenizer.vocab)
    assert entry["special_tokens"] == [SEP]


def test_whole_texts_write_a_report_into_each_tokenizer_directory(
    workspace: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    texts = [workspace["ts_text"], workspace["owt_text"]]
    assert main([str(workspace["ts_tok"]), str(workspace["owt_tok"]), "--text", *map(str, texts), "-q"]) == 0
    out = capsys.readouterr().out
    for name in ("ts_tok", "owt_tok"):
        data = read_report(workspace[name])
        assert data["format"] == "cs336_bpe tokenizer report"
        assert data["settings"]["sample_docs"] is None and data["settings"]["separator"] == SEP
        assert [entry["name"] for entry in data["inputs"]] == ["ts.txt", "owt.txt"]
        (entry,) = data["tokenizers"]
        assert entry["name"] == name
        tokenizer = reference(workspace[name])
        check_vocabulary_summary(entry, tokenizer)
        assert [result["input"] for result in entry["results"]] == ["ts.txt", "owt.txt"]
        for result, path in zip(entry["results"], texts):
            text = path.read_text(encoding="utf-8")
            assert result["sampled"] is False
            assert result["bytes"] == path.stat().st_size
            assert result["tokens"] == len(tokenizer.encode(text))
            assert result["bytes_per_token"] == pytest.approx(result["bytes"] / result["tokens"])
            assert result["documents"] == result["documents_in_file"] == len(documents_of(text))
            assert result["mb_per_s"] > 0
            row = next(line for line in out.splitlines() if line.startswith(name) and f" {path.name} " in line)
            assert f"{result['bytes_per_token']:.3f}" in row
        leftovers = [file.name for file in workspace[name].iterdir() if file.name.endswith(".tmp")]
        assert leftovers == []
    table = out.splitlines()[:5]
    assert table[0].split() == ["tokenizer", "input", "documents", "bytes/token", "MB/s"]
    assert len({len(line) for line in table}) == 1  # the last column is right-aligned: the rows line up


def test_a_sample_is_the_reservoir_of_the_documents_and_one_combined_report(
    workspace: dict[str, Path], tmp_path: Path
) -> None:
    out_dir = tmp_path / "combined"
    texts = [workspace["ts_text"], workspace["owt_text"]]
    argv = [str(workspace["ts_tok"]), str(workspace["owt_tok"]), "--text", *map(str, texts)]
    assert main([*argv, "--sample-docs", "7", "--seed", "5", "-o", str(out_dir), "-q"]) == 0
    data = read_report(out_dir)
    assert not (workspace["ts_tok"] / "report.json").exists()  # --output: nothing in the tokenizer dirs
    assert [entry["name"] for entry in data["tokenizers"]] == ["ts_tok", "owt_tok"]
    assert data["settings"]["sample_docs"] == 7 and data["settings"]["seed"] == 5
    for entry in data["tokenizers"]:
        tokenizer = reference(Path(entry["path"]))
        for result, path in zip(entry["results"], texts):
            everything = documents_of(path.read_text(encoding="utf-8"))
            sample = reservoir(everything, 7, seed=5)
            assert result["sampled"] is True
            assert result["documents"] == 7 and result["documents_in_file"] == len(everything)
            assert result["bytes"] == sum(len(doc.encode()) for doc in sample)
            assert result["tokens"] == sum(len(tokenizer.encode(doc)) for doc in sample)
            assert result["bytes_per_token"] == pytest.approx(result["bytes"] / result["tokens"])

    # The same seed gives the same numbers; another seed, another sample (checked the same way).
    again = tmp_path / "again"
    assert main([*argv, "--sample-docs", "7", "--seed", "5", "-o", str(again), "-q"]) == 0
    assert counts_of(read_report(again)) == counts_of(data)
    other = tmp_path / "other"
    assert main([*argv, "--sample-docs", "7", "--seed", "6", "-o", str(other), "-q"]) == 0
    ts_docs = documents_of(texts[0].read_text(encoding="utf-8"))
    assert read_report(other)["tokenizers"][0]["results"][0]["bytes"] == sum(
        len(doc.encode()) for doc in reservoir(ts_docs, 7, seed=6)
    )


def test_a_sample_larger_than_the_text_takes_every_document(workspace: dict[str, Path], tmp_path: Path) -> None:
    argv = [str(workspace["ts_tok"]), "--text", str(workspace["owt_text"]), "--sample-docs", "1000"]
    assert main([*argv, "-o", str(tmp_path / "all"), "-q"]) == 0
    (result,) = read_report(tmp_path / "all")["tokenizers"][0]["results"]
    everything = documents_of(workspace["owt_text"].read_text(encoding="utf-8"))
    assert result["documents"] == len(everything) == 60
    assert result["bytes"] == sum(len(doc.encode()) for doc in everything)


@pytest.mark.parametrize("block", [1, 2, 5, 13, 64])
def test_scanning_does_not_depend_on_where_blocks_end(
    setup: dict[str, Path], monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Separators and multi-byte characters cut by a block's end are found all the same."""
    expected = scan_documents(setup["owt_text"], SEP, 9, seed=3)
    monkeypatch.setattr(report, "_SCAN_BLOCK_BYTES", block)
    assert scan_documents(setup["owt_text"], SEP, 9, seed=3) == expected
    assert scan_documents(setup["owt_text"], SEP)[0] == expected[0] == 60


@pytest.mark.parametrize("block", [1, 2, 3, 4, 1 << 22])
def test_invalid_utf8_is_found_at_its_offset_whatever_the_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes("caf\u00e9 \u20ac".encode() + b"\xe2\x82" + b"x")  # a character cut short at offset 9
    monkeypatch.setattr(report, "_SCAN_BLOCK_BYTES", block)
    with pytest.raises(report.BPEInputError, match="byte offset 9 "):
        scan_documents(path, SEP)


def test_scanning_a_text_without_separators(tmp_path: Path) -> None:
    path = tmp_path / "one.txt"
    path.write_text("a single document, no separator\n", encoding="utf-8")
    assert scan_documents(path, SEP, 3) == (1, [(0, path.stat().st_size)])
    path.write_text(" \n\n", encoding="utf-8")
    assert scan_documents(path, SEP, 3) == (0, [])


def test_another_separator_makes_other_documents(workspace: dict[str, Path], tmp_path: Path) -> None:
    argv = [str(workspace["ts_tok"]), "--text", str(workspace["ts_text"]), "--separator", "\n", "--sample-docs", "3"]
    assert main([*argv, "-o", str(tmp_path), "-q"]) == 0
    data = read_report(tmp_path)
    lines = [line for line in workspace["ts_text"].read_text(encoding="utf-8").split("\n") if line.strip()]
    assert data["settings"]["separator"] == "\n"
    assert data["inputs"][0]["documents"] == len(lines)
    (result,) = data["tokenizers"][0]["results"]
    assert result["bytes"] == sum(len(line.encode()) for line in reservoir(lines, 3, seed=0))


def test_the_picture_is_drawn_with_matplotlib(workspace: dict[str, Path], tmp_path: Path) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # not only "not installed": a broken install is as good as none for the report
        pytest.skip("matplotlib is not importable (pip install 'cs336-bpe[report]')")
    out_dir = tmp_path / "pictures"
    argv = [str(workspace["ts_tok"]), str(workspace["owt_tok"]), "--text", str(workspace["ts_text"])]
    assert main([*argv, "--text", str(workspace["owt_text"]), "-o", str(out_dir), "-q"]) == 0
    assert (out_dir / "report.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(file.name for file in out_dir.iterdir()) == ["report.json", "report.png"]


def test_without_matplotlib_the_json_is_written_and_one_line_says_why_no_picture(
    workspace: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)  # `import` now raises ImportError
    assert main([str(workspace["ts_tok"]), "--text", str(workspace["ts_text"]), "-q"]) == 0
    assert (workspace["ts_tok"] / "report.json").is_file()
    assert not (workspace["ts_tok"] / "report.png").exists()
    hints = [line for line in capsys.readouterr().err.splitlines() if "matplotlib" in line]
    assert hints == ['note: report.png needs matplotlib: pip install "cs336-bpe[report]"']


def test_progress_bars_do_not_change_the_report(workspace: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(workspace["ts_tok"]), "--text", str(workspace["ts_text"]), "--sample-docs", "4"]
    assert main(argv) == 0
    loud = read_report(workspace["ts_tok"])["tokenizers"][0]["results"]
    assert "scan ts.txt" in capsys.readouterr().err
    assert main([*argv, "-q"]) == 0
    quiet = read_report(workspace["ts_tok"])["tokenizers"][0]["results"]
    assert [(r["bytes"], r["tokens"]) for r in loud] == [(r["bytes"], r["tokens"]) for r in quiet]
    assert "scan" not in capsys.readouterr().err


def bad_inputs(workspace: dict[str, Path], tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    not_utf8 = tmp_path / "latin1.txt"
    not_utf8.write_bytes("caf\u00e9 ok\n".encode() + b"na\xefve\n")
    empty_dir = tmp_path / "empty_dir"
    empty_dir.mkdir()
    text = str(workspace["ts_text"])
    return {
        "missing directory": ([str(tmp_path / "nowhere"), "--text", text], "tokenizer directory not found"),
        "directory without a tokenizer": ([str(empty_dir), "--text", text], "holds no tokenizer"),
        "missing text": ([str(workspace["ts_tok"]), "--text", str(tmp_path / "absent.txt")], "not found"),
        "text is a directory": ([str(workspace["ts_tok"]), "--text", str(empty_dir)], "directory"),
        "text not UTF-8": ([str(workspace["ts_tok"]), "--text", text, str(not_utf8)], "latin1.txt: input is not"),
        "output is a file": ([str(workspace["ts_tok"]), "--text", text, "-o", text], "cannot write to output"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing directory",
        "directory without a tokenizer",
        "missing text",
        "text is a directory",
        "text not UTF-8",
        "output is a file",
    ],
)
def test_errors_are_one_line_and_exit_2_before_any_report(
    workspace: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    argv, expected = bad_inputs(workspace, tmp_path)[case]
    assert main([*argv, "-q"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], captured.err
    assert captured.out == ""
    assert not (workspace["ts_tok"] / "report.json").exists()


def test_errors_as_a_program_print_no_traceback(workspace: dict[str, Path], tmp_path: Path) -> None:
    not_utf8 = tmp_path / "bad.txt"
    not_utf8.write_bytes(b"\xff\xfe text")
    result = subprocess.run(
        [sys.executable, "-m", "cs336_basics.commands.report", str(workspace["ts_tok"]), "--text", str(not_utf8), "-q"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_exit_statuses_are_those_report_md_states(
    workspace: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An output directory that cannot be made (-o /proc/rp, a path under a file) is bad input, found
    before any text is encoded: 2, as in every command (docs/CLI.md); a report that fails as it is
    written (a full disk): 1."""
    argv = [str(workspace["ts_tok"]), "--text", str(workspace["ts_text"]), "-q"]
    unmakeable = [workspace["ts_text"] / "rp"] + ([Path("/proc/rp")] if Path("/proc/self").is_dir() else [])
    for directory in unmakeable:
        assert main([*argv, "-o", str(directory)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines == [lines[0]] and lines[0].startswith(f"error: cannot write to output directory {directory}")

    def full_disk(path: Path, data: bytes, **_: object) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(report, "write_atomically", full_disk)
    assert main([*argv, "-o", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {tmp_path / 'out' / 'report.json'}: No space left on device"
    ]


@pytest.mark.parametrize(
    "extra",
    [["--sample-docs", "0"], ["--threads", "0"], ["--text", "{ts_text}"]],
    ids=["no documents", "no threads", "a text twice"],
)
def test_bad_arguments_exit_2(workspace: dict[str, Path], extra: list[str]) -> None:
    extra = [part.format(ts_text=workspace["ts_text"]) for part in extra]
    with pytest.raises(SystemExit) as stopped:
        main([str(workspace["ts_tok"]), "--text", str(workspace["ts_text"]), *extra, "-q"])
    assert stopped.value.code == 2


def test_a_directory_given_twice_is_refused(workspace: dict[str, Path]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([str(workspace["ts_tok"]), str(workspace["ts_tok"]), "--text", str(workspace["ts_text"])])
    assert stopped.value.code == 2


@pytest.mark.parametrize(
    ("token", "text"),
    [
        (b" the", " the"),
        (b" caf\xc3\xa9", " café"),
        (b"\xe2\x80", "\\xe2\\x80"),  # half of a character
        (b"\n\n", "\\n\\n"),
        (b"a\\b", "a\\\\b"),
        (b"\x00\x7f", "\\u0000\\u007f"),
        (b"\xc2\x85", "\\u0085"),  # a valid but invisible character, told apart from the invalid byte \x85
    ],
)
def test_tokens_are_shown_unambiguously(token: bytes, text: str) -> None:
    assert escape_token(token) == text


# ---------------------------------------------------------------------------------------------
# --baseline: a superword tokenizer against plain BPE of the same size


@pytest.fixture(scope="module")
def superword_pair(setup: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Plain BPE to 380 and a superword tokenizer of 380 (`--superbpe 300`) trained on the stories, and
    held-out stories."""
    root = tmp_path_factory.mktemp("superword-report")
    corpus = str(setup["ts_text"])
    assert train_main(["bpe_v2", str(root / "plain"), "-d", corpus, "-v", "380", "-q"]) == 0
    argv = ["bpe_v2", str(root / "superword"), "-d", corpus, "-v", "380", "--superbpe", "300", "-q"]
    assert train_main(argv) == 0
    held_out = root / "held_out.txt"
    held_out.write_text(stories(90)[len(stories(60)) :], encoding="utf-8")  # stories 60 to 89: not trained on
    return {"plain": root / "plain", "superword": root / "superword", "held_out": held_out}


def test_a_superword_tokenizer_is_compared_with_plain_bpe_of_its_size(
    superword_pair: dict[str, Path], workspace: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held_out = superword_pair["held_out"]
    argv = [str(superword_pair["superword"]), str(workspace["ts_tok"]), "--baseline", str(superword_pair["plain"])]
    assert main([*argv, "--text", str(held_out), "-o", str(tmp_path), "-q"]) == 0
    data = read_report(tmp_path)
    # The baseline, not among the directories, joins them first.
    assert [entry["name"] for entry in data["tokenizers"]] == ["plain", "superword", "ts_tok"]
    assert data["settings"]["baseline"] == "plain"
    plain, superword, small = data["tokenizers"]
    assert plain["baseline"] is True and "vs_baseline" not in plain["results"][0]
    assert superword["pattern"]["name"] == "superword" and superword["superbpe"]["first_stage"]["tokens"] == 300
    text = held_out.read_text(encoding="utf-8")
    plain_tokens = len(reference(superword_pair["plain"]).encode(text))
    for entry in (superword, small):
        assert entry["baseline"] is False
        (result,) = entry["results"]
        compared = result["vs_baseline"]
        assert compared["tokenizer"] == "plain" and compared["tokens"] == plain_tokens
        assert compared["bytes_per_token"] == pytest.approx(len(text.encode()) / plain_tokens)
        assert compared["token_change"] == pytest.approx(result["tokens"] / plain_tokens - 1)
        assert compared["speed_ratio"] > 0
    # Superwords spend fewer tokens than plain BPE of the same size on the held-out stories.
    assert superword["results"][0]["vs_baseline"]["token_change"] < 0
    captured = capsys.readouterr()
    header, *rows = captured.out.splitlines()[:4]
    assert header.split()[-3:] == ["tokens", "vs", "baseline"]
    assert rows[0].endswith("baseline")
    change = superword["results"][0]["vs_baseline"]["token_change"]
    assert rows[1].startswith("superword") and rows[1].endswith(f"{change:+.1%}")
    # ts_tok has 300 tokens: compared all the same, with a note on the sizes; superword has plain's 380.
    notes = [line for line in captured.err.splitlines() if "baseline plain" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ts_tok has 300 tokens and the baseline plain 380")


def test_the_baseline_may_be_one_of_the_directories_and_each_report_carries_it(
    superword_pair: dict[str, Path], tmp_path: Path
) -> None:
    directories = {}
    for name in ("plain", "superword"):
        directories[name] = tmp_path / name
        directories[name].mkdir()
        for file in superword_pair[name].iterdir():
            directories[name].joinpath(file.name).write_bytes(file.read_bytes())
    argv = [str(directories["plain"]), str(directories["superword"]), "--baseline", str(directories["plain"])]
    assert main([*argv, "--text", str(superword_pair["held_out"]), "-q"]) == 0
    (plain,) = read_report(directories["plain"])["tokenizers"]
    (superword,) = read_report(directories["superword"])["tokenizers"]  # without -o: stands alone
    assert plain["baseline"] is True
    assert superword["results"][0]["vs_baseline"]["tokens"] == plain["results"][0]["tokens"]


def test_without_a_baseline_the_table_and_report_are_as_before(
    workspace: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(workspace["ts_tok"]), "--text", str(workspace["ts_text"]), "-o", str(tmp_path), "-q"]) == 0
    (entry,) = read_report(tmp_path)["tokenizers"]
    assert "baseline" not in entry and "vs_baseline" not in entry["results"][0]
    assert "baseline" not in read_report(tmp_path)["settings"]
    assert capsys.readouterr().out.splitlines()[0].split() == ["tokenizer", "input", "documents", "bytes/token", "MB/s"]


def test_a_missing_baseline_is_bad_input(
    workspace: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(workspace["ts_tok"]), "--baseline", str(tmp_path / "nowhere"), "--text", str(workspace["ts_text"])]
    assert main([*argv, "-q"]) == 2
    assert capsys.readouterr().err.startswith("error: tokenizer directory not found")
