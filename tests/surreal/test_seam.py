"""The algorithm seam: Learner hooks and their defaults, the launch check, the model hook,
episode-aligned segments and the read-only run config."""

from pathlib import Path

import numpy as np
import pytest
import torch

from surreal.algos import resolve
from surreal.algos.ppo import PPOConfig, PPOLearner
from surreal.api.config import Config, EnvConfig
from surreal.api.core import Actor, Learner
from surreal.api.recipe import recipe_of
from surreal.api.replay import FifoSampler
from surreal.api.spaces import EnvInfo
from surreal.envs import VectorEnv
from surreal.launch.preflight import PreflightError, check_algorithm
from surreal.testing import fake_segment_batch

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = EnvInfo(obs_shape=(4,), discrete=True, num_actions=2)
REINFORCE = f"{ROOT}/examples/04_reinforce/reinforce.py:Reinforce"
SHARED_TRUNK = f"{ROOT}/examples/05_ppo_custom_model/model.py:SharedTrunk"


def run_config(algo_class: type, **algo: object) -> Config:
    config = Config(algo=algo_class.config_class(**algo))
    config.run.actors = 3
    return config


def test_the_defaults_are_the_standard_on_policy_runtime():
    learner_class = resolve(REINFORCE)
    config = run_config(learner_class)
    assert recipe_of(learner_class).per_batch(config) == 3  # one per actor
    replay = recipe_of(learner_class).make_replay(config)
    assert isinstance(replay.sampler, FifoSampler) and replay.storage.capacity == 4 * 3 + 2 * 3
    assert set(recipe_of(learner_class).components()) == {
        "actor",
        "buffer",
        "learner",
        "param-server",
        "evaluator",
        "metrics",
        "policy-worker",  # started with actor.inference=remote
    }
    assert recipe_of(learner_class).example_batch(
        config, CARTPOLE, learner_class.make_policy(config.algo, CARTPOLE)
    )


def test_ppo_batch_size_is_one_number_for_every_process():
    config = run_config(PPOLearner)  # 3 actors, segments of 32 steps x 8 envs = 256
    assert recipe_of(PPOLearner).per_batch(config) == 2  # the 512-step default, not the actors
    config.algo.batch_size = 5 * 256
    assert recipe_of(PPOLearner).per_batch(config) == 5
    assert recipe_of(PPOLearner).make_replay(config).storage.capacity == 4 * 5 + 2 * 3
    config.run.actors = 1024
    assert recipe_of(PPOLearner).per_batch(config) == 5  # scaling out keeps the recipe
    config.algo.batch_size = 0
    assert recipe_of(PPOLearner).per_batch(config) == 1024  # 0: one segment per actor


def test_ppo_batch_size_rounds_to_whole_segments():
    config = run_config(PPOLearner)
    config.algo.batch_size = 600  # 2.34 segments of 256
    assert recipe_of(PPOLearner).per_batch(config) == 2
    config.algo.batch_size = 100  # less than one segment: at least one
    assert recipe_of(PPOLearner).per_batch(config) == 1
    config.env.num_envs, config.actor.rollout_length = 1, 2048  # CleanRL's 1 x 2048
    config.algo.batch_size = 2048
    assert recipe_of(PPOLearner).per_batch(config) == 1


def test_algorithms_with_their_own_topology_add_their_roles():
    assert {"es-master", "es-worker", "metrics"} <= set(recipe_of(resolve("es")).components())
    ddpg = recipe_of(resolve("ddpg")).components()
    assert ddpg["actor"] == "surreal.algos.ddpg.actor:main" and "replay-shard" in ddpg


