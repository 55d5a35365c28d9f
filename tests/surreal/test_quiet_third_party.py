"""Third-party noise stays off the terminal of `surreal launch` and `surreal eval`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from symphony.testing import scaled

pytestmark = pytest.mark.timeout(180)


@pytest.mark.integration
def test_robosuite_import_warnings_do_not_reach_the_terminal(tmp_path):
    pytest.importorskip("robosuite")
    result = subprocess.run(
        [sys.executable, "-m", "surreal", "launch", "ppo", "--env", "robosuite:Lift", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=scaled(170),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "[robosuite" not in result.stdout + result.stderr
    assert '"id": "robosuite:Lift"' in result.stdout  # it did import robosuite and plan the run
