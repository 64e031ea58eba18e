"""Paths and helpers the tests share, as a plain module: tests import from here, never from
conftest.py (pytest loads conftest as a plugin; importing it again makes a second copy)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("CS336_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"


def require_fixture(name: str) -> Path:
    """The path of an assignment fixture; skips the calling test when it is missing."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not found in {FIXTURES} (set CS336_FIXTURES to the assignment's fixtures)")
    return path
