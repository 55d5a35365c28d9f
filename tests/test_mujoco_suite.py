"""bench/mujoco_suite.py, one tiny part end to end: it launches, reports, and keeps a finished part."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.testing import scaled

pytest.importorskip("torch")
pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "bench" / "mujoco_suite.py"


def _suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SYMPHONY_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, str(SUITE), "--folder", str(tmp_path / "runs"), "--out", str(tmp_path)]
        + list(args),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(600),
    )


@pytest.mark.timeout(900)
@pytest.mark.integration
def test_a_part_runs_through_surreal_launch_and_lands_in_the_table(tmp_path):
    part = ("--algo", "ppo", "--env", "Hopper-v5", "--seed", "1", "--steps", "2048")
    # 4 updates of 512 env steps (the MuJoCo family's 2,048-step batch would leave the budget
    # with a single, last update that may not land before the actors stop)
    small = ("--set", "env.num_envs=2", "--set", "algo.batch_size=512")
    first = _suite(tmp_path, *part, "--actors", "1", *small)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    run = tmp_path / "runs" / "ppo-hopper-v5" / "s1"  # surreal launch lower-cases --name
    assert (run / "metrics.jsonl").is_file()
    table = (tmp_path / "mujoco_suite.md").read_text()
    row = next(line for line in table.splitlines() if "| ppo | Hopper-v5 |" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "1" and int(cells[3].replace(",", "")) >= 2048  # one seed, budget reached
    assert "nan" not in row  # a part with no evaluation yet shows "-"
    assert "| td3 | HalfCheetah-v5 | 0 | - | not run | - | - | - | CleanRL 9,583 | 9,583 |" in table
    # the finished part ends with a greedy evaluation of its last checkpoint, kept for reports
    final = json.loads((run / "final_eval.json").read_text())
    assert final["episodes"] == 10 and final["step"] >= 2048
    assert f"{final['mean']:,.0f}" == cells[4]
    # a finished part is kept, not run again (a suite is resumed part by part)
    again = _suite(tmp_path, *part)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{run}: finished before, kept" in again.stdout
    report = _suite(tmp_path, "--report-only")
    assert report.returncode == 0 and row in report.stdout


@pytest.mark.timeout(120)
def test_a_part_whose_launch_fails_ends_the_suite_with_one_line_not_a_traceback(tmp_path):
    part = ("--algo", "td3", "--env", "Hopper-v5", "--steps", "2048", "--set", "algo.nope=1")
    failed = _suite(tmp_path, *part)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    run = tmp_path / "runs" / "td3-hopper-v5" / "s1"
    assert f"{run}: surreal launch ended with code 2; see {run}/logs" in failed.stderr, (
        failed.stderr[-2000:]
    )
