"""It learns: `surreal launch ppo --env gym:CartPole-v1 --actors 4` with its defaults solves CartPole.

The settings are the README's (default lr and step budget, the classic-control family defaults
that `surreal launch` picks; docs/learning.md): three seeds each reach a greedy evaluation of
475 within the default 100k-step budget (`run.stop_at_return=475` ends each run at the goal;
the budget is the cap). Issue 22's second claim (over 300k steps the training return stays
within 10% of its best in the last third) is not met yet and is not asserted here: two 300k
runs held 500 for 100k+ steps and then fell to ~200-390 (docs/learning.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from surreal.testing import surreal_cli
from tests.surreal.helpers import metric_records

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

DEFAULT_STEPS = 100_000  # RunConfig.steps: the README line sets no --steps

# Fast settings for tests that need a run that learns CartPole quickly under load (e.g.
# test_hostile_peers): the pre-issue-22 recipe, pinned so family defaults do not change it.
CARTPOLE = [
    "--set",
    "env.num_envs=8",
    "--set",
    "actor.rollout_length=32",
    "--set",
    "algo.update_epochs=4",
    "--set",
    "algo.num_minibatches=4",
    "--set",
    "algo.lr=1e-3",
    "--set",
    "algo.ent_coef=0.0",
    "--set",
    "algo.norm_obs=true",
    # the settings these runs were tuned with, before the classic-control family defaults
    # (surreal.algos.families): the other tests' CartPole runs keep learning as they did
    "--set",
    "algo.gamma=0.99",
    "--set",
    "algo.gae_lambda=0.95",
    "--set",
    "algo.anneal_clip=false",
    "--set",
    "eval.episodes=10",
    "--set",
    "eval.every_s=2",
    "--set",
    "run.stop_at_return=475",
]


def _launch(tmp_path: Path, trial: str, *args: str, timeout: float) -> tuple[Path, float]:
    started = time.monotonic()
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "4",
            "--name",
            "cartpole",
            "--trial",
            trial,
            "--quiet",
            *args,
        ],
        tmp_path,
        tmp_path / "home",
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "task family: classic" in result.stdout  # the launch summary says what it chose
    return tmp_path / "runs" / "cartpole" / trial, time.monotonic() - started


def _series(run: Path, name: str) -> list[tuple[int, float]]:
    return [(r["step"], r["value"]) for r in metric_records(run) if r["name"] == name]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cartpole_defaults_reach_475_within_the_default_budget(tmp_path, seed):
    run, wall = _launch(
        tmp_path,
        f"s{seed}",
        "--set",
        f"run.seed={seed}",
        "--set",
        "run.stop_at_return=475",
        timeout=840,
    )
    evals = _series(run, "charts/eval_return")
    solved = [step for step, value in evals if value >= 475]
    print(f"\nPPO CartPole seed {seed}: wall {wall:.0f} s, first eval >= 475 at {solved[:1]}")
    assert solved, f"seed {seed}: no evaluation reached 475 within {DEFAULT_STEPS}: {evals}"
    assert solved[0] <= DEFAULT_STEPS
