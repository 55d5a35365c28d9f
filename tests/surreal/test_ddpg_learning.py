"""DDPG/TD3 math: target updates, twin-critic minimum, smoothing, actor delay, exploration noise."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from surreal.algos.ddpg.config import DDPGConfig, TD3Config  # noqa: E402
from surreal.algos.ddpg.learner import DDPGLearner  # noqa: E402
from surreal.algos.ddpg.learning import DDPG  # noqa: E402
from surreal.algos.ddpg.networks import hard_update, soft_update  # noqa: E402
from surreal.algos.ddpg.noise import GaussianNoise, OUNoise, actor_sigma  # noqa: E402
from surreal.algos.sac.config import SACConfig  # noqa: E402
from surreal.algos.sac.learner import SACLearner  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _batch(rng, n=64, obs_dim=3, act_dim=1):
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "act": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
        "rew": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "discount": np.full(n, 0.99**3, np.float32),
    }


def _flat(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_soft_update_is_polyak_average_and_hard_update_copies():
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before_a, before_b = _flat(a).clone(), _flat(b).clone()
    soft_update(a, b, 0.1)
    torch.testing.assert_close(_flat(a), 0.9 * before_a + 0.1 * before_b)
    hard_update(a, b)
    torch.testing.assert_close(_flat(a), before_b)


def test_hard_target_updates_happen_every_target_period():
    cfg = DDPGConfig(hidden=(16,), batch_size=32, target_update="hard", target_period=5)
    algo, rng = DDPG(3, 1, cfg), np.random.default_rng(0)
    start = _flat(algo.actor_target).clone()
    for _ in range(4):
        algo.update(_batch(rng))
    torch.testing.assert_close(_flat(algo.actor_target), start)  # no copy yet
    algo.update(_batch(rng))
    torch.testing.assert_close(_flat(algo.actor_target), _flat(algo.actor))


def test_target_takes_the_minimum_of_twin_critics_and_respects_discount():
    cfg = DDPGConfig.td3(hidden=(16,))
    algo = DDPG(3, 1, cfg)
    obs = torch.randn(8, 3)
    rew, disc = torch.ones(8), torch.tensor([0.0] * 4 + [0.5] * 4)
    with torch.no_grad():
        for p in algo.critics_target[1].parameters():
            p.add_(10.0)  # second target critic much larger: the min must ignore it
        algo.config.policy_smoothing = 0.0
        q1 = algo.critics_target[0](obs, algo.actor_target(obs))
        q2 = algo.critics_target[1](obs, algo.actor_target(obs))
    y = algo.target_q(rew, obs, disc)
    torch.testing.assert_close(y, rew + disc * torch.minimum(q1, q2))
    torch.testing.assert_close(y[:4], rew[:4])  # terminated: no bootstrap


def test_target_policy_smoothing_noise_is_clipped():
    cfg = DDPGConfig.td3(hidden=(16,), policy_smoothing=5.0, smoothing_clip=0.1)
    algo = DDPG(2, 1, cfg)
    with torch.no_grad():  # a critic linear in the action reveals the smoothed action
        net = algo.critics_target[0].net
        for m in net:
            if isinstance(m, torch.nn.Linear):
                m.weight.zero_()
                m.bias.zero_()
        net[0].weight[0, 2] = 1.0
        net[0].bias[0] = 5.0
        net[-1].weight[0, 0] = 1.0
        algo.critics_target[1].load_state_dict(algo.critics_target[0].state_dict())
    obs = torch.randn(256, 2)
    base = algo.actor_target(obs).squeeze(-1).detach() + 5.0
    y = algo.target_q(torch.zeros(256), obs, torch.ones(256))
    assert (y - base).abs().max() <= 0.1 + 1e-5  # clipped at smoothing_clip
    assert (y - base).abs().max() > 0.05  # and noise was added


def test_actor_is_updated_once_per_actor_delay_critic_updates():
    cfg = DDPGConfig(hidden=(16,), actor_delay=3)
    algo, rng = DDPG(3, 1, cfg), np.random.default_rng(1)
    snapshots = []
    for _ in range(6):
        algo.update(_batch(rng))
        snapshots.append(_flat(algo.actor).clone())
    changed = [not torch.equal(snapshots[i], snapshots[i - 1]) for i in range(1, 6)]
    assert changed == [False, True, False, False, True]  # updates at iterations 3 and 6


def test_critic_regression_fits_a_fixed_target_and_checkpoint_round_trips():
    cfg = DDPGConfig(hidden=(32, 32), n_step=1, tau=0.0)
    algo, rng = DDPG(3, 1, cfg, seed=3), np.random.default_rng(3)
    batch = _batch(rng, 128)
    batch["discount"][:] = 0.0  # y = reward: a pure regression onto a smooth function
    batch["rew"] = (np.sin(batch["obs"][:, 0]) + batch["act"][:, 0]).astype(np.float32)
    first = algo.update(batch)["losses/qf_loss"]
    for _ in range(300):
        last = algo.update(batch)["losses/qf_loss"]
    assert last < 0.2 * first
    clone = DDPG(3, 1, cfg, seed=99)
    clone.load_state_dict(algo.state_dict())
    obs = rng.normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(clone.act(obs), algo.act(obs))
    assert clone.iteration == algo.iteration


def test_actor_sigmas_spread_geometrically_over_actors():
    sigmas = [actor_sigma(0.1, 4.0, i, 5) for i in range(5)]
    assert sigmas[0] == pytest.approx(0.1) and sigmas[-1] == pytest.approx(0.4)
    assert all(
        b / a == pytest.approx(4.0**0.25) for a, b in zip(sigmas[:-1], sigmas[1:], strict=True)
    )
    assert actor_sigma(0.1, 4.0, 0, 1) == 0.1


def test_gaussian_noise_has_its_sigma_and_ou_noise_is_correlated_and_mean_reverting():
    gn = GaussianNoise(2, 0.3, seed=0)
    draws = np.stack([gn() for _ in range(20000)])
    assert draws.shape == (20000, 2) and draws.std() == pytest.approx(0.3, rel=0.05)
    ou = OUNoise(1, 0.3, theta=0.15, dt=1e-2, seed=0)
    xs = np.array([ou()[0] for _ in range(20000)])
    lag1 = np.corrcoef(xs[:-1], xs[1:])[0, 1]
    assert lag1 > 0.9  # strongly correlated in time, unlike Gaussian noise
    assert abs(xs.mean()) < 3 * xs.std()
    ou.reset()
    assert ou.x[0] == 0.0


def test_config_rejects_bad_values_with_the_fix():
    with pytest.raises(ValueError, match="'soft' or 'hard'"):
        DDPGConfig(target_update="polyak")
    with pytest.raises(ValueError, match="n_step"):
        DDPGConfig(n_step=0)
    td3 = DDPGConfig.td3()
    assert td3.twin_critics and td3.policy_smoothing > 0 and td3.actor_delay == 2


def _actor_weights(learner_class, config, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)  # what the learner process does with run.seed
    return _flat(learner_class.make_algo(3, 1, config, torch.device("cpu")).actor)


@pytest.mark.parametrize(
    "learner_class, config", [(DDPGLearner, TD3Config()), (SACLearner, SACConfig())]
)
def test_the_learners_networks_follow_run_seed(learner_class, config):
    # the algorithm once reseeded with its own default 0: every seed had the same networks
    one = _actor_weights(learner_class, config, 1)
    assert torch.equal(one, _actor_weights(learner_class, config, 1))
    assert not torch.equal(one, _actor_weights(learner_class, config, 2))
