"""Paths and helpers the tests share, as a plain module: tests import from here, never from
conftest.py (pytest loads conftest as a plugin; importing it again makes a second copy)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_fixtures() -> Path:
    # The handout's tests/fixtures/, once scripts/add_handout_tests.py has copied it in, else the
    # assignment's fixtures next to this checkout.
    handout = REPO_ROOT / "tests" / "fixtures"
    if (handout / "corpus.en").is_file():
        return handout
    return REPO_ROOT.parent / "shared" / "fixtures"


FIXTURES = Path(os.environ.get("CS336_FIXTURES") or _default_fixtures())
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"


def require_fixture(name: str) -> Path:
    """The path of an assignment fixture; skips the calling test when it is missing."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not found in {FIXTURES} (set CS336_FIXTURES to the assignment's fixtures)")
    return path
