"""PPO learner and policy on fakes: shapes, parameters round trip, checkpoint state."""

import numpy as np
import pytest

from surreal.algos.ppo import PPOConfig, PPOLearner
from surreal.algos.ppo.learner import explained_variance
from surreal.api.config import EnvConfig
from surreal.api.core import Actor
from surreal.envs import VectorEnv, env_info
from surreal.testing import fake_segment_batch

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("env_id", ["gym:CartPole-v1", "gym:Pendulum-v1"])
def test_actor_segments_have_the_documented_keys_and_shapes(env_id):
    info = env_info(env_id)
    config = PPOConfig()
    policy = PPOLearner.make_policy(config, info)
    policy.load_params(PPOLearner(config, info).params())
    venv = VectorEnv(env_id, EnvConfig(id=env_id, num_envs=3), seed=0)
    segment = Actor(venv, policy, rollout_length=7).rollout()
    assert segment["obs"].shape == (7, 3, *info.obs_shape)
    for key in ("reward", "terminated", "truncated", "final_value", "logprob", "value"):
        assert segment[key].shape == (7, 3), key
    assert segment["next_value"].shape == (3,)
    venv.close()


@pytest.mark.parametrize("loss", ["clip", "kl"])
def test_learn_reports_the_fixed_vocabulary(loss):
    info = env_info("gym:Pendulum-v1")
    learner = PPOLearner(PPOConfig(loss=loss, update_epochs=2, num_minibatches=2), info)
    before = learner.params()
    metrics = learner.learn(fake_segment_batch(info))
    for key in (
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
        "losses/explained_variance",
        "charts/learning_rate",
    ):
        assert np.isfinite(metrics[key]), key
    after = learner.params()
    assert any(not np.allclose(before[k], after[k]) for k in before if k.startswith("model/"))
    assert not np.allclose(before["obs_norm/mean"], after["obs_norm/mean"])


def test_early_stop_on_kl_cuts_the_epochs():
    info = env_info("gym:CartPole-v1")
    learner = PPOLearner(PPOConfig(update_epochs=8, target_kl=0.0, num_minibatches=2), info)
    assert learner.learn(fake_segment_batch(info))["losses/epochs"] == 1.0


def test_explained_variance_is_one_for_a_perfect_value_zero_for_the_mean_nan_for_constants():
    y = np.array([1.0, 2.0, 4.0, 7.0])
    assert explained_variance(y, y) == pytest.approx(1.0)
    assert explained_variance(np.full(4, y.mean()), y) == pytest.approx(0.0)
    assert np.isnan(explained_variance(y, np.ones(4)))


def test_lr_anneals_with_progress():
    info = env_info("gym:CartPole-v1")
    learner = PPOLearner(PPOConfig(lr=1e-3, update_epochs=1, num_minibatches=2), info)
    learner.progress = 0.75
    assert learner.learn(fake_segment_batch(info))["charts/learning_rate"] == pytest.approx(2.5e-4)


def test_the_surrogate_clip_anneals_with_progress_only_when_asked():
    info = env_info("gym:CartPole-v1")
    fixed = PPOLearner(PPOConfig(update_epochs=1, num_minibatches=2), info)
    annealed = PPOLearner(PPOConfig(update_epochs=1, num_minibatches=2, anneal_clip=True), info)
    for learner in (fixed, annealed):
        learner.progress = 0.75
        learner.learn(fake_segment_batch(info))
    assert fixed.clip_coef == pytest.approx(0.2)
    assert annealed.clip_coef == pytest.approx(0.05)


def test_params_give_the_policy_the_learners_behaviour():
    info = env_info("gym:CartPole-v1")
    config = PPOConfig()
    learner = PPOLearner(config, info)
    learner.learn(fake_segment_batch(info))
    policy = PPOLearner.make_policy(config, info)
    policy.load_params(learner.params())
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    import torch

    with torch.no_grad():
        expected = learner.model.value(torch.as_tensor(learner.normalizer(obs))).numpy()
    np.testing.assert_allclose(policy.value(obs), expected, rtol=1e-5)


def test_state_dict_restores_model_optimizer_and_normalizer():
    info = env_info("gym:CartPole-v1")
    a = PPOLearner(PPOConfig(update_epochs=1, num_minibatches=2), info)
    a.learn(fake_segment_batch(info))
    b = PPOLearner(PPOConfig(update_epochs=1, num_minibatches=2), info)
    b.load_state_dict(a.state_dict())
    assert b.iterations == 1
    assert (
        b.optimizer.state_dict()["state"][0]["step"] == a.optimizer.state_dict()["state"][0]["step"]
    )
    for key, value in a.params().items():
        np.testing.assert_array_equal(b.params()[key], value)
