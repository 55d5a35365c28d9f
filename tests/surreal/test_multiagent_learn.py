"""Multi-agent runs through `surreal launch mappo` (slow): routing counted inside each policy's
learner, shared-parameter PPO on MPE simple_spread against random, self-play Nim against random.
The agent->policy mapping is the example's (`examples/06_multiagent/policies.py`)."""

from pathlib import Path

import numpy as np
import pytest

from surreal.runtime.runfolder import checkpoint
from surreal.testing import surreal_cli
from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[2]
MAPPING = f"algo.policy_mapping={ROOT}/examples/06_multiagent/policies.py:by_agent"
SMALL = ["--actors", "1", "--set", "run.torch_threads=1", "--quiet"]


def launch(tmp_path: Path, env: str, steps: int, *sets: str) -> Path:
    args = ["launch", "mappo", "--env", env, "--steps", str(steps), "--name", "ma"]
    args += ["--trial", "ci", *SMALL]
    for item in sets:
        args += ["--set", item]
    result = surreal_cli(args, tmp_path, tmp_path / "home", timeout=scaled(560))
    run = tmp_path / "runs" / "ma" / "ci"
    assert result.returncode == 0, result.stdout + result.stderr + _log_tails(run)
    return run


def _log_tails(run: Path, lines: int = 15) -> str:
    """The end of every process's log (what a failed run's assertion shows)."""
    return "".join(
        f"\n--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        for log in sorted((run / "logs").glob("*.log"))
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_policys_learner_learns_from_exactly_its_agents_steps(tmp_path):
    run = launch(tmp_path, "ma:pair", 2000, MAPPING, "env.num_envs=2", "actor.rollout_length=16")
    for policy, index in (("l", 0), ("r", 1)):
        state = checkpoint.load(run / "policies" / policy / "checkpoints" / "latest.pt")
        steps = state["counters"]["global_step"]
        assert steps >= 2000
        # the learner's observation normalizer saw every step it learned from, exactly once:
        # `count` counts them, and the mean of obs[0] (the agent's index) shows whose they were
        count = float(state["params"]["obs_norm/count"])
        assert round(count) == steps
        assert float(state["params"]["obs_norm/mean"][0]) == pytest.approx(
            index, abs=1e-6
        )  # prior: 1e-4 at 0
    status = (run / "status.json").read_text()
    for key in ("agents/left/episodic_return", "policies/r/global_step"):
        assert key in status


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_shared_ppo_with_central_value_beats_random_on_simple_spread(tmp_path):
    from surreal.multiagent.play import mean_return

    env = "pettingzoo:mpe.simple_spread_v3?N=2"
    run = launch(
        tmp_path,
        env,
        50_000,
        MAPPING,  # every simple_spread agent -> policy `team`: shared parameters
        "algo.central_value=true",
        "env.num_envs=8",
        "actor.rollout_length=25",
        "algo.lr=1e-3",
        "algo.anneal_lr=false",
        "algo.update_epochs=10",
        "algo.gamma=0.95",
    )
    assert [p.name for p in (run / "policies").iterdir()] == ["team"]
    random = mean_return(None, env, episodes=100)
    trained = mean_return(run, env, episodes=100)
    print(f"\nsimple_spread N=2 mean episode return: random {random:.2f}, trained {trained:.2f}")
    assert trained >= random + 3.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_self_play_nim_beats_a_random_opponent(tmp_path):
    from surreal.multiagent.play import win_rate_vs_random

    run = launch(
        tmp_path,
        "ma:nim",
        40_000,
        "algo.self_play=true",
        "env.num_envs=16",
        "actor.rollout_length=32",
        "algo.lr=1e-3",
        "algo.ent_coef=0.01",
    )
    rate = win_rate_vs_random(run, games=200)
    status = (run / "policies" / "shared" / "status.json").read_text()
    print(f"\nnim: wins against a random opponent {rate:.1%}")
    assert "selfplay/win_rate" in status
    assert rate >= 0.8
    assert np.isfinite(rate)
