"""cs336_basics/commands/swap_in.py (`cs336-swap-in`) on a mock of the handout's tests/adapters.py.

The mock is written here, shaped like the handout's file (torch imported at the top, many adapter
stubs that raise NotImplementedError, comments, the two BPE stubs), with none of its code. torch is
made unimportable for every test: the swap reads text and must never import the adapters file.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from cs336_basics.commands import swap_in
from tests.support import REPO_ROOT

HEADER = """\
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any, BinaryIO

import torch
from torch import Tensor


# Layers ---------------------------------------------------------------------------------------------
def run_embedding(vocab_size: int, d_model: int, weights: Tensor, token_ids: Tensor) -> Tensor:
    \"\"\"Look up `token_ids` in `weights`.\"\"\"
    raise NotImplementedError


def run_softmax(in_features: Tensor, dim: int) -> Tensor:
    \"\"\"Softmax over `dim`, stable for large inputs.

    Args:
        in_features: any shape.
    \"\"\"
    raise NotImplementedError  # stays a stub: only the BPE adapters are ours

"""
TOKENIZER_STUB = """\
def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> Any:
    \"\"\"A tokenizer that uses `vocab`, `merges` and `special_tokens`.\"\"\"
    raise NotImplementedError
"""
MIDDLE = """\


def run_get_batch(dataset, batch_size: int, context_length: int, device: str):
    raise NotImplementedError


# BPE ------------------------------------------------------------------------------------------------
"""
TRAIN_STUB = """\
def run_train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    \"\"\"Train a BPE tokenizer on `input_path`.

    Returns:
        vocab, merges
    \"\"\"
    raise NotImplementedError
"""
FOOTER = """\
    # a comment at the stub's indentation, after its last statement: outside the function's lines


def run_save_checkpoint(model, optimizer, iteration: int, out: str | os.PathLike | BinaryIO | IO[bytes]) -> None:
    ...
"""
OWN_TOKENIZER = TOKENIZER_STUB.replace("raise NotImplementedError", "return None")
MOCK = HEADER + TOKENIZER_STUB + MIDDLE + TRAIN_STUB + FOOTER
# What the file must be afterwards, spliced by hand rather than by the code under test.
EXPECTED = HEADER + swap_in.GET_TOKENIZER + MIDDLE + swap_in.RUN_TRAIN_BPE + FOOTER
CORPUS = "low lower lowest<|endoftext|>newer wider new<|endoftext|>the widest road, the lowest low\n" * 20


@pytest.fixture(autouse=True)
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "adapters.py").write_bytes(MOCK.encode())
    return tmp_path


def adapters(checkout: Path) -> Path:
    return checkout / "tests" / "adapters.py"


def files(checkout: Path) -> list[str]:
    return sorted(path.name for path in (checkout / "tests").iterdir())


def refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line of a refusal; checks the exit status and that nothing else was printed."""
    assert swap_in.main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), err
    return err


