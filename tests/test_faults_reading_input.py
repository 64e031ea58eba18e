"""Reading input at its faults (hardened in issue 40, items 4, 5, 9, 10 and 12, and URL inputs): a reused
buffer never gives other merges, an input without text is refused the same way in every format and
command, a FIFO in a directory is refused as when named, a special token the text lacks is noted,
and bad paths, Parquet files, records and URLs end in one line naming what is wrong."""

from __future__ import annotations

import gzip
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import cs336_basics.ingest.stream_counter as stream_counter
from cs336_basics import BPEInputError, count_words, train, train_bpe, train_bpe_from_iterator
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.commands.count_cli import main as count_main
from cs336_basics.ingest.word_counts import WordCounts
from cs336_basics.rules.contract import ENDOFTEXT

DOCUMENTS = [
    "hello world, the cat sat on the mat",
    "low lower lowest, newer newest widest",
    "a banana and an ananas",
    "the cat's hat is 12 345 sizes too small",
] * 30
TEXT = ENDOFTEXT.join(DOCUMENTS) + "\n"


def merges_of(out: Path) -> str:
    return (out / "merges.txt").read_text(encoding="utf-8")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Item 4, and item 10's records: documents are taken as they are received


def refilled(documents: list[str], kind: str) -> Iterator[object]:
    """Every document in the same buffer, refilled once the consumer asks for the next."""
    buffer = bytearray()
    for document in documents:
        buffer[:] = document.encode("utf-8")
        yield buffer if kind == "bytearray" else memoryview(buffer)


@pytest.mark.parametrize("counter", ["native", "python"])
@pytest.mark.parametrize("kind", ["bytearray", "memoryview"])
@pytest.mark.parametrize("specials", [[ENDOFTEXT], []], ids=["endoftext", "none"])
def test_a_reused_buffer_gives_the_merges_of_the_documents(
    trainer: str, counter: str, kind: str, specials: list[str], monkeypatch
) -> None:
    if counter == "python":
        monkeypatch.setattr(stream_counter, "_native_module", lambda: None)
    expected = train_bpe_from_iterator(DOCUMENTS, 300, specials, trainer=trainer)
    assert train_bpe_from_iterator(refilled(DOCUMENTS, kind), 300, specials, trainer=trainer) == expected


@pytest.mark.parametrize("counter", ["native", "python"])
def test_records_give_their_text_field(trainer: str, counter: str, monkeypatch) -> None:
    if counter == "python":
        monkeypatch.setattr(stream_counter, "_native_module", lambda: None)
    expected = train_bpe_from_iterator(DOCUMENTS, 300, [ENDOFTEXT], trainer=trainer)
    records = ({"id": index, "text": document} for index, document in enumerate(DOCUMENTS))
    assert train_bpe_from_iterator(records, 300, [ENDOFTEXT], text_field="text", trainer=trainer) == expected
    bodies = [{"body": document.encode()} for document in DOCUMENTS]
    assert train_bpe_from_iterator(bodies, 300, [ENDOFTEXT], text_field="body", trainer=trainer) == expected


def test_a_record_without_the_field_is_named() -> None:
    with pytest.raises(BPEInputError, match=r"document 1 is a record without the field 'text' \(fields: 'body'\)"):
        train_bpe_from_iterator([{"text": "fine"}, {"body": "elsewhere"}], 300, [ENDOFTEXT])
    with pytest.raises(BPEInputError, match=r"document 0's field 'text' is a int, not a string"):
        train_bpe_from_iterator([{"text": 7}], 300, [ENDOFTEXT])


# ---------------------------------------------------------------------------------------------
# Item 5: no text at all is refused in every format, command and route, naming the input


