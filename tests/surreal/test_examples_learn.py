"""The examples of writing an algorithm learn CartPole-v1 through `surreal launch` (slow).

`make test` checks that each learns (an evaluation of 200: a random policy gets ~20, and each run
ends there); `make test-long` that each solves it (475), within the same budget.
"""

from pathlib import Path

import pytest

from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import metric_records

ROOT = Path(__file__).resolve().parents[2]
EVAL = ["--set", "eval.episodes=10", "--set", "eval.every_s=2"]
GOALS = pytest.mark.parametrize(
    "goal", [pytest.param(200, id="learns"), pytest.param(475, id="solves", marks=pytest.mark.long)]
)


def learn(tmp_path: Path, algo: str, steps: int, goal: int, *args: str) -> list[tuple[int, float]]:
    """Launch, then `surreal eval` the run; returns the evaluator's (step, mean return) records."""
    result = surreal_cli(
        [
            "launch",
            algo,
            "--env",
            "gym:CartPole-v1",
            "--steps",
            str(steps),
            "--name",
            "ex",
            "--trial",
            "ci",
            *args,
            *EVAL,
            "--set",
            f"run.stop_at_return={goal}",  # the run ends at its first evaluation >= goal
        ],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(560),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "runs" / "ex" / "ci"
    evaluated = surreal_cli(["eval", str(run), "--episodes", "3"], tmp_path, tmp_path / "home")
    assert evaluated.returncode == 0 and "3 episodes at step" in evaluated.stdout, evaluated.stderr
    evals = [
        (r["step"], r["value"]) for r in metric_records(run) if r["name"] == "charts/eval_return"
    ]
    print(f"\n{algo}: evals (step, mean return of 10 greedy episodes): {evals[-4:]}")
    return evals


@pytest.mark.slow
@pytest.mark.timeout(600)
@GOALS
def test_reinforce_with_episode_aligned_batches_learns_cartpole(tmp_path, goal):
    evals = learn(
        tmp_path,
        f"{ROOT}/examples/04_reinforce/reinforce.py:Reinforce",
        300_000,
        goal,
        "--actors",
        "2",
        "--set",
        "env.num_envs=8",
        "--set",
        "actor.rollout_length=500",
    )
    assert any(value >= goal for _, value in evals), f"no evaluation reached {goal}: {evals}"


@pytest.mark.slow
@pytest.mark.timeout(600)
@GOALS
def test_ppo_with_a_custom_model_learns_cartpole(tmp_path, goal):
    evals = learn(
        tmp_path,
        "ppo",
        150_000,
        goal,
        "--actors",
        "4",
        "--set",
        f"algo.model={ROOT}/examples/05_ppo_custom_model/model.py:SharedTrunk",
        "--set",
        "env.num_envs=8",
        "--set",
        "actor.rollout_length=32",
        "--set",
        "algo.lr=1e-3",
    )
    assert any(value >= goal for _, value in evals), f"no evaluation reached {goal}: {evals}"
