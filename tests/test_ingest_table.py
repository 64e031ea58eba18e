"""A new input format is one row in the table (`cs336_basics.ingest.table`): registered here, a toy
format of documents trains, on every trainer version, to what bpe_v1 gives on the equivalent text
file (the documents joined by the first special token), with no other module told of it."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cs336_basics import BPEInputError, count_words, train_bpe
from cs336_basics.ingest import InputFormat, known_formats, register_format, table
from cs336_basics.ingest.plan import plan_inputs
from cs336_basics.ingest.sources import InputFile, read_blocks
from cs336_basics.ingest.table import row_of

SPECIAL = ["<|endoftext|>"]
VOCAB_SIZE = 300
DOCUMENTS = ["the cat sat", " on the mat\n", "", "über 42 x1!!", "日本 the cat's hat", "hello world " * 5]
# The toy format: documents separated by ASCII's record separator.
SEPARATOR = b"\x1e"


def read_records(
    source: InputFile, text_field: str, skipped: object, part: tuple[int, ...] | None, laid_out: bool
) -> Iterator[bytes]:
    return iter(b"".join(read_blocks(source)).split(SEPARATOR))


@pytest.fixture
def records_format(monkeypatch: pytest.MonkeyPatch) -> InputFormat:
    """The toy format registered for one test (the table restored after it)."""
    known_formats()  # the built-in rows, loaded before the table is copied
    monkeypatch.setattr(table, "_TABLE", dict(table._TABLE))
    row = InputFormat("records", "records", named=lambda path: path.endswith(".records"), documents=read_records)
    return register_format(row)


def write_records(path: Path) -> Path:
    path.write_bytes(SEPARATOR.join(document.encode("utf-8") for document in DOCUMENTS))
    return path


def test_a_registered_format_trains_as_its_documents_joined(
    trainer: str, records_format: InputFormat, tmp_path: Path
) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text(SPECIAL[0].join(DOCUMENTS), encoding="utf-8")
    expected = train_bpe(plain, VOCAB_SIZE, SPECIAL, trainer="bpe_v1")
    records = write_records(tmp_path / "corpus.records")
    assert train_bpe(records, VOCAB_SIZE, SPECIAL, trainer=trainer) == expected


def test_a_registered_format_is_found_by_name_or_chosen(records_format: InputFormat, tmp_path: Path) -> None:
    records = write_records(tmp_path / "corpus.records")
    plan = plan_inputs([records])
    assert [source.format for source in plan.files] == ["records"]
    assert plan.documents and not plan.in_place and row_of(plan.files[0]).describe(plan.files[0]) == "records"
    chosen = write_records(tmp_path / "corpus.txt")
    assert count_words(chosen, SPECIAL, format="records") == count_words(records, SPECIAL)
    assert count_words(chosen, SPECIAL) != count_words(records, SPECIAL)  # as text, the separators are text


def test_an_unknown_format_names_the_registered_ones(records_format: InputFormat, tmp_path: Path) -> None:
    with pytest.raises(BPEInputError, match="choose one of text, jsonl, parquet, records"):
        plan_inputs([write_records(tmp_path / "corpus.records")], format="csv")


def test_the_cluster_cuts_a_file_as_its_row_says(records_format: InputFormat, tmp_path: Path) -> None:
    from cs336_basics.ingest.cluster import StreamPart, _plan_stream_parts

    def records_parts(source: InputFile, range_bytes: int) -> list[tuple[tuple[int, ...], int]]:
        return [((0, 2), 2 * range_bytes), ((2, 3), range_bytes)]

    register_format(
        InputFormat("records", "records", named=records_format.named, documents=read_records, parts=records_parts)
    )
    text = tmp_path / "a.txt"
    text.write_text("the cat", encoding="utf-8")
    files = plan_inputs([text, write_records(tmp_path / "b.records")]).files
    assert _plan_stream_parts(files, 10, single=False) == [
        StreamPart((files[0],), None, 7),
        StreamPart((files[1],), (0, 2), 20),
        StreamPart((files[1],), (2, 3), 10),
    ]
    assert _plan_stream_parts(files, 10, single=True) == [StreamPart(files, None, 7 + files[1].size())]


# The whole of a new format: one module dropped beside the built-in ones (docs/INGEST.md, "Adding a
# format", names this one file and nothing else).
NEW_FORMAT_MODULE = '''"""Records: documents separated by ASCII's record separator."""

from .sources import read_blocks
from .table import InputFormat


def _documents(source, text_field, skipped, part, laid_out):
    return iter(b"".join(read_blocks(source)).split(b"\\x1e"))


FORMAT = InputFormat("records", "records", named=lambda path: path.endswith(".records"), documents=_documents)
'''


@pytest.fixture
def format_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """`records.py` found among the format modules (the package's path extended to a folder holding
    it, so the checkout is not written to); the table, the path and the import forgotten after."""
    package = importlib.import_module(table.__package__)
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "records.py").write_text(NEW_FORMAT_MODULE, encoding="utf-8")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.setattr(table, "_TABLE", {})
    monkeypatch.setattr(table, "_found", False)
    name = f"{table.__package__}.records"
    yield name
    sys.modules.pop(name, None)


def test_a_new_format_is_one_module_and_trains_through_train_bpe_and_the_cli(
    trainer: str, format_module: str, tmp_path: Path
) -> None:
    from cs336_basics.commands.cli import main as cli_main
    from cs336_basics.outputs.serialization import load_merges

    assert known_formats() == ("text", "jsonl", "parquet", "records")
    plain = tmp_path / "plain.txt"
    plain.write_text(SPECIAL[0].join(DOCUMENTS), encoding="utf-8")
    expected = train_bpe(plain, VOCAB_SIZE, SPECIAL, trainer="bpe_v1")
    records = write_records(tmp_path / "corpus.records")
    assert train_bpe(records, VOCAB_SIZE, SPECIAL, trainer=trainer) == expected
    options = ["-v", str(VOCAB_SIZE), "--special", SPECIAL[0], "-q"]
    assert cli_main([trainer, str(tmp_path / "found"), "-d", str(records), *options]) == 0
    assert load_merges(tmp_path / "found" / "merges.txt") == expected[1]
    chosen = write_records(tmp_path / "corpus.txt")  # named as text, read as records when chosen
    assert cli_main([trainer, str(tmp_path / "chosen"), "-d", str(chosen), *options, "--format", "records"]) == 0
    assert load_merges(tmp_path / "chosen" / "merges.txt") == expected[1]


def test_adding_a_format_in_the_docs_names_one_file() -> None:
    docs = Path(__file__).resolve().parents[1] / "docs" / "INGEST.md"
    if not docs.is_file():
        pytest.skip("docs/INGEST.md is not in this checkout")
    section = docs.read_text(encoding="utf-8").split("## Adding a format", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(cs336_basics/[\w/]+\.py)`", section))  # the package's files to write
    assert named == {"cs336_basics/ingest/csv.py"}, named
