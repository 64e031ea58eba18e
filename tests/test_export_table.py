"""A new export is one row in the table (`cs336_basics.outputs.export`): registered here as a newcomer's row
would be at the end of export.py, a toy export is a choice of `--export`, is written into the output
set (listed in bpe_run.json, removed by a later run without it), refuses a pattern it cannot carry
before training and notes the text it drops, with no other module told of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cs336_basics import BPEInputError
from cs336_basics.commands.cli import main as cli_main
from cs336_basics.outputs import export as export_module
from cs336_basics.outputs.export import ExportFormat, export_file_names, export_files, export_formats, register_export
from cs336_basics.outputs.serialization import OUTPUT_FILES, RUN_FILE, read_run_info
from cs336_basics.rules.contract import ENDOFTEXT, Merges, Vocab

TEXT = "the cat sat on the mat<|endoftext|>the dog sat on the log\n" * 40


def toy_files(vocab: Vocab, merges: Merges, special_tokens: list[str] | None, **_: object) -> dict[str, bytes]:
    """The toy export: each id and its token in hex, one a line."""
    lines = (f"{token_id} {token.hex()}\n" for token_id, token in sorted(vocab.items()))
    return {"toy_vocab.txt": "".join(lines).encode("ascii")}


def refuse_in_toy(expression: str) -> None:
    if "\\d" in expression:
        raise BPEInputError(f"cannot export pattern {expression!r} to toy: it has no digits")


# The whole of a new export: its builder (above) and this row (docs/EXPORT.md, "Adding an export").
TOY = ExportFormat(
    "toy",
    ("toy_vocab.txt",),
    toy_files,
    refuses=refuse_in_toy,
    unmatched_note="toy leaves out the text {pattern} does not match",
    loaded_by="anything that reads hex",
)


@pytest.fixture
def toy_export(monkeypatch: pytest.MonkeyPatch) -> ExportFormat:
    """The toy row registered for one test (the table restored after it)."""
    monkeypatch.setattr(export_module, "_EXPORTS", dict(export_module._EXPORTS))
    return register_export(TOY)


@pytest.fixture
def text(tmp_path: Path) -> Path:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def run(out: Path, text: Path, *options: str) -> int:
    return cli_main(["bpe_v1", str(out), "-d", str(text), "-v", "270", "-q", *options])


def test_a_registered_export_is_written_into_the_output_set(toy_export: ExportFormat, text: Path, tmp_path: Path):
    assert export_formats() == ("hf", "tiktoken", "toy")
    assert "toy_vocab.txt" in export_file_names()
    out = tmp_path / "out"
    assert run(out, text, "--export", "toy,hf") == 0
    vocab = {int(line.split()[0]): bytes.fromhex(line.split()[1]) for line in (out / "toy_vocab.txt").open()}
    assert len(vocab) == 270 and vocab[256] == ENDOFTEXT.encode()
    hf = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}
    assert set(read_run_info(out)["files"]) == {*OUTPUT_FILES, "toy_vocab.txt", *hf}
    # A run without it replaces the set; the old export, which no longer matches, goes with it.
    assert run(out, text) == 0
    assert sorted(path.name for path in out.iterdir()) == sorted([*OUTPUT_FILES, RUN_FILE])


def test_a_registered_export_refuses_a_pattern_before_training(
    toy_export: ExportFormat, text: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    out = tmp_path / "out"
    assert run(out, text, "--export", "toy", "--pattern", r"\d+|\w+") == 2
    assert "cannot export pattern" in capsys.readouterr().err and not out.exists()
    with pytest.raises(BPEInputError, match="to toy"):
        export_files(["toy"], {}, [], pattern=r"\d+")


def test_a_registered_export_notes_the_text_it_drops(
    toy_export: ExportFormat, text: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    assert run(tmp_path / "out", text, "--export", "toy", "--pattern", r"\w+") == 0
    assert "note: --export toy: toy leaves out the text" in capsys.readouterr().err


def test_an_unknown_export_names_the_registered_ones(toy_export: ExportFormat, text: Path, tmp_path: Path, capsys):
    with pytest.raises(SystemExit):
        run(tmp_path / "out", text, "--export", "csv")
    assert "choose from hf, tiktoken, toy" in capsys.readouterr().err


def test_an_export_may_not_write_another_exports_file(toy_export: ExportFormat):
    with pytest.raises(ValueError, match="another export writes"):
        register_export(ExportFormat("other", ("tokenizer.json",), toy_files))


def test_adding_an_export_in_the_docs_names_one_file() -> None:
    docs = Path(__file__).resolve().parents[1] / "docs" / "EXPORT.md"
    if not docs.is_file():
        pytest.skip("docs/EXPORT.md is not in this checkout")
    section = docs.read_text(encoding="utf-8").split("## Adding an export", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(cs336_basics/[\w/]+\.py)`", section))  # the package's files to write
    assert named == {"cs336_basics/outputs/export.py"}, named
