"""Both CS336 workflows, end to end, on a mock assignment checkout built in a temporary directory.

Beside: a checkout that keeps its own `cs336_basics` (installed editable the way the handout's uv
build backend does it, a .pth with the checkout's root) gets this project with `pip install` and
`python -m cs336_bpe.commands.swap_in` swaps our run_train_bpe and get_tokenizer into its tests/adapters.py;
a test there trains on corpus.en through them against the reference merges, while
`import cs336_basics` stays the student's, from any directory.
As the submission: the handout's tests copied into a copy of this repository by
scripts/add_handout_tests.py, which swaps our adapters in, run beside ours, and
scripts/make_submission.py packs source only.

It builds the project (about a minute), so it is in the exhaustive tier (`pytest --exhaustive`). The scratch
virtual environment borrows this environment's packages (regex, tqdm, pytest, setuptools, Cython)
through a .pth line, and installs with --no-build-isolation --no-deps, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support import FIXTURES, REPO_ROOT

pytestmark = pytest.mark.exhaustive  # builds the project: about a minute
HANDOUT_TEST_NAME = "test_handout_bpe.py"
REFERENCE_TEST = "test_train_bpe_matches_the_reference"
OURS = "tests/test_known_answers.py"
FIXTURE_NAMES = ["corpus.en", "train-bpe-reference-merges.txt", "train-bpe-reference-vocab.json"]

# The mock handout: written here, modelled on the assignment's layout, none of its code.
STUDENT_INIT = 'OWNER = "student"\n'
STUDENT_MODEL = "class TransformerLM:\n    pass\n"
STUDENT_PYPROJECT = '[project]\nname = "cs336_basics"\nversion = "1.0.0"\n'
HANDOUT_COMMON = """\
import os
from pathlib import Path

FIXTURES_PATH = Path(os.environ.get("MOCK_FIXTURES", Path(__file__).parent / "fixtures"))


def byte_decoder() -> dict[str, int]:
    # GPT-2's printable stand-ins for bytes: printable Latin-1 bytes stand for themselves, the rest
    # for chr(256), chr(257), ... in byte order.
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {byte: chr(byte) for byte in kept}
    for byte in range(256):
        if byte not in chars:
            chars[byte] = chr(256 + len(chars) - len(kept))
    return {char: byte for byte, char in chars.items()}
"""
HANDOUT_CONFTEST = """\
import pytest


@pytest.fixture
def handout_fixture() -> str:
    return "the handout's conftest is loaded"
"""
HANDOUT_ADAPTERS = """\
from __future__ import annotations

import os
from typing import Any


def run_linear(d_in, d_out, weights, in_features):
    raise NotImplementedError


def get_tokenizer(vocab, merges, special_tokens: list[str] | None = None) -> Any:
    \"\"\"Return a BPE tokenizer over vocab and merges.\"\"\"
    raise NotImplementedError


def run_train_bpe(input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str], **kwargs):
    \"\"\"Train a BPE tokenizer; return (vocab, merges).\"\"\"
    raise NotImplementedError
"""
HANDOUT_TEST = """\
import json
import sys

import cs336_basics

from .adapters import get_tokenizer, run_train_bpe
from .common import FIXTURES_PATH, byte_decoder


def decode(token: str) -> bytes:
    decoder = byte_decoder()
    return bytes(decoder[char] for char in token)


def test_train_bpe_matches_the_reference(handout_fixture):
    vocab, merges = run_train_bpe(FIXTURES_PATH / "corpus.en", 500, ["<|endoftext|>"])
    with open(FIXTURES_PATH / "train-bpe-reference-merges.txt", encoding="utf-8") as file:
        reference = [tuple(decode(part) for part in line.rstrip().split(" ")) for line in file]
    assert merges == reference
    with open(FIXTURES_PATH / "train-bpe-reference-vocab.json", encoding="utf-8") as file:
        reference_vocab = {index: decode(token) for token, index in json.load(file).items()}
    assert set(vocab) == set(reference_vocab) and set(vocab.values()) == set(reference_vocab.values())

    tokenizer = get_tokenizer(vocab, merges, ["<|endoftext|>"])
    text = "Once upon a time, héllo wörld!<|endoftext|>The end."
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert vocab[ids[ids.index(256)]] == b"<|endoftext|>"
    assert list(tokenizer.encode_iterable([text[:20], text[20:]])) == ids


def test_the_students_package_is_still_theirs():
    from cs336_basics.model import TransformerLM  # noqa: F401

    assert cs336_basics.OWNER == "student"
    run_train_bpe(FIXTURES_PATH / "corpus.en", 300, ["<|endoftext|>"])
    ours = [name for name, module in sys.modules.items() if name.split(".")[0] == "cs336_basics"
            and "site-packages" in str(getattr(module, "__file__", ""))]
    assert ours == []
