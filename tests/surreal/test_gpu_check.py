"""bench/gpu_check.sh: the one-command GPU check; here its --dry-run, which checks every launch
it would make with `surreal launch --dry-run` (the full check needs a GPU machine)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def gpu_check(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, SYMPHONY_HOME=str(tmp_path / "home"))
    return subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry-run", "--actors", "2", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=scaled(280),
    )


@pytest.mark.integration
def test_dry_run_plans_ppo_and_td3_and_both_launches_pass_their_checks(tmp_path):
    result = gpu_check(tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 actors x 8 envs x 64 steps = 1024 per PPO update" in result.stdout
    assert "launch ppo" in result.stdout and "algo.twin_critics=true" in result.stdout
    assert result.stdout.count("-> ok") == 2


@pytest.mark.integration
def test_a_device_that_is_not_there_stops_the_check_before_it_runs(tmp_path):
    result = gpu_check("--device", "cuda:64", tmp_path=tmp_path)
    assert result.returncode == 1
    assert "REFUSED" in result.stdout and "run.device=cuda:64" in result.stderr
