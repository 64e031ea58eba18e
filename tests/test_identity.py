"""One package under two names: `cs336_basics` (this checkout's folder) and `cs336_bpe` (installed) are
the same modules, classes and exceptions in a process, whichever is imported first."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

import cs336_basics
from cs336_basics._identity import MOVED_MODULES
from tests.support import REPO_ROOT


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_both_names_are_one_package() -> None:
    import cs336_bpe
    import cs336_bpe.tokenizer

    import cs336_basics.tokenizer

    assert cs336_basics is cs336_bpe
    assert cs336_basics.tokenizer is cs336_bpe.tokenizer
    assert cs336_basics.tokenizer.__name__ == "cs336_bpe.tokenizer"
    assert cs336_basics.tokenizer.__spec__.name == "cs336_bpe.tokenizer"


def test_an_error_raised_through_one_name_is_caught_through_the_other() -> None:
    import cs336_bpe

    with pytest.raises(cs336_basics.BPEInputError):
        cs336_bpe.train_bpe(REPO_ROOT / "no-such-file.txt", 300, ["<|endoftext|>"])


def installed_here() -> bool:
    """Whether `cs336_bpe` is installed (editable) from this checkout, not from another copy."""
    code = "import importlib.util as u; s = u.find_spec('cs336_bpe'); print(s.origin if s else '')"
    origin = run_python(code).stdout.strip()
    return origin == str(REPO_ROOT / "cs336_basics" / "__init__.py")


@pytest.mark.parametrize("first", ["cs336_basics", "cs336_bpe"])
def test_either_import_order_gives_one_copy_of_each_module(first: str) -> None:
    second = {"cs336_basics": "cs336_bpe", "cs336_bpe": "cs336_basics"}[first]
    code = (
        f"import sys, {first}.trainers, {second}.trainers\n"
        f"assert {first}.trainers is {second}.trainers\n"
        "print(sorted(set(m.__name__ for n, m in sys.modules.items() if n.startswith('cs336_'))))"
    )
    result = run_python(code)
    if first == "cs336_bpe" and not installed_here():
        # cs336_bpe came from another copy: the checkout refuses to become a second one.
        assert result.returncode == 1 and "a different copy than this checkout" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    names = ast.literal_eval(result.stdout)
    assert names and all(name.split(".")[0] == "cs336_bpe" for name in names)


def test_the_checkout_runs_as_cs336_bpe_when_nothing_is_installed() -> None:
    # Without the editable install's finder, `cs336_basics` binds this folder as cs336_bpe itself.
    code = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__.lower()]\n"
        "import cs336_basics, cs336_basics.trainers\n"
        "import cs336_bpe\n"
        "print(cs336_basics is cs336_bpe, cs336_basics.trainers.__name__, cs336_bpe.__file__)"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    same, name, where = result.stdout.split()
    assert (same, name) == ("True", "cs336_bpe.trainers")
    assert where == str(REPO_ROOT / "cs336_basics" / "__init__.py")


def test_modules_run_with_python_m_under_the_checkout_name() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cs336_basics.commands.count_cli", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "cs336-count-words" in result.stdout


def test_importing_the_package_loads_only_its_identity() -> None:
    # The public names are imported on first use: `import cs336_bpe` loads no trainer, regex or extension.
    code = (
        "import sys, cs336_bpe\n"
        "loaded = sorted(n for n in sys.modules if n.startswith('cs336_bpe.') or n in ('regex', 'tqdm'))\n"
        "print(loaded)\n"
        "from cs336_bpe import Tokenizer, train_bpe, BPEInputError, WordCounts, count_words\n"
        "import cs336_bpe as package\n"
        "print(sorted(package.__all__) == sorted(n for n in package.__all__ if hasattr(package, n)))\n"
        "print(package.trainers.train_bpe is train_bpe)"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    loaded, every_name_resolves, submodule_attribute = result.stdout.split("\n")[:3]
    assert ast.literal_eval(loaded) == ["cs336_bpe._identity"]  # the old module names' aliases
    assert (every_name_resolves, submodule_attribute) == ("True", "True")


def test_an_unknown_attribute_of_the_package_is_an_attribute_error() -> None:
    import cs336_bpe

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        cs336_bpe.no_such_name  # noqa: B018


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_module_that_moved_imports_by_its_old_name_with_a_warning(old: str) -> None:
    import importlib

    new = importlib.import_module(f"cs336_bpe.{MOVED_MODULES[old]}")
    sys.modules.pop(f"cs336_bpe.{old}", None)
    sys.modules.pop(f"cs336_basics.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"cs336_bpe.{old} is now cs336_bpe.{MOVED_MODULES[old]}"):
        assert importlib.import_module(f"cs336_bpe.{old}") is new
    assert importlib.import_module(f"cs336_basics.{old}") is new


def test_a_command_runs_with_python_m_under_its_old_name() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cs336_basics.count_cli", "--help"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0 and "cs336-count-words" in result.stdout, result.stderr
