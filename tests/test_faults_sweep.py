"""The exhaustive tier (CI) runs the fast fault sweep (`scripts/fault_sweep.py --fast`): every case handled."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT


@pytest.mark.exhaustive  # every family it sweeps has its own tests in the default tier (tests/test_faults_*.py)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sweep uses FIFOs, /proc and rlimits")
def test_fast_fault_sweep_handles_every_case() -> None:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "fault_sweep.py"), "--fast", "--timeout", "120"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "cases handled" in result.stdout.splitlines()[-1]
