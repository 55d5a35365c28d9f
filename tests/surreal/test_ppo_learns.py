"""It learns: PPO with 4 actors on the local backend solves CartPole-v1 within 300k env steps."""

import time

import pytest

from surreal.testing import surreal_cli
from tests.surreal.helpers import metric_records

# The settings that make CartPole fast and reliable here (measured, see docs/surreal.md).
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
    "eval.episodes=10",
    "--set",
    "eval.every_s=2",
    "--set",
    "run.stop_at_return=475",
]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_cartpole_reaches_475_within_300k_steps(tmp_path):
    started = time.monotonic()
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "4",
            "--steps",
            "300000",
            "--name",
            "cartpole",
            "--trial",
            "ci",
            *CARTPOLE,
        ],
        tmp_path,
        tmp_path / "home",
        timeout=580,
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    evals = [
        (r["step"], r["value"])
        for r in metric_records(tmp_path / "runs" / "cartpole" / "ci")
        if r["name"] == "charts/eval_return"
    ]
    print(f"\nPPO CartPole: wall {wall:.0f} s, evals (step, mean return): {evals[-5:]}")
    solved = [step for step, value in evals if value >= 475]
    assert solved, f"no evaluation reached 475 within 300k steps: {evals}"
    assert solved[0] <= 300_000
