"""The built-in `dqn` (issue 48 item 5): its epsilon schedule, the Double-DQN target, the
actors' epsilon-greedy exploration, discrete actions through the off-policy replay, and a run
whose budget counts the env steps the actors took (its learning: test_dqn_learns below and
bench/reports/learning.md "DQN")."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from surreal.algos.ddpg.nstep import NStepWriter, pack_chunk
from surreal.algos.dqn.config import DQNConfig
from surreal.algos.dqn.learner import DQNLearner
from surreal.algos.offpolicy import OffPolicy
from surreal.api.config import Config, RunConfig
from surreal.api.recipe import recipe_of
from surreal.api.spaces import EnvInfo
from surreal.runtime.wire.schemas import ChunkSchema
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import status

CARTPOLE = EnvInfo((4,), True, num_actions=2)


def _learner(**algo) -> DQNLearner:
    torch.manual_seed(0)
    return DQNLearner.create(Config(algo=DQNConfig(**algo), run=RunConfig(device="cpu")), CARTPOLE)


def test_epsilon_falls_linearly_over_the_exploration_fraction_then_stays():
    cfg = DQNConfig(start_e=1.0, end_e=0.05, exploration_fraction=0.5)
    assert [round(cfg.epsilon(p), 3) for p in (0, 0.25, 0.5, 0.9)] == [1.0, 0.525, 0.05, 0.05]


def test_the_target_is_double_dqn_the_online_net_picks_the_target_net_values():
    learner = _learner(double=True, target_period=10**6, batch_size=2)
    with torch.no_grad():  # a target net unlike the online one
        for p in learner.target.parameters():
            p.mul_(-1.0)
    batch = {
        "obs": np.zeros((2, 4), np.float32),
        "act": np.array([0, 1]),
        "rew": np.array([1.0, 2.0], np.float32),
        "next_obs": np.ones((2, 4), np.float32),
        "discount": np.array([0.99, 0.0], np.float32),
    }
    nxt = torch.ones(2, 4)
    with torch.no_grad():
        pick = learner.model(nxt).argmax(-1, keepdim=True)
        want = torch.tensor([1.0, 2.0]) + torch.tensor([0.99, 0.0]) * (
            learner.target(nxt).gather(-1, pick).squeeze(-1)
        )
        q = learner.model(torch.zeros(2, 4)).gather(-1, torch.tensor([[0], [1]])).squeeze(-1)
    metrics = learner.learn(batch)
    assert float(metrics["losses/td_loss"]) == pytest.approx(
        float(((q - want) ** 2).mean()), rel=1e-5
    )


def test_the_target_network_is_copied_every_target_period_updates():
    learner = _learner(target_period=3, batch_size=4)
    rng = np.random.default_rng(0)
    batch = {
        "obs": rng.normal(size=(4, 4)).astype(np.float32),
        "act": rng.integers(2, size=4),
        "rew": np.ones(4, np.float32),
        "next_obs": rng.normal(size=(4, 4)).astype(np.float32),
        "discount": np.full(4, 0.99, np.float32),
    }
    for i in range(3):
        same = all(
            torch.equal(a, b)
            for a, b in zip(learner.target.parameters(), learner.model.parameters(), strict=True)
        )
        assert same == (i == 0)
        learner.learn(batch)
    assert all(
        torch.equal(a, b)
        for a, b in zip(learner.target.parameters(), learner.model.parameters(), strict=True)
    )


def test_actors_explore_epsilon_greedily_and_replay_keeps_action_indices():
    policy = DQNLearner.make_policy(DQNConfig(), CARTPOLE)
    explorer = policy.explorer(num_envs=1000, index=0, actors=1, seed=0)
    greedy = lambda obs, deterministic=True: np.ones(len(obs), np.int64)  # noqa: E731
    obs = np.zeros((1000, 4), np.float32)
    assert (explorer.act(greedy, obs, progress=1.0) == 1).mean() > 0.95  # epsilon 0.05
    assert 0.4 < (explorer.act(greedy, obs, progress=0.0) == 1).mean() < 0.6  # epsilon 1
    assert explorer.metrics() == {"actor/epsilon": 1.0}
    writer = NStepWriter(1, 0.99)
    steps = [writer.step(np.zeros(4), np.int64(a), 1.0, np.ones(4), False, False) for a in (0, 1)]
    chunk = pack_chunk([t for ts in steps for t in ts], dedup=False)
    assert chunk["act"].dtype == np.int64
    ChunkSchema(CARTPOLE, dedup=False)(chunk)  # the replay shard's port takes it


def test_dqn_is_off_policy_and_refuses_continuous_actions(tmp_path):
    assert recipe_of(DQNLearner) is OffPolicy
    out = surreal_cli(
        ["launch", "dqn", "--env", "gym:Pendulum-v1", "--dry-run"], tmp_path, tmp_path / "h"
    )
    assert out.returncode == 2 and "dqn needs a discrete action space" in out.stderr


@pytest.mark.integration
@pytest.mark.timeout(420)
def test_dqn_learns_cartpole_and_its_budget_counts_the_actors_env_steps(tmp_path):
    args = ["launch", "dqn", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "150000"]
    args += ["--folder", str(tmp_path / "runs"), "--trial", "t1", "--quiet"]
    args += ["--set", "run.stop_at_return=150"]
    out = surreal_cli(args, tmp_path, tmp_path / "home", timeout=scaled(400))
    assert out.returncode == 0, out.stdout + out.stderr
    state = status(tmp_path / "runs" / "dqn-cartpole-v1" / "t1")
    assert state["best_eval_return"] >= 150  # random play: ~20
    # env steps, not replayed samples (those run ~100x ahead: 128 per update). The actors report
    # their count every 2 s or episode, the learner the shards' at each batch: at the stop either
    # may be a report behind (CI: 149,976 reported by the actors, 150,080 stored)
    assert 10_000 < state["global_step"] <= 1.05 * state["actor_steps"]


@pytest.mark.long
@pytest.mark.timeout(1800)
def test_dqn_reaches_475_on_cartpole_within_500k_env_steps_in_three_of_three_seeds(tmp_path):
    """Issue 48's claim (bench/reports/learning.md "DQN"): each seed's greedy evaluation reaches 475."""
    for seed in (1, 2, 3):
        args = ["launch", "dqn", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "500000"]
        args += ["--folder", str(tmp_path / "runs"), "--trial", f"s{seed}", "--quiet"]
        args += ["--set", f"run.seed={seed}", "--set", "run.stop_at_return=475"]
        out = surreal_cli(args, tmp_path, tmp_path / "home", timeout=scaled(900))
        assert out.returncode == 0, out.stdout + out.stderr
        state = status(tmp_path / "runs" / "dqn-cartpole-v1" / f"s{seed}")
        assert state["best_eval_return"] >= 475 and state["global_step"] <= 500_000 + 4096, seed
