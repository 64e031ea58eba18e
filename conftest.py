"""One list of trainers for every test; versions that cannot run here are skipped with the reason.
Shared paths and helpers live in tests/support.py. This file is at the root, not in tests/, so that
the CS336 handout's own tests/conftest.py can be copied in beside our tests
(scripts/add_handout_tests.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cs336_basics import TRAINERS, trainer_status
from tests.support import FIXTURES

_STATUS = trainer_status()


@pytest.fixture(params=TRAINERS)
def trainer(request: pytest.FixtureRequest) -> str:
    """Every registered trainer version; compiled ones that are not built are skipped, with why."""
    status = _STATUS[request.param]
    if not status.available:
        pytest.skip(status.reason)
    return request.param


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"fixtures directory {FIXTURES} not found (set CS336_FIXTURES)")
    return FIXTURES
