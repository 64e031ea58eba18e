"""Release artifacts: `python -m build` makes an sdist that holds everything the extensions are built from
and, from that sdist, a wheel that works where no compiler is (a fresh venv, nothing on PATH but the venv)
and passes scripts/wheel_smoke.py, the checks cibuildwheel runs on every wheel.

It builds the project (a minute or two), so it runs when CS336_TEST_WHEEL=1 (CI sets it). The build runs
without isolation on this environment's setuptools and Cython, and the fresh venv borrows this
environment's dependencies (regex, tqdm) through a .pth line, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from cs336_basics import openmp_enabled
from cs336_basics.native.backend import NATIVE_MODULES
from tests.support import REPO_ROOT

pytestmark = pytest.mark.skipif(
    os.environ.get("CS336_TEST_WHEEL", "") != "1",
    reason="set CS336_TEST_WHEEL=1 to build an sdist and a wheel and install the wheel into a fresh venv (CI does)",
)


def run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = env if env is not None else {**os.environ}
    environment.pop("PYTHONPATH", None)  # the fresh venv must find only what it installed
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def source_files() -> list[PurePosixPath]:
    """The checkout's source, as scripts/make_submission.py selects it: no build products, venvs or data."""
    spec = importlib.util.spec_from_file_location("make_submission", REPO_ROOT / "scripts" / "make_submission.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.select_files(REPO_ROOT, max_bytes=10**9)[0]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # build.__main__, not build: a build/ folder in the checkout would pass for a namespace package.
    for module in ("build.__main__", "setuptools", "Cython"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed here, and the offline build needs it (pip install build)")
    root = tmp_path_factory.mktemp("wheel")
    source = root / "cs336-bpe"
    for relative in source_files():  # a clean copy: no build products of this checkout
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_bytes((REPO_ROOT / relative).read_bytes())
    dist = root / "dist"
    # Run from `root`: a build/ folder in the working directory would shadow the `build` package.
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source], cwd=root)
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    return {"root": root, "source": source, "sdist": sdist, "wheel": wheel}


def test_the_sdist_holds_what_the_extensions_are_built_from(artifacts: dict[str, Path]) -> None:
    with tarfile.open(artifacts["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = [path.relative_to(REPO_ROOT).as_posix() for path in sorted((REPO_ROOT / "cpp").glob("*/*.[ch]pp"))]
    bindings = sorted(REPO_ROOT.glob("cs336_basics/native/*.p[yx][xd]"))
    needed += [path.relative_to(REPO_ROOT).as_posix() for path in bindings]
    assert any(name.endswith(".hpp") for name in needed) and any(name.endswith(".pyx") for name in needed)
    assert [name for name in needed if name not in names] == []
    assert {"setup.py", "pyproject.toml", "cs336_basics/native/backend.py"} <= names
    built = [name for name in names if name.endswith((".so", ".pyd", ".o")) or name.startswith("cs336_basics/native/_")
             and name.endswith((".c", ".cpp"))]
    assert built == [], "build products or Cython's generated sources in the sdist"


def test_the_wheel_holds_every_compiled_module(artifacts: dict[str, Path]) -> None:
    with zipfile.ZipFile(artifacts["wheel"]) as archive:
        names = archive.namelist()
    for module in NATIVE_MODULES:
        prefix = f"cs336_bpe/native/{module}."
        assert any(name.startswith(prefix) and name.endswith((".so", ".pyd")) for name in names), module
    assert not any(name.endswith((".c", ".cpp", ".hpp", ".o")) for name in names)  # sources stay in the sdist


def test_the_wheel_works_without_a_compiler(artifacts: dict[str, Path]) -> None:
    root = artifacts["root"]
    venv = root / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=root)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", artifacts["wheel"]], cwd=root)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run([python, "-c", where], cwd=root).stdout.strip())
    # regex and tqdm from this environment, after the venv's own site-packages (which holds the wheel).
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "borrowed_packages.pth").write_text("\n".join(sorted(borrowed)) + "\n", encoding="utf-8")

    # Nothing on PATH but the venv, and compilers that do not exist: an attempt to build would fail.
    env = {"PATH": str(venv / "bin"), "PYTHONNOUSERSITE": "1", "CC": "/nonexistent/cc", "CXX": "/nonexistent/c++",
           "HOME": str(root)}
    command = [python, REPO_ROOT / "scripts" / "wheel_smoke.py"] + (["--require-openmp"] if openmp_enabled() else [])
    result = run(command, cwd=root, env=env)
    assert "wheel_smoke: ok" in result.stdout
    assert f"cs336_bpe from {site}" in result.stdout, result.stdout  # the wheel's, not this checkout's
