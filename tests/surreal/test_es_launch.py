"""`surreal launch es`: a master + workers topology that learns CartPole and cleans up after itself."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from symphony.testing import scaled

pytest.importorskip("gymnasium")

from surreal.testing import surreal_cli  # noqa: E402
from tests.surreal.helpers import ES_SMALL, processes_of, status  # noqa: E402


@pytest.mark.timeout(60)
@pytest.mark.integration
def test_dry_run_shows_a_master_and_grouped_workers(tmp_path):
    result = surreal_cli(
        [
            "launch",
            "es",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "5",
            "--dry-run",
            "--set",
            "actor.group_size=2",
        ],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "- component\n  - es-master\n" in out  # the master runs as "learner"
    assert all(f"name: es-worker-{i}\n" in out for i in range(5))
    assert "group: workers-2\n" in out and "group: workers-3\n" not in out  # 5 workers, 2 per group
    assert "name: buffer\n" not in out  # no replay in ES


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_es_reaches_475_on_cartpole(tmp_path):
    before = set(Path("/dev/shm").glob("surreal-es-noise-*"))
    started = time.monotonic()
    result = surreal_cli(
        [
            "launch",
            "es",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "2",
            "--steps",
            "2000000",
            "--name",
            "cart",
            "--trial",
            "a",
            "--set",
            "run.stop_at_return=475",
            *ES_SMALL,
        ],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(360),
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "runs" / "cart" / "a"
    st = status(run)
    print(
        f"ES CartPole-v1: best eval {st['best_eval_return']:.1f} after {st['global_step']} env "
        f"steps, wall {wall:.0f} s"
    )
    assert st["best_eval_return"] >= 475
    assert not processes_of(run)
    assert (
        set(Path("/dev/shm").glob("surreal-es-noise-*")) <= before
    )  # the master removed its table
    evaluated = surreal_cli(["eval", str(run), "--episodes", "3"], tmp_path, tmp_path / "home")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "3 episodes" in evaluated.stdout