"""


def setuptools_builds_wheels() -> bool:
    from importlib.metadata import version

    return tuple(int(part) for part in version("setuptools").split(".")[:2]) >= (70, 1)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scratch_environment(**env: str) -> dict[str, str]:
    environment = {**os.environ, "PYTHONNOUSERSITE": "1", **env}
    for name in ("PYTHONPATH", "CS336_TRAINER"):  # the scratch venv must find only what it installed
        environment.pop(name, None)
    return environment


def run(args: list[str | Path], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = scratch_environment(**env)
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def write_files(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")


def write_mock_checkout(root: Path) -> Path:
    """A student's assignment checkout: their own cs336_basics, the handout's tests with its adapter stubs."""
    missing = [name for name in FIXTURE_NAMES if not (FIXTURES / name).is_file()]
    if missing:
        pytest.skip(f"fixtures {missing} not found in {FIXTURES} (set CS336_FIXTURES)")
    write_files(
        root,
        {
            "pyproject.toml": STUDENT_PYPROJECT,
            "cs336_basics/__init__.py": STUDENT_INIT,
            "cs336_basics/model.py": STUDENT_MODEL,
            "tests/__init__.py": "",
            "tests/common.py": HANDOUT_COMMON,
            "tests/conftest.py": HANDOUT_CONFTEST,
            "tests/adapters.py": HANDOUT_ADAPTERS,
            "tests/test_handout_bpe.py": HANDOUT_TEST,
            "tests/_snapshots/test_handout_bpe.txt": "snapshot\n",
            **{f"tests/fixtures/{name}": (FIXTURES / name).read_text(encoding="utf-8") for name in FIXTURE_NAMES},
        },
    )
    return root


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of this repository's source, installed into a scratch venv beside a mock checkout, and a
    second, untouched mock checkout as the handout to copy tests from."""
    for module in ("setuptools", "Cython", "pip"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed here, and the offline build needs it")
    if importlib.util.find_spec("wheel") is None and not setuptools_builds_wheels():
        pytest.skip("setuptools < 70.1 builds wheels only with the wheel package: pip install 'setuptools>=70.1'")
    root = tmp_path_factory.mktemp("workflow")
    source = root / "cs336-bpe"
    files, _ = load_script("make_submission").select_files(REPO_ROOT, max_bytes=10**9)
    for relative in files:
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_bytes((REPO_ROOT / relative).read_bytes())

    venv = root / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=root)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run([python, "-c", where], cwd=root).stdout.strip())
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "borrowed_packages.pth").write_text("\n".join(sorted(borrowed)) + "\n", encoding="utf-8")

    checkout = write_mock_checkout(root / "assignment1-basics")
    # What the handout's uv build backend installs for the checkout itself: its root on sys.path.
    (site / "cs336_basics_editable.pth").write_text(f"{checkout}\n", encoding="utf-8")
    # The documented install, offline: build tools and dependencies come from this environment.
    run([python, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", source], cwd=root)
    run([python, "-m", "cs336_bpe.commands.swap_in", checkout], cwd=root)  # the documented second step
    assert "from cs336_bpe import train_bpe" in (checkout / "tests" / "adapters.py").read_text(encoding="utf-8")
    handout = write_mock_checkout(root / "handout")
    return {"root": root, "source": source, "python": python, "checkout": checkout, "handout": handout}


@pytest.mark.parametrize("pure", ["0", "1"])
def test_beside_the_students_own_package(workspace: dict[str, Path], pure: str) -> None:
    python, checkout = workspace["python"], workspace["checkout"]
    pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    result = run([python, *pytest_args], cwd=checkout, CS336_PURE_PYTHON=pure)
    assert "2 passed" in result.stdout
    # From anywhere else, too: the student's package, found through its .pth, is not shadowed by ours.
    probe = "import cs336_basics, cs336_bpe; print(cs336_basics.OWNER, cs336_bpe.trainer_status()['bpe_v7'].available)"
    shown = run([python, "-c", probe], cwd=workspace["root"], CS336_PURE_PYTHON=pure).stdout.split()
    assert shown[0] == "student"
    assert (shown[1] == "True") == (pure == "0")  # compiled and loaded unless pure Python is forced
    # Loading our compiled code neither imports the student's package nor leaves anything under its name.
    probe = (
        "import sys, cs336_bpe; cs336_bpe.train_bpe(sys.argv[1], 300, ['<|endoftext|>']); "
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'cs336_basics'))"
    )
    corpus = checkout / "tests" / "fixtures" / "corpus.en"
    assert run([python, "-c", probe, corpus], cwd=workspace["root"], CS336_PURE_PYTHON=pure).stdout.strip() == "[]"


