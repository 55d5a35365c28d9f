"""PPO with `algo.update_epochs=0` (learning switched off, as bench/actor_scaling.py runs it):
the launch check passes and the learner consumes batches without changing its network (only the observation statistics move)."""

from __future__ import annotations

import numpy as np

from surreal.algos.ppo import PPOConfig, PPOLearner
from surreal.api.config import Config
from surreal.api.spaces import EnvInfo
from surreal.launch.preflight import check_algorithm, segment_batch

CHEETAH = EnvInfo(
    obs_shape=(17,),
    discrete=False,
    action_shape=(6,),
    action_low=(-1.0,) * 6,
    action_high=(1.0,) * 6,
)


def test_zero_epochs_passes_the_launch_check_and_leaves_the_parameters_alone():
    config = Config(algo=PPOConfig(update_epochs=0))
    check_algorithm(PPOLearner, config, CHEETAH)  # raised KeyError 'losses/approx_kl' before
    learner = PPOLearner.create(config, CHEETAH)
    policy = PPOLearner.make_policy(config.algo, CHEETAH)
    before = {k: np.array(v, copy=True) for k, v in learner.params().items()}
    metrics = learner.learn(segment_batch(PPOLearner, config, CHEETAH, policy))
    assert metrics["losses/epochs"] == 0.0
    after = learner.params()
    changed = {k for k in before if not np.array_equal(before[k], after[k])}
    assert changed == {"obs_norm/mean", "obs_norm/var", "obs_norm/count"}  # only the statistics