def test_swaps_the_two_functions_and_nothing_else(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert swap_in.main([str(checkout)]) == 0
    assert adapters(checkout).read_bytes() == EXPECTED.encode()
    out = capsys.readouterr().out
    assert f"--- {adapters(checkout)} (before)" in out and "+    from cs336_bpe import train_bpe" in out
    assert "-    raise NotImplementedError  # stays" not in out  # the other stubs are not in the diff
    assert out.rstrip().splitlines()[-1].startswith("swapped in:")
    assert files(checkout) == ["adapters.py", "adapters.py.orig"]
    assert (checkout / "tests" / "adapters.py.orig").read_bytes() == MOCK.encode()


def test_the_swapped_in_functions_call_cs336_bpe(checkout: Path, tmp_path: Path, monkeypatch) -> None:
    import cs336_bpe

    assert swap_in.main([str(checkout)]) == 0
    # Import the whole rewritten file, as the handout's tests do, with a stand-in for torch.
    fake_torch = types.ModuleType("torch")
    fake_torch.Tensor = type("Tensor", (), {})
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    module = runpy.run_path(str(adapters(checkout)))

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    expected = cs336_bpe.train_bpe(corpus, 280, ["<|endoftext|>"])
    assert module["run_train_bpe"](corpus, 280, ["<|endoftext|>"]) == expected
    assert module["run_train_bpe"](str(corpus), 280, ["<|endoftext|>"], trainer="bpe_v1") == expected  # keywords pass
    vocab, merges = expected
    tokenizer = module["get_tokenizer"](vocab, merges, special_tokens=["<|endoftext|>"])
    assert isinstance(tokenizer, cs336_bpe.Tokenizer)
    text = "the lowest road<|endoftext|>newer"
    assert tokenizer.encode(text) == cs336_bpe.Tokenizer(vocab, merges, ["<|endoftext|>"]).encode(text)
    assert module["get_tokenizer"](vocab, merges).decode(tokenizer.encode(text)) == text


def test_a_second_run_changes_nothing(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert swap_in.main([str(checkout)]) == 0
    capsys.readouterr()
    assert swap_in.main([str(checkout)]) == 0
    assert capsys.readouterr().out.startswith("already swapped in:")
    assert adapters(checkout).read_bytes() == EXPECTED.encode()
    assert files(checkout) == ["adapters.py", "adapters.py.orig"]
    # The same for the adapters file given directly, and for one pasted by hand from cs336_basics/adapters.py.
    hand_pasted = (REPO_ROOT / "cs336_basics" / "adapters.py").read_bytes()
    adapters(checkout).write_bytes(hand_pasted)
    assert swap_in.main([str(adapters(checkout))]) == 0
    assert adapters(checkout).read_bytes() == hand_pasted


def test_a_backup_is_never_overwritten(checkout: Path) -> None:
    assert swap_in.main([str(checkout)]) == 0
    newer = MOCK.replace("# BPE ---", "# BPE, version 2 ---").encode()
    adapters(checkout).write_bytes(newer)  # a newer handout copied over the swapped file
    assert swap_in.main([str(checkout)]) == 0
    assert (checkout / "tests" / "adapters.py.orig").read_bytes() == MOCK.encode()
    assert (checkout / "tests" / "adapters.py.orig.1").read_bytes() == newer
    adapters(checkout).write_bytes(newer)  # the same again: its backup is there already
    assert swap_in.main([str(checkout)]) == 0
    assert files(checkout) == ["adapters.py", "adapters.py.orig", "adapters.py.orig.1"]


def test_an_earlier_version_of_ours_is_replaced(checkout: Path) -> None:
    older = TRAIN_STUB.replace(
        "    raise NotImplementedError\n", "    import cs336_bpe\n\n    return cs336_bpe.train(input_path)\n"
    )
    adapters(checkout).write_bytes(MOCK.replace(TRAIN_STUB, older).encode())
    assert swap_in.main([str(checkout)]) == 0
    assert adapters(checkout).read_bytes() == EXPECTED.encode()


def test_dry_run_prints_the_diff_and_writes_nothing(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert swap_in.main([str(checkout), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out == swap_in.unified_diff(MOCK, EXPECTED, str(adapters(checkout))) and out.startswith("--- ")
    assert err == ""
    assert adapters(checkout).read_bytes() == MOCK.encode() and files(checkout) == ["adapters.py"]

    assert swap_in.main([str(checkout)]) == 0
    capsys.readouterr()
    assert swap_in.main([str(checkout), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("already swapped in:")


def test_line_endings_and_encoding_are_kept(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(MOCK.replace("\n", "\r\n").encode())
    assert swap_in.main([str(crlf)]) == 0
    data = crlf.read_bytes()
    assert data == EXPECTED.replace("\n", "\r\n").encode() and data.count(b"\n") == data.count(b"\r\n")

    latin = tmp_path / "latin.py"
    source = "# -*- coding: latin-1 -*-\n# Café\n" + MOCK
    latin.write_bytes(source.encode("latin-1"))
    assert swap_in.main([str(latin)]) == 0
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n# Café\n" + EXPECTED).encode("latin-1")

    bom = tmp_path / "bom.py"
    bom.write_bytes(MOCK.encode("utf-8-sig"))
    assert swap_in.main([str(bom)]) == 0
    assert bom.read_bytes() == EXPECTED.encode("utf-8-sig")

    no_final_newline = tmp_path / "end.py"
    no_final_newline.write_bytes((HEADER + TOKENIZER_STUB + MIDDLE + TRAIN_STUB).rstrip("\n").encode())
    assert swap_in.main([str(no_final_newline)]) == 0
    assert (
        no_final_newline.read_bytes() == (HEADER + swap_in.GET_TOKENIZER + MIDDLE + swap_in.RUN_TRAIN_BPE)[:-1].encode()
    )


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("missing", None, "not found"),
        ("syntax", MOCK.replace("def run_get_batch(", "def run_get_batch(("), "does not parse"),
        ("no get_tokenizer", MOCK.replace(TOKENIZER_STUB, ""), "no top-level get_tokenizer"),
        ("twice", MOCK + "\n\n" + TRAIN_STUB, "defines run_train_bpe twice"),
        ("nested", MOCK.replace(TRAIN_STUB, "class A:\n" + textwrap.indent(TRAIN_STUB, "    ")), "no top-level"),
        ("own code", MOCK.replace(TOKENIZER_STUB, OWN_TOKENIZER), "--force"),
        ("no os", MOCK.replace("from __future__ import annotations\n", "").replace("import os\n", ""), "import"),
        ("binary", "\x00\xff", "not Python source text"),
    ],
)
def test_refuses_with_one_line(tmp_path: Path, capsys, name: str, text: str | None, reason: str) -> None:
    path = tmp_path / "tests" / "adapters.py"
    if text is not None:
        path.parent.mkdir()
        path.write_bytes(text.encode("latin-1") if name == "binary" else text.encode())
    before = sorted(tmp_path.rglob("*"))
    assert reason in refusal(capsys, [str(tmp_path)])
    assert sorted(tmp_path.rglob("*")) == before  # no backup, no temporary file left
    if text is not None:
        assert path.read_bytes() == (text.encode("latin-1") if name == "binary" else text.encode())


def test_force_replaces_code_of_your_own(checkout: Path) -> None:
    adapters(checkout).write_bytes(MOCK.replace(TOKENIZER_STUB, OWN_TOKENIZER).encode())
    assert swap_in.main([str(checkout), "--force"]) == 0
    assert "return None" not in adapters(checkout).read_text(encoding="utf-8")
    assert "return None" in (checkout / "tests" / "adapters.py.orig").read_text(encoding="utf-8")


def test_the_functions_swapped_in_are_the_adapters_a_student_would_paste() -> None:
    # Exactly the two adapters of cs336_basics/adapters.py (the file the README says to paste from),
    # each importing the installed package inside its body, so the handout's file needs no new import.
    assert sorted(swap_in.FUNCTIONS) == ["get_tokenizer", "run_train_bpe"]
    namespace: dict = {}
    for name, text in swap_in.FUNCTIONS.items():
        assert text.startswith(f"def {name}(") and "from cs336_bpe import" in text
        exec(compile("import os\n" + text, "<adapter>", "exec"), namespace)
    assert callable(namespace["run_train_bpe"]) and callable(namespace["get_tokenizer"])


def test_runs_as_a_module_without_torch(checkout: Path) -> None:
    # torch is importable nowhere in the child: the command must not need it.
    code = "import sys, runpy; sys.modules['torch'] = None; sys.argv[0] = 'swap_in'; "
    code += "runpy.run_module('cs336_bpe.commands.swap_in', run_name='__main__')"
    result = subprocess.run(
        [sys.executable, "-c", code, str(checkout)], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert adapters(checkout).read_bytes() == EXPECTED.encode()
    command = [sys.executable, "-m", "cs336_bpe.commands.swap_in", str(checkout / "nowhere")]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_symlinked_file_is_rewritten_where_it_lives(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "adapters.py"
    real.parent.mkdir()
    real.write_bytes(MOCK.encode())
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "adapters.py").symlink_to(real)
    assert swap_in.main([str(tmp_path)]) == 0
    assert (tmp_path / "tests" / "adapters.py").is_symlink() and real.read_bytes() == EXPECTED.encode()
    assert (real.parent / "adapters.py.orig").read_bytes() == MOCK.encode()
