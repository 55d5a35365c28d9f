"""Environments: ids, wrappers, and the batched VectorEnv."""

import numpy as np
import pytest

from surreal.api.config import EnvConfig
from surreal.envs import UnknownEnvironment, VectorEnv, check_env, env_info, make_env, wrappers
from surreal.testing import dict_obs_env

pytestmark = pytest.mark.timeout(60)


def test_unknown_env_is_a_clear_error_with_suggestions():
    with pytest.raises(UnknownEnvironment, match="did you mean gym:CartPole-v1"):
        check_env("gym:CartPole-v9")
    with pytest.raises(UnknownEnvironment, match="family prefix"):
        check_env("CartPole-v1")
    with pytest.raises(UnknownEnvironment, match="unknown environment family"):
        check_env("atari:Pong")


def test_cartpole_info_and_mujoco_info():
    info = env_info("gym:CartPole-v1")
    assert info.obs_shape == (4,) and info.discrete and info.num_actions == 2
    cheetah = env_info("gym:HalfCheetah-v5")
    assert cheetah.obs_shape == (17,) and not cheetah.discrete and cheetah.action_shape == (6,)


def test_frame_stack_action_repeat_and_episode_limit():
    config = EnvConfig(id="gym:CartPole-v1", frame_stack=3, action_repeat=2, max_episode_steps=4)
    env = make_env(config.id, config, seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (12,) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[:4], obs[8:])  # after reset every frame is the first one
    total, steps, truncated, terminated = 0.0, 0, False, False
    while not (truncated or terminated):
        obs, reward, terminated, truncated, info = env.step(0)
        total += reward
        steps += 1
    if truncated:
        assert steps == 4 and total == 8.0  # 4 agent steps x 2 repeats, reward 1 each
    assert info["episode"]["l"] == steps and info["episode"]["r"] == total


def test_dict_observations_are_filtered_and_concatenated():
    env = wrappers.apply(dict_obs_env(), EnvConfig(obs_keys=["b", "a"]), seed=0)
    assert env.observation_space.shape == (5,)
    obs, *_ = env.step(0)
    np.testing.assert_array_equal(obs, [-1, -1, -1, 1, 1])
    with pytest.raises(ValueError, match="not in"):
        wrappers.apply(dict_obs_env(), EnvConfig(obs_keys=["nope"]))


def test_vector_env_resets_in_the_same_step_and_keeps_the_final_obs():
    config = EnvConfig(id="gym:CartPole-v1", num_envs=3, max_episode_steps=5)
    venv = VectorEnv(config.id, config, seed=1)
    obs = venv.reset()
    assert obs.shape == (3, 4)
    for _ in range(5):
        obs, reward, terminated, truncated, info = venv.step(np.zeros(3, np.int64))
    ended = terminated | truncated
    assert ended.all() and info["final_obs"].shape == (3, 4)
    assert len(info["episode_returns"]) == 3
    assert not np.allclose(obs, info["final_obs"])  # obs is already the next episode's first
    venv.close()


def test_reward_normalization_scales_but_episode_stats_stay_raw():
    config = EnvConfig(id="gym:CartPole-v1", normalize_reward=True)
    env = make_env(config.id, config, seed=0)
    env.reset(seed=0)
    rewards, done = [], False
    while not done:
        _, r, term, trunc, info = env.step(env.action_space.sample())
        rewards.append(r)
        done = term or trunc
    assert any(abs(r - 1.0) > 1e-3 for r in rewards)
    assert info["episode"]["r"] == len(rewards)
