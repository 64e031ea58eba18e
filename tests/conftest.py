"""One list of trainers for every test; versions that cannot run here are skipped with the reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cs336_basics import TRAINERS, trainer_status

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("CS336_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"

_STATUS = trainer_status()


def require_fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not found in {FIXTURES} (set CS336_FIXTURES to the assignment's fixtures)")
    return path


@pytest.fixture(params=TRAINERS)
def trainer(request: pytest.FixtureRequest) -> str:
    """Every registered trainer version; compiled ones that are not built are skipped, with why."""
    reason = _STATUS[request.param]
    if reason is not None:
        pytest.skip(reason)
    return request.param


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"fixtures directory {FIXTURES} not found (set CS336_FIXTURES)")
    return FIXTURES
