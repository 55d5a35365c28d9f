"""The conv+LSTM PPO model: the learner's recomputed LSTM states match the ones actors had."""

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from surreal.algos.ppo import PPOConfig, PPOLearner, VisionPPOConfig
from surreal.algos.ppo.vision_learner import RecurrentPPOLearner
from surreal.api.config import EnvConfig
from surreal.api.core import Actor
from surreal.api.spaces import EnvInfo
from surreal.envs import VectorEnv, register_env_family

pytestmark = pytest.mark.timeout(120)

SIZE, PROPRIO = 36, 5  # a small image keeps the test fast; the model is the same


class CameraLikeEnv(gymnasium.Env):
    """Flat observations laid out like camera mode (image, then proprio); episodes of 3-7 steps."""

    observation_space = spaces.Box(-np.inf, np.inf, (SIZE * SIZE * 3 + PROPRIO,), np.float32)
    action_space = spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(3, 8))
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action[0]), False, self.t >= self.length, {}

    def _obs(self):
        image = self.np_random.integers(0, 256, SIZE * SIZE * 3).astype(np.float32)
        return np.concatenate([image, self.np_random.normal(size=PROPRIO).astype(np.float32)])


def make(name, config, seed, render=False):  # the `lstmtest:` family (this module)
    return CameraLikeEnv()


def check(name):
    return None


register_env_family("lstmtest", __name__)


def collect(bptt_length: int, segments: int = 2, steps: int = 12):
    config = VisionPPOConfig(image_size=SIZE, bptt_length=bptt_length)
    venv = VectorEnv("lstmtest:x", EnvConfig(id="lstmtest:x", num_envs=3), seed=0)
    learner = RecurrentPPOLearner(config, venv.info)
    # a normalizer that is not the identity, as after some learning
    learner.normalizer.update(np.random.default_rng(0).normal(2.0, 3.0, (50, PROPRIO)))
    policy = learner.make_policy(config, venv.info)
    policy.load_params(learner.params())
    actor = Actor(venv, policy, steps)
    parts = [actor.rollout() for _ in range(segments)]
    batch = {k: np.stack([p[k] for p in parts]) for k in parts[0]}
    batch["version"] = np.zeros((segments, 3), np.int64)
    return learner, batch


@pytest.mark.parametrize("bptt_length", [0, 4])
def test_learner_recomputes_the_states_the_actor_had(bptt_length):
    learner, batch = collect(bptt_length)
    assert isinstance(learner, RecurrentPPOLearner)
    seq = learner.sub_trajectories(batch)
    assert seq["starts"].any(), "episodes must end inside segments to exercise the resets"
    assert np.abs(batch["lstm_h"][1, 0]).sum() > 0, "segment 2 starts from a carried state"
    with torch.no_grad():
        features, hs, cs = learner.model.unroll(
            seq["image"], seq["proprio"], (seq["lstm_h"][0], seq["lstm_c"][0]), seq["starts"]
        )
        dist = learner.model.distribution(features.flatten(0, 1))
        logprob = learner.model.log_prob(dist, seq["actions"].flatten(0, 1))
        value = learner.model.value(features.flatten(0, 1))
    torch.testing.assert_close(hs, seq["lstm_h"], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(cs, seq["lstm_c"], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(logprob, seq["logprobs"].flatten(0, 1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(value, seq["values"].flatten(0, 1), atol=1e-5, rtol=1e-4)


def test_without_the_episode_starts_the_states_differ():
    """The check above can fail: skipping the resets gives other states."""
    learner, batch = collect(0)
    seq = learner.sub_trajectories(batch)
    with torch.no_grad():
        _, hs, _ = learner.model.unroll(
            seq["image"],
            seq["proprio"],
            (seq["lstm_h"][0], seq["lstm_c"][0]),
            torch.zeros_like(seq["starts"]),
        )
    assert not torch.allclose(hs, seq["lstm_h"], atol=1e-3)


def test_a_learner_step_updates_the_model_and_reports_ppo_metrics():
    learner, batch = collect(4)
    before = {k: v.copy() for k, v in learner.params().items()}
    metrics = learner.learn(batch)
    for name in ("losses/policy_loss", "losses/value_loss", "losses/approx_kl"):
        assert np.isfinite(metrics[name]), name
    after = learner.params()
    assert not np.allclose(before["model/lstm.weight_ih"], after["model/lstm.weight_ih"])
    assert not np.allclose(before["model/encoder.0.weight"], after["model/encoder.0.weight"])
    assert not np.allclose(before["obs_norm/mean"], after["obs_norm/mean"])


def test_policy_reset_clears_only_the_finished_envs():
    learner, _ = collect(0, segments=1, steps=2)
    policy = learner.make_policy(learner.config, learner.env_info)
    obs = np.stack([CameraLikeEnv().reset(seed=i)[0] for i in range(3)])
    policy.act(obs)
    h_before = policy.state[0].clone()
    policy.reset(np.array([False, True, False]))
    assert torch.equal(policy.state[0][[0, 2]], h_before[[0, 2]])
    assert not policy.state[0][1].any()


def test_conv_lstm_on_state_observations_is_a_clear_error():
    info = EnvInfo(obs_shape=(60,), discrete=False, action_shape=(7,))
    with pytest.raises(ValueError, match="put a camera key first in env.obs_keys"):
        RecurrentPPOLearner(VisionPPOConfig(), info)
    with pytest.raises(ValueError, match="algo.network must be"):
        PPOLearner(PPOConfig(network="transformer"), info)


def test_the_vision_model_is_its_own_algorithm_and_the_old_flag_names_it():
    from surreal.algos import resolve

    assert resolve("ppo-vision") is RecurrentPPOLearner
    assert resolve("ppo-vision").config_class is VisionPPOConfig
    info = EnvInfo(obs_shape=(60,), discrete=False, action_shape=(7,))
    with pytest.raises(ValueError, match="surreal launch ppo-vision"):
        PPOConfig(network="conv_lstm").check(info)
