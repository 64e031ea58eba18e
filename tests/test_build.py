"""The build did what it should: compiled trainers present when expected, OpenMP not silently lost."""

from __future__ import annotations

import os
import subprocess

import pytest

from cs336_basics import TRAINERS, openmp_enabled, trainer_status
from cs336_basics.tokenizer import native_available
from cs336_basics.trainers import COMPILED_TRAINERS, pure_python_forced
from tests.bpe_support import REPO_ROOT


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def test_pure_python_trainers_always_run() -> None:
    status = trainer_status()
    assert [name for name in TRAINERS if name not in COMPILED_TRAINERS and status[name] is not None] == []


def test_compiled_trainers_are_built_when_expected() -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: compiled trainers are meant to be skipped")
    if not env_flag("CS336_EXPECT_COMPILED"):
        pytest.skip("set CS336_EXPECT_COMPILED=1 to require the compiled trainers (CI does)")
    missing = {name: reason for name, reason in trainer_status().items() if reason is not None}
    assert missing == {}
    assert native_available(), "the tokenizer's compiled encoder (cs336_basics._encode) is not built"


def test_openmp_was_not_silently_lost() -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    native = pytest.importorskip("cs336_basics._native", reason="the native extension is not built")
    if env_flag("CS336_ALLOW_NO_OPENMP"):
        pytest.skip("CS336_ALLOW_NO_OPENMP is set: this build may lack OpenMP")
    assert openmp_enabled(), "built without OpenMP although the compiler supports it (see setup.py's probe)"
    assert native.openmp_enabled()


def test_generated_sources_are_not_tracked() -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    generated = [
        path
        for path in tracked.stdout.splitlines()
        if path.endswith((".so", ".o", ".pyd"))
        or (path.startswith("cs336_basics/") and path.endswith((".c", ".cpp")))
    ]
    assert generated == []


def test_counting_really_runs_on_several_threads() -> None:
    if pure_python_forced():
        pytest.skip("CS336_PURE_PYTHON is set: no native code is loaded")
    native = pytest.importorskip("cs336_basics._native", reason="the native extension is not built")
    if not native.openmp_enabled():
        if env_flag("CS336_ALLOW_NO_OPENMP"):
            counts = native.count_words_in_buffer(b"a few words here\n" * 50_000, [], 2, 1 << 14)
            assert counts.threads_used == 1  # the one-thread fallback still counts every chunk
            return
        pytest.fail("built without OpenMP although the compiler supports it (see setup.py's probe)")
    # Many small chunks with dynamic scheduling, and enough work (~0.1 s) that a thread descheduled
    # for a few milliseconds on a busy machine still gets some.
    counts = native.count_words_in_buffer(b"a few words here\n" * 1_500_000, [], 2, 1 << 16)
    assert counts.chunks > 100
    assert counts.threads_used == 2
