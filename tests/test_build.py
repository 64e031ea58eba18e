"""The build and the backend switch: compiled code present when expected, OpenMP not silently lost,
environment flags and thread counts resolved in one place (cs336_basics/native/backend.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cs336_basics import TRAINERS, openmp_enabled, trainer_status
from cs336_basics.native import backend
from cs336_basics.native.backend import (
    ALLOW_NO_OPENMP_ENV,
    EXPECT_COMPILED_ENV,
    NATIVE_MODULES,
    env_flag,
    pure_python_forced,
)
from cs336_basics.tokenizer import native_available
from cs336_basics.trainers import COMPILED_TRAINERS
from tests.support import REPO_ROOT


def test_pure_python_trainers_always_run() -> None:
    status = trainer_status()
    assert [name for name in TRAINERS if name not in COMPILED_TRAINERS and not status[name].available] == []


def test_compiled_code_is_built_when_expected() -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: compiled trainers are meant to be skipped")
    if not env_flag(EXPECT_COMPILED_ENV):
        pytest.skip(f"set {EXPECT_COMPILED_ENV}=1 to require the compiled trainers (CI does)")
    missing = {name: status.reason for name, status in trainer_status().items() if not status.available}
    assert missing == {}
    assert [name for name in NATIVE_MODULES if not backend.native_available(name)] == []
    assert native_available(), "the tokenizer's compiled encoder (cs336_basics.native._encode) is not built"


def test_pure_python_flag_keeps_every_compiled_module_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.PURE_PYTHON_ENV, "1")
    for name in NATIVE_MODULES:
        with pytest.raises(backend.NativeUnavailable, match=backend.PURE_PYTHON_ENV):
            backend.load_native(name)
    assert not openmp_enabled()
    assert backend.effective_num_threads(4) == 1
    assert all(not trainer_status()[name].available for name in COMPILED_TRAINERS)
    assert native_available() is False


@pytest.mark.parametrize(("value", "on"), [("", False), ("0", False), ("no", False), ("False", False), ("1", True)])
def test_env_flags(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv("CS336_SOME_FLAG", value)
    assert env_flag("CS336_SOME_FLAG") is on


def test_openmp_was_not_silently_lost() -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    if not backend.native_available("_count_cpp"):
        pytest.skip("the native extension is not built")
    if env_flag(ALLOW_NO_OPENMP_ENV):
        pytest.skip(f"{ALLOW_NO_OPENMP_ENV} is set: this build may lack OpenMP")
    assert openmp_enabled(), "built without OpenMP although the compiler supports it (see setup.py's probe)"


def test_parallelism_convention() -> None:
    cores = backend.usable_cores()
    assert backend.resolve_parallelism(3) == 3
    assert backend.resolve_parallelism(-1) == cores
    assert backend.resolve_parallelism(-cores - 10) == 1
    assert backend.resolve_parallelism(None) == cores
    for bad, error in [(0, ValueError), (True, TypeError), (1.5, TypeError), ("2", TypeError)]:
        with pytest.raises(error):
            backend.resolve_parallelism(bad)
        with pytest.raises(error):
            backend.effective_num_threads(bad)


def test_effective_threads_are_one_without_openmp() -> None:
    # None means OpenMP's default, which OMP_NUM_THREADS sets when the runtime starts: a fresh process.
    code = "from cs336_basics.native import backend; print(backend.effective_num_threads(None))"
    environment = {**os.environ, "OMP_NUM_THREADS": "3"}
    shown = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, check=True
    ).stdout.strip()
    if openmp_enabled():
        assert backend.effective_num_threads(3) == 3
        assert shown == "3"
    else:
        assert backend.effective_num_threads(3) == 1
        assert shown == "1"


def test_generated_sources_are_not_tracked() -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    generated = [
        path
        for path in tracked.stdout.splitlines()
        if path.endswith((".so", ".o", ".a", ".pyd"))
        or (path.startswith("cs336_basics/") and path.endswith((".c", ".cpp")))
    ]
    assert generated == []


def test_counting_really_runs_on_several_threads() -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    if not backend.native_available("_count_cpp"):
        pytest.skip("the native extension is not built")
    native = backend.load_native("_count_cpp")
    if not openmp_enabled():
        if env_flag(ALLOW_NO_OPENMP_ENV):
            counts = native.count_words_in_buffer(b"a few words here\n" * 50_000, [], 2, 1 << 14)
            assert counts.threads_used == 1  # the one-thread fallback still counts every chunk
            return
        pytest.skip("built without OpenMP: test_openmp_was_not_silently_lost reports it")
    # Many small chunks with dynamic scheduling, and enough work (~0.1 s) that a thread descheduled
    # for a few milliseconds on a busy machine still gets some.
    counts = native.count_words_in_buffer(b"a few words here\n" * 1_500_000, [], 2, 1 << 16)
    assert counts.chunks > 100
    assert counts.threads_used == 2


def test_every_module_imports_without_the_posix_only_modules() -> None:
    # Windows has no resource, fcntl or termios: where the package uses them, it must do without.
    script = """
import importlib, pkgutil, sys
for name in ("resource", "fcntl", "termios"):
    sys.modules[name] = None  # an import of it now raises ImportError, as on Windows
import cs336_basics
from cs336_basics.trainers import peak_rss_bytes
failed = {}
for module in pkgutil.walk_packages(cs336_basics.__path__, "cs336_basics."):
    try:
        importlib.import_module(module.name)
    except Exception as error:
        failed[module.name] = repr(error)
print(failed, peak_rss_bytes() >= 0)
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "{} True"