def test_as_the_submission(workspace: dict[str, Path]) -> None:
    python, source, handout = workspace["python"], workspace["source"], workspace["handout"]
    ours_before = {path: path.read_bytes() for path in (source / "tests").rglob("*.py")}
    run([python, source / "scripts" / "add_handout_tests.py", handout], cwd=source)
    assert all(path.read_bytes() == data for path, data in ours_before.items())  # nothing of ours overwritten
    assert (source / "tests" / "conftest.py").read_text(encoding="utf-8") == HANDOUT_CONFTEST
    assert (source / "tests" / "fixtures" / "corpus.en").is_file()
    assert (source / "tests" / "adapters.py.orig").read_text(encoding="utf-8") == HANDOUT_ADAPTERS
    assert "from cs336_bpe import train_bpe" in (source / "tests" / "adapters.py").read_text(encoding="utf-8")

    # The handout's tests and ours, side by side in this repository's tests/, with the fixtures it brought.
    result = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/{HANDOUT_TEST_NAME}::{REFERENCE_TEST}", OURS],
        cwd=source,
        CS336_PURE_PYTHON="1",
        CS336_FIXTURES="",
    )
    assert " failed" not in result.stdout and "passed" in result.stdout

    # Build products, data and venvs in the checkout never reach the archive.
    write_files(source, {"data/owt_train.txt": "data\n", ".venv/bin/activate": "venv\n", "out/vocab.pkl": "out\n"})
    archive = workspace["root"] / "submission.zip"
    run([python, source / "scripts" / "make_submission.py", "--root", source, "-o", archive], cwd=source)
    names = set(zipfile.ZipFile(archive).namelist())
    expected = {"pyproject.toml", "cs336_basics/__init__.py", "cs336_basics/bpe_v7.py", "cpp/merge/bpe_merge.cpp"}
    assert expected | {"tests/adapters.py", f"tests/{HANDOUT_TEST_NAME}", "scripts/make_submission.py"} <= names
    leaked = [
        name for name in names
        if name.startswith(("build/", "data/", ".venv/", "out/", "tests/fixtures/", "tests/_snapshots/"))
        or name.endswith((".so", ".egg-info", ".pkl")) or ".egg-info/" in name or "__pycache__" in name
    ]  # fmt: skip
    assert leaked == []
    assert (source / "build").is_dir()  # pip built in the copy, so the exclusion above was really exercised


INSTALLED_PICKLING = """\
import pickle, sys
import cs336_bpe
from cs336_bpe.native import _count_cpp
counts = cs336_bpe.count_words([sys.argv[1]], ["<|endoftext|>"])
again = pickle.loads(pickle.dumps(counts))
assert again.counts == counts.counts and len(again) > 1000
table = _count_cpp.count_words(sys.argv[1], ["<|endoftext|>"], 1)
assert type(table).__module__ == "cs336_bpe.native._count_cpp", type(table).__module__
assert pickle.loads(pickle.dumps(table)).to_dict() == counts.counts
print("pickled", len(counts))
"""


def test_the_installed_seeding_command_names_what_it_lacks(workspace: dict[str, Path]) -> None:
    # The mock handout's fixtures hold no GPT-2 files: the installed command runs and says which one.
    fixtures = workspace["checkout"] / "tests" / "fixtures"
    seeding = [workspace["python"].parent / "cs336-seed-tiktoken", fixtures]
    result = subprocess.run(
        seeding, cwd=workspace["root"], env=scratch_environment(), capture_output=True, text=True, timeout=120
    )
    assert (result.returncode, result.stderr) == (2, f"error: {fixtures / 'gpt2_merges.txt'} not found: "
                                                      "give the handout's tests/fixtures directory\n")


def test_the_installed_package_pickles_its_counts(workspace: dict[str, Path]) -> None:
    # Compiled classes carry the installed name: pickle finds them outside any checkout.
    corpus = workspace["checkout"] / "tests" / "fixtures" / "corpus.en"
    result = run([workspace["python"], "-c", INSTALLED_PICKLING, corpus], cwd=workspace["root"])
    assert result.stdout.startswith("pickled")


def test_the_installed_commands_count_on_a_local_cluster(workspace: dict[str, Path]) -> None:
    python, root = workspace["python"], workspace["root"]
    has_dask = run([python, "-c", "import importlib.util as u; print(bool(u.find_spec('distributed')))"], cwd=root)
    if has_dask.stdout.strip() != "True":
        pytest.skip("Dask is not installed here (the cluster extra)")
    corpus = workspace["checkout"] / "tests" / "fixtures" / "corpus.en"
    scripts = python.parent
    out = root / "cluster-out"
    run([scripts / "cs336-train-bpe", "auto", out, "-d", corpus, "--cluster", "local:2", "-v", "400", "-q"], cwd=root)
    run([scripts / "cs336-count-words", corpus, "-o", root / "c.counts", "--cluster", "local:2", "-q"], cwd=root)
    compare = (
        "import sys, cs336_bpe\n"
        "from cs336_bpe.outputs.serialization import load_merges\n"
        "expected = cs336_bpe.train_bpe(sys.argv[1], 400, ['<|endoftext|>'])[1]\n"
        "assert load_merges(sys.argv[2]) == expected\n"
        "assert cs336_bpe.train_bpe_from_counts(sys.argv[3], 400)[1] == expected\n"
        "print('same')"
    )
    result = run([python, "-c", compare, corpus, out / "merges.txt", root / "c.counts"], cwd=root)
    assert result.stdout.strip() == "same"