BROKEN = """
from surreal.api.core import Learner, Policy


class P(Policy):
    def act(self, obs, deterministic):  # no default: actors call act(obs)
        return obs[:, 0].astype(int) * 0, {}

    def load_params(self, params):
        pass


class Bad(Learner):
    @classmethod
    def make_policy(cls, config, env_info):
        return P()

    def learn(self, batch):
        return {}

    def params(self):
        return {}


class NoKey(Bad):
    @classmethod
    def make_policy(cls, config, env_info):
        policy = P()
        policy.act = lambda obs, deterministic=False: (obs[:, 0].astype(int) * 0, {})
        return policy

    def learn(self, batch):
        advantages = batch["advantages"]  # not a batch key
        return {"losses/x": float(advantages.mean())}


class RuntimeName(NoKey):
    def learn(self, batch):
        return {"charts/sps": 1.0}
"""

LINE = next(i for i, text in enumerate(BROKEN.splitlines(), 1) if 'batch["advantages"]' in text)


@pytest.fixture
def broken(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(BROKEN)
    return path


def test_the_launch_check_names_the_file_and_line_of_a_broken_learner(broken):
    with pytest.raises(PreflightError) as info:
        check_algorithm(resolve(f"{broken}:NoKey"), run_config(Learner), CARTPOLE)
    message = str(info.value)
    assert f"{broken}:{LINE}" in message and "KeyError" in message and "'advantages'" in message
    assert "NoKey.learn(batch)" in message and "\n" not in message  # one paragraph


def test_the_launch_check_catches_act_without_a_deterministic_default(broken):
    with pytest.raises(PreflightError, match=r"P\.act\(obs\).*deterministic"):
        check_algorithm(resolve(f"{broken}:Bad"), run_config(Learner), CARTPOLE)


def test_the_launch_check_refuses_metric_names_the_runtime_owns(broken):
    with pytest.raises(PreflightError, match="charts/sps.*set by the learner process"):
        check_algorithm(resolve(f"{broken}:RuntimeName"), run_config(Learner), CARTPOLE)


@pytest.mark.parametrize("algo", ["ppo", "ddpg", "es", REINFORCE])
def test_the_built_in_algorithms_and_the_examples_pass_the_launch_check(algo):
    learner_class = resolve(algo)
    info = CARTPOLE if algo != "ddpg" else EnvInfo((3,), False, 0, (1,), (-2.0,), (2.0,))
    check_algorithm(learner_class, run_config(learner_class), info)


@pytest.mark.integration
def test_a_broken_learner_fails_at_launch_before_anything_starts(broken, tmp_path):
    from surreal.testing import surreal_cli

    result = surreal_cli(
        ["launch", f"{broken}:NoKey", "--env", "gym:CartPole-v1"], tmp_path, tmp_path / "home"
    )
    assert result.returncode == 2
    assert f"{broken}:{LINE}" in result.stderr and "KeyError" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_custom_model_swaps_ppos_network_without_subclassing():
    config = PPOConfig(model=SHARED_TRUNK)
    learner = PPOLearner(config, CARTPOLE)
    policy = PPOLearner.make_policy(config, CARTPOLE)
    assert type(learner.model).__name__ == type(policy.model).__name__ == "SharedTrunk"
    metrics = learner.learn(fake_segment_batch(CARTPOLE))
    assert np.isfinite(metrics["losses/policy_loss"])
    policy.load_params(learner.params())
    for key, value in learner.model.state_dict().items():
        torch.testing.assert_close(policy.model.state_dict()[key], value)
    again = PPOLearner(config, CARTPOLE)
    again.load_state_dict(learner.state_dict())
    assert again.params().keys() == learner.params().keys()


def test_a_bad_model_reference_is_a_clear_launch_error(tmp_path):
    from surreal.launch.experiment import plan

    with pytest.raises(LookupError, match="algo.model=nowhere.py:Net: no such file"):
        plan("ppo", overrides=("algo.model=nowhere.py:Net",), folder=str(tmp_path))


def test_the_default_params_and_state_dict_come_from_the_model():
    learner_class = resolve(REINFORCE)
    config = run_config(learner_class)
    learner = learner_class.create(config, CARTPOLE)
    assert set(learner.params()) == {f"model/{k}" for k in learner.model.state_dict()}
    learner.learn(
        recipe_of(learner_class).example_batch(
            config, CARTPOLE, learner.make_policy(config.algo, CARTPOLE)
        )
    )
    state = learner.state_dict()
    fresh = learner_class.create(config, CARTPOLE)
    fresh.load_state_dict(state)
    assert fresh.optimizer.state_dict()["state"]  # the optimizer came back too
    for key, value in learner.params().items():
        np.testing.assert_array_equal(fresh.params()[key], value)


def test_the_learner_sees_a_read_only_run_config():
    config = run_config(PPOLearner)
    learner = PPOLearner.create(config, CARTPOLE)
    assert learner.run_config.run.actors == 3 and learner.run_config.algo.lr == config.algo.lr
    with pytest.raises(AttributeError, match="read-only"):
        learner.run_config.run.steps = 5
    config.run.actors = 9  # a copy: later changes do not show through
    assert learner.run_config.run.actors == 3


def test_episode_aligned_segments_hold_one_whole_episode_per_env():
    env = VectorEnv("gym:CartPole-v1", EnvConfig(num_envs=4), seed=0)
    learner_class = resolve(REINFORCE)
    policy = learner_class.make_policy(learner_class.config_class(), env.info)
    actor = Actor(env, policy, rollout_length=200)
    for _ in range(2):
        segment = actor.rollout_episodes()
        mask = segment["mask"]
        assert mask.shape == (200, 4) and (mask[0] == 1).all()
        assert (np.diff(mask, axis=0) <= 0).all(), "real steps first, then padding"
        ends = (segment["terminated"] | segment["truncated"]).sum(axis=0)
        assert (ends == 1).all(), "exactly one episode end per env"
        assert (segment["reward"][mask == 0] == 0).all()
        returns, lengths = actor.pop_episodes()
        assert sorted(lengths) == sorted(mask.sum(axis=0).astype(int).tolist())
        assert sorted(returns) == pytest.approx(sorted(segment["reward"].sum(axis=0)))
    env.close()


def test_episodes_longer_than_the_segment_are_cut_and_marked_truncated():
    env = VectorEnv("gym:CartPole-v1", EnvConfig(num_envs=3), seed=1)
    learner_class = resolve(REINFORCE)
    policy = learner_class.make_policy(learner_class.config_class(), env.info)
    segment = Actor(env, policy, rollout_length=3).rollout_episodes()  # CartPole lasts > 3 steps
    assert segment["mask"].all() and segment["truncated"][-1].all()
    assert actor_lengths_are_unreported(segment)
    env.close()


def actor_lengths_are_unreported(segment: dict) -> bool:
    return segment["next_value"].shape == (3,) and not segment["terminated"].any()


def test_one_component_entry_point_names_the_runs_roles_for_an_unknown_one(tmp_path):
    from surreal.launch.experiment import create_run, plan
    from surreal.runtime.processes.component import run_component

    p = plan("es", env="gym:CartPole-v1", folder=str(tmp_path))
    create_run(p)
    with pytest.raises(ValueError, match="unknown component 'nope'.*es-master, es-worker"):
        run_component("nope", str(p.run_dir.path))


def test_files_named_by_algo_settings_are_copied_into_the_run(tmp_path):
    import json

    from surreal.launch.experiment import create_run, plan

    model = tmp_path / "mine" / "model.py"
    model.parent.mkdir()
    model.write_text(Path(SHARED_TRUNK.rpartition(":")[0]).read_text())
    p = plan("ppo", overrides=(f"algo.model={model}:SharedTrunk",), folder=str(tmp_path / "runs"))
    create_run(p)
    saved = json.loads(p.run_dir.config_file.read_text())["algo"]["model"]
    copy = p.run_dir.path.resolve() / "code" / "model.py"
    assert saved == f"{copy}:SharedTrunk" and copy.read_text() == model.read_text()
    model.write_text("raise RuntimeError('changed')\n")  # the run no longer depends on it
    learner_class = p.run_dir.algo_class()
    config = p.run_dir.load_config()
    assert type(learner_class.make_model(config.algo, p.env_info)).__name__ == "SharedTrunk"
