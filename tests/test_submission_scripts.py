"""scripts/add_handout_tests.py and scripts/make_submission.py on small directories (the whole
workflow, with a build and an install, is tests/test_assignment_workflow.py)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

from tests.support import REPO_ROOT


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


add_handout_tests = load_script("add_handout_tests")
make_submission = load_script("make_submission")


def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")


# The handout's adapters.py in miniature (tests/test_swap_in.py has a fuller mock).
ADAPTER_STUBS = """\
from __future__ import annotations

import os

import torch


def get_tokenizer(vocab, merges, special_tokens=None):
    \"\"\"A BPE tokenizer.\"\"\"
    raise NotImplementedError


def run_train_bpe(input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str], **kwargs):
    raise NotImplementedError
"""


def test_copy_refuses_to_overwrite_until_told(tmp_path: Path) -> None:
    handout, dest = tmp_path / "handout", tmp_path / "ours" / "tests"
    write(handout, {"tests/adapters.py": ADAPTER_STUBS, "tests/conftest.py": "theirs\n", "tests/fixtures/a.txt": "a\n"})
    write(dest, {"conftest.py": "ours\n", "test_ours.py": "mine\n"})
    assert add_handout_tests.main([str(handout), "--dest", str(dest)]) == 1
    assert not (dest / "adapters.py").exists()  # nothing copied, not even the files that were free
    assert (dest / "conftest.py").read_text(encoding="utf-8") == "ours\n"

    assert add_handout_tests.main([str(handout), "--dest", str(dest), "--update"]) == 0
    assert (dest / "conftest.py").read_text(encoding="utf-8") == "theirs\n"
    assert (dest / "fixtures" / "a.txt").is_file() and (dest / "test_ours.py").read_text(encoding="utf-8") == "mine\n"
    # Copied, then our run_train_bpe and get_tokenizer swapped in; the handout's file kept beside.
    swapped = (dest / "adapters.py").read_text(encoding="utf-8")
    assert "from cs336_bpe import train_bpe" in swapped and "from cs336_bpe import Tokenizer" in swapped
    assert "import torch\n" in swapped and (dest / "adapters.py.orig").read_text(encoding="utf-8") == ADAPTER_STUBS
    assert add_handout_tests.main([str(handout), "--dest", str(dest)]) == 0  # again: all the same now
    assert (dest / "adapters.py").read_text(encoding="utf-8") == swapped


def test_copy_stands_when_the_swap_is_refused(tmp_path: Path, capsys) -> None:
    handout, dest = tmp_path / "handout", tmp_path / "ours" / "tests"
    write(handout, {"tests/adapters.py": "def run_train_bpe():\n    raise NotImplementedError\n"})
    assert add_handout_tests.main([str(handout), "--dest", str(dest)]) == 1
    assert (dest / "adapters.py").read_bytes() == (handout / "tests" / "adapters.py").read_bytes()
    out, err = capsys.readouterr()
    assert "copied 1 new and 0 updated file into" in out and "0 were already there" in out
    assert "no top-level get_tokenizer" in err and "paste run_train_bpe and get_tokenizer" in out


def test_copy_needs_a_handout(tmp_path: Path) -> None:
    assert add_handout_tests.main([str(tmp_path), "--dest", str(tmp_path / "tests")]) == 2


def test_archive_holds_source_only(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    write(
        root,
        {
            "pyproject.toml": "[project]\n",
            "cs336_basics/__init__.py": "",
            "cs336_basics/model.py": "x = 1\n",
            "cs336_basics/native/_count_cpp.pyx": "# source\n",
            "cs336_basics/native/_count_cpp.cpp": "// Cython's output\n",
            "cs336_basics/native/_count_cpp.cpython-311-x86_64-linux-gnu.so": "binary",
            "cs336_basics/_student.cpp": "// a student's own Cython output\n",
            "cs336_basics/__pycache__/model.cpython-311.pyc": "cache",
            "cpp/merge/bpe_merge.cpp": "// source\n",
            "tests/test_model.py": "",
            "tests/fixtures/corpus.en": "data\n",
            "tests/_snapshots/test_linear.npz": "data",
            "build/lib/x.py": "",
            "cs336_bpe.egg-info/PKG-INFO": "",
            ".venv/bin/python": "",
            "data/owt_train.txt": "data\n",
            "out/vocab.pkl": "",
            "big.txt": "x" * 2_000,
        },
    )
    archive = tmp_path / "submission.zip"
    args = ["--root", str(root), "-o", str(archive), "--max-mb", "0.001"]
    assert make_submission.main(args) == 0
    assert sorted(zipfile.ZipFile(archive).namelist()) == [
        "cpp/merge/bpe_merge.cpp",
        "cs336_basics/__init__.py",
        "cs336_basics/model.py",
        "cs336_basics/native/_count_cpp.pyx",
        "pyproject.toml",
        "tests/test_model.py",
    ]