def write_no_text_inputs(tmp_path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (the input paths, extra CLI options): each holds no text at all."""
    inputs: dict[str, tuple[list[str], list[str]]] = {}
    (tmp_path / "empty.jsonl").write_bytes(b"")
    inputs["empty .jsonl"] = ([str(tmp_path / "empty.jsonl")], [])
    (tmp_path / "blank.jsonl").write_bytes(b"\n\n  \n\t\n")
    inputs["blank-lines .jsonl"] = ([str(tmp_path / "blank.jsonl")], [])
    (tmp_path / "bad.jsonl").write_bytes(b'{"body": "text elsewhere"}\nnot json\n')
    inputs["every record skipped"] = ([str(tmp_path / "bad.jsonl")], ["--skip-bad-records"])
    (tmp_path / "empty.jsonl.gz").write_bytes(gzip.compress(b""))
    inputs["empty .jsonl.gz"] = ([str(tmp_path / "empty.jsonl.gz")], [])
    (tmp_path / "a.txt").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes(b"")
    inputs["two empty .txt"] = ([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")], [])
    try:
        import pyarrow
        import pyarrow.parquet as parquet
    except ImportError:
        return inputs
    parquet.write_table(pyarrow.table({"text": pyarrow.array([], pyarrow.string())}), tmp_path / "zero.parquet")
    inputs["zero-row Parquet"] = ([str(tmp_path / "zero.parquet")], [])
    return inputs


NO_TEXT_CASES = [
    "empty .jsonl", "blank-lines .jsonl", "every record skipped", "empty .jsonl.gz", "two empty .txt",
    "zero-row Parquet",
]  # fmt: skip


@pytest.mark.parametrize("case", NO_TEXT_CASES)
def test_an_input_without_text_is_refused_by_both_commands(tmp_path: Path, case: str, capsys) -> None:
    inputs = write_no_text_inputs(tmp_path)
    if case not in inputs:
        pytest.skip("Parquet input needs the optional pyarrow package")
    paths, options = inputs[case]
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", *paths, "-v", "300", "-q", *options]) == 2
    err = capsys.readouterr().err
    assert "hold" in err and "no text" in err and paths[0] in err
    assert err.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())
    assert count_main([*paths, "-o", str(tmp_path / "c.counts"), "-q", *options]) == 2
    err = capsys.readouterr().err
    assert "no text" in err and paths[0] in err and not (tmp_path / "c.counts").exists()


@pytest.mark.parametrize("case", [case for case in NO_TEXT_CASES if case != "two empty .txt"])
def test_an_input_without_text_is_refused_by_train_bpe(tmp_path: Path, case: str, trainer: str) -> None:
    inputs = write_no_text_inputs(tmp_path)
    if case not in inputs:
        pytest.skip("Parquet input needs the optional pyarrow package")
    (path,), options = inputs[case]
    with pytest.raises(BPEInputError, match="holds no text") as error:
        train_bpe(path, 300, [ENDOFTEXT], trainer=trainer, skip_bad_records=bool(options))
    assert path in str(error.value)


def test_an_empty_txt_is_still_refused_and_so_are_empty_documents(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(BPEInputError, match="empty"):
        train_bpe(tmp_path / "empty.txt", 300, [ENDOFTEXT])
    for documents in ([], [""], iter(["", ""])):
        with pytest.raises(BPEInputError, match="the documents hold no text"):
            train_bpe_from_iterator(documents, 300, [])


def test_counting_alone_still_counts_an_empty_shard(tmp_path: Path) -> None:
    # A shard may be empty among others: only what trains, or writes a count file, refuses no text.
    (tmp_path / "empty.jsonl").write_bytes(b"")
    counts = count_words(tmp_path / "empty.jsonl", [ENDOFTEXT])
    assert len(counts) == 0 and counts.source_bytes == 0


def test_a_directory_of_one_stray_readme_is_refused(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "readme.md").write_text("#\n")  # two pre-tokens of one byte: nothing to merge
    out = tmp_path / "out"
    assert cli_main(["bpe_v2", str(out), "-d", str(data), "-v", "300", "-q"]) == 2
    err = capsys.readouterr().err
    assert "error: nothing to train on in " in err and "readme.md" in err and not out.exists()
    # Asked for bytes and special tokens alone, it is what was asked for.
    assert cli_main(["bpe_v2", str(out), "-d", str(data), "-v", "257", "-q"]) == 0


# ---------------------------------------------------------------------------------------------
# Item 9: what a directory walk finds is refused as when named directly


def refusal_of(path: Path, tmp_path: Path, capsys) -> str:
    assert cli_main(["bpe_v2", str(tmp_path / "out-direct"), "-d", str(path), "-v", "300", "-q"]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("kind", ["fifo", "socket", "broken link"])
def test_a_special_file_in_a_directory_is_refused_as_when_named(tmp_path: Path, kind: str, capsys) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.txt").write_text(TEXT, encoding="utf-8")
    odd = data / "b-odd"
    held = None
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "socket":
        if len(os.fsencode(odd)) >= 100:
            pytest.skip("the temporary path is too long for a Unix socket")
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(odd))
    else:
        odd.symlink_to(tmp_path / "gone.txt")
    try:
        direct = refusal_of(odd, tmp_path, capsys)
        assert cli_main(["bpe_v2", str(tmp_path / "out"), "-d", str(data), "-v", "300", "-q"]) == 2
        walked = capsys.readouterr().err
        assert walked == direct and str(odd) in walked
        assert count_main([str(data), "-o", str(tmp_path / "c.counts"), "-q"]) == 2
        assert str(odd) in capsys.readouterr().err
        # A glob that matches it says the same.
        assert cli_main(["bpe_v2", str(tmp_path / "out"), "-d", str(data / "*"), "-v", "300", "-q"]) == 2
        assert capsys.readouterr().err == direct
    finally:
        if held is not None:
            held.close()


# ---------------------------------------------------------------------------------------------
# Item 12: a special token the training text never holds is noted, once


def note_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "never occur" in line]


def test_a_special_token_the_text_lacks_is_noted_by_every_trainer(trainer: str, corpus: Path, capsys) -> None:
    result = train(corpus, 300, ["<|eot|>"], trainer=trainer)
    assert note_lines(capsys.readouterr().err) == [
        "note: special token '<|eot|>' never occurs in the training text (a typo?)"
    ]
    assert result.absent_special_tokens == ["<|eot|>"]
    assert train(corpus, 300, [ENDOFTEXT], trainer=trainer).absent_special_tokens == []
    assert note_lines(capsys.readouterr().err) == []


def test_the_note_on_every_route_of_the_cli(tmp_path: Path, corpus: Path, capsys) -> None:
    records = tmp_path / "docs.jsonl"
    # One record holding the text's <|endoftext|>: the near miss of <|eot|> the note is for.
    records.write_text(json.dumps({"text": ENDOFTEXT.join(DOCUMENTS[:2])}) + "\n")
    counts = tmp_path / "c.counts"
    assert count_main([str(corpus), "-o", str(counts), "-q", "--special", "<|eot|>"]) == 0
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(corpus.read_bytes()))
    runs = {
        "in place": ["-d", str(corpus)],
        "several files": ["-d", str(corpus), str(corpus)],
        "gzip": ["-d", str(tmp_path / "c.txt.gz")],
        "one JSON-lines record": ["-d", str(records)],
        "count file": ["--counts", str(counts)],
    }
    capsys.readouterr()
    for name, source in runs.items():
        out = tmp_path / name.replace(" ", "-")
        assert cli_main(["bpe_v2", str(out), *source, "-v", "280", "-q", "--special", "<|eot|>"]) == 0, name
        assert len(note_lines(capsys.readouterr().err)) == 1, name


def test_no_note_when_the_token_is_there_or_cannot_be_told(corpus: Path, capsys) -> None:
    train(corpus, 280, [ENDOFTEXT])
    # Two tokens, the text holding the longer: the shorter may hide in what was split out, so no claim.
    train(corpus, 280, [ENDOFTEXT, "<|eot|>"])
    train_bpe_from_iterator(DOCUMENTS, 280, ["<|eot|>"])  # the documents are joined by it
    assert note_lines(capsys.readouterr().err) == []


@pytest.mark.parametrize(
    ("text", "declared", "noted"),
    [
        ("hello world\n" * 50, ENDOFTEXT, False),  # the handout's case: nothing like it in the text
        ("if a < b | c > d: x <- y\n" * 50, ENDOFTEXT, False),  # its characters, apart
        ("a story.\n<|EndOfText|>\nanother.\n" * 50, ENDOFTEXT, True),  # its case
        ("a story.<| endoftext |>another.\n" * 50, ENDOFTEXT, True),  # spaces inside
        ("a story.<|im_end|>another.\n" * 50, ENDOFTEXT, True),  # another token of its brackets
        (TEXT, "<|eot|>", True),  # a short form of the text's <|endoftext|>
        ("videos of geos\n" * 50, "EOS", False),  # no brackets: nothing to tell a typo by
    ],
    ids=["plain", "apart", "case", "spaces", "other-token", "short-form", "no-brackets"],
)
def test_the_note_is_for_a_near_miss_alone(
    tmp_path: Path, capsys, text: str, declared: str, noted: bool
) -> None:
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    result = train(path, 280, [declared])
    assert result.absent_special_tokens == [declared]  # the field stays exact; the note is shown on a near miss
    expected = [f"note: special token {declared!r} never occurs in the training text (a typo?)"] if noted else []
    assert note_lines(capsys.readouterr().err) == expected


def test_the_note_from_a_plain_count_table_and_counts_made_by_hand(capsys) -> None:
    # A mapping carries no text size: nothing is claimed. Counts with the size of their text are judged.
    from cs336_basics import train_bpe_from_counts

    # The words hold <|endoftext|>'s pieces (40 bytes of text in all): a near miss of <|eot|>.
    words = {b"hello": 3, b" world": 2, b"<|": 1, b"endoftext": 1, b"|>": 1}
    train_bpe_from_counts(words, 260, ["<|eot|>"])
    assert note_lines(capsys.readouterr().err) == []
    train_bpe_from_counts(WordCounts(words, ["<|eot|>"], source_bytes=40), 260)
    assert len(note_lines(capsys.readouterr().err)) == 1
    train_bpe_from_counts(WordCounts(words, ["<|eot|>"], source_bytes=47), 260)
    assert note_lines(capsys.readouterr().err) == []


# ---------------------------------------------------------------------------------------------
# Item 10 (parts): one line that names the argument or file and what was expected


def test_a_bytes_path_names_the_argument(corpus: Path) -> None:
    with pytest.raises(BPEInputError, match=r"input_path must be a path as str or os\.PathLike, not bytes"):
        train_bpe(os.fsencode(corpus), 300, [ENDOFTEXT])
    with pytest.raises(BPEInputError, match="not bytes"):
        count_words(os.fsencode(corpus), [ENDOFTEXT])
    with pytest.raises(BPEInputError, match="not int"):
        train_bpe(7, 300, [ENDOFTEXT])  # type: ignore[arg-type]


def parquet_of(path: Path, documents: list[str], dictionary: bool = False) -> Path:
    pyarrow = pytest.importorskip("pyarrow", reason="Parquet input needs the optional pyarrow package")
    import pyarrow.parquet as parquet

    column = pyarrow.array(documents)
    parquet.write_table(pyarrow.table({"text": column.dictionary_encode() if dictionary else column}), path)
    return path


def test_a_corrupt_parquet_file_is_named(tmp_path: Path, capsys) -> None:
    path = parquet_of(tmp_path / "bad.parquet", [f"{document} {index}" for index, document in enumerate(DOCUMENTS)])
    data = bytearray(path.read_bytes())
    for offset in range(100, 300):  # inside the column's data pages, not the footer
        data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(BPEInputError, match=r"bad\.parquet: cannot read Parquet row group 0"):
        train_bpe(path, 300, [ENDOFTEXT])
    assert cli_main(["bpe_v2", str(tmp_path / "out"), "-d", str(path), "-v", "300", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: cannot read Parquet row group 0") and len(err.splitlines()) == 1
    assert count_main([str(path), "-o", str(tmp_path / "c.counts"), "-q"]) == 2


def test_a_dictionary_encoded_column_is_read_as_its_strings(tmp_path: Path, trainer: str) -> None:
    plain = parquet_of(tmp_path / "plain.parquet", DOCUMENTS)
    encoded = parquet_of(tmp_path / "dictionary.parquet", DOCUMENTS, dictionary=True)
    expected = train_bpe(plain, 300, [ENDOFTEXT], trainer=trainer)
    assert train_bpe(encoded, 300, [ENDOFTEXT], trainer=trainer) == expected
    import pyarrow

    table = pyarrow.table({"text": pyarrow.array(DOCUMENTS).dictionary_encode()})
    assert train_bpe_from_iterator(table, 300, [ENDOFTEXT], trainer=trainer) == expected
    assert train_bpe_from_iterator(table, 300, [], trainer=trainer) == train_bpe_from_iterator(DOCUMENTS, 300, [])


# ---------------------------------------------------------------------------------------------
# URL inputs (fsspec): memory:// works offline, in this process


@pytest.fixture
def memory_root(tmp_path: Path) -> Iterator[str]:
    fsspec = pytest.importorskip("fsspec", reason="URL inputs need the optional fsspec package")
    filesystem = fsspec.filesystem("memory")
    root = f"/reading-input-{tmp_path.name}"
    yield root
    if filesystem.exists(root):
        filesystem.rm(root, recursive=True)


def put(url_path: str, data: bytes) -> str:
    import fsspec

    fsspec.filesystem("memory").pipe(url_path, data)
    return f"memory://{url_path}"


@pytest.mark.parametrize("name", ["c.txt", "c.txt.gz", "c.jsonl"])
def test_a_url_trains_as_its_local_file(tmp_path: Path, corpus: Path, memory_root: str, name: str, capsys):
    data = corpus.read_bytes()
    if name.endswith(".gz"):
        data = gzip.compress(data)
    elif name.endswith(".jsonl"):
        data = "".join(json.dumps({"text": document}) + "\n" for document in DOCUMENTS).encode()
    local = tmp_path / name
    local.write_bytes(data)
    url = put(f"{memory_root}/{name}", data)
    assert train_bpe(url, 300, [ENDOFTEXT]) == train_bpe(local, 300, [ENDOFTEXT])
    assert count_words(url, [ENDOFTEXT]) == count_words(local, [ENDOFTEXT])
    assert cli_main(["bpe_v2", str(tmp_path / "from-url"), "-d", url, "-v", "300", "-q"]) == 0
    assert cli_main(["bpe_v2", str(tmp_path / "from-file"), "-d", str(local), "-v", "300", "-q"]) == 0
    assert merges_of(tmp_path / "from-url") == merges_of(tmp_path / "from-file")


def test_bad_urls_end_in_one_line(tmp_path: Path, memory_root: str, capsys) -> None:
    put(f"{memory_root}/dir/a.txt", TEXT.encode())
    empty = put(f"{memory_root}/empty.txt", b"")
    cases = {
        f"memory://{memory_root}/missing.txt": "training file not found: memory://",
        "nosuchprotocol://bucket/a.txt": "Protocol not known: nosuchprotocol; give a local path or a URL",
        f"file://{tmp_path}/missing.txt": "training file not found: file://",
        empty: "training file holds no text: memory://",
        f"memory://{memory_root}/nothing-*.txt": "no file matches memory://",
    }
    for url, message in cases.items():
        for command, argv in (
            (cli_main, ["bpe_v2", str(tmp_path / "out"), "-d", url, "-v", "300", "-q"]),
            (count_main, [url, "-o", str(tmp_path / "c.counts"), "-q"]),
        ):
            assert command(argv) == 2, url
            err = capsys.readouterr().err
            assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, (url, err)
    with pytest.raises(BPEInputError, match="training file path is a directory, not a file: memory://"):
        train_bpe(f"memory://{memory_root}/dir", 300, [ENDOFTEXT])
    with pytest.raises(BPEInputError, match="Protocol not known: nosuchprotocol; give a local path"):
        train_bpe("nosuchprotocol://bucket/a.txt", 300, [ENDOFTEXT])
