"""GAE and the PPO loss against plain reference loops."""

import numpy as np
import pytest
import torch

from surreal.algos.ppo.config import PPOConfig
from surreal.algos.ppo.loss import adapt_kl_coef, gae, ppo_loss

pytestmark = pytest.mark.timeout(60)


def reference_gae(rewards, values, next_value, terminated, truncated, final_value, gamma, lam):
    """One environment at a time, one step at a time, written the long way."""
    steps, envs = rewards.shape
    adv = np.zeros((steps, envs))
    for e in range(envs):
        running = 0.0
        for t in reversed(range(steps)):
            if terminated[t, e]:
                delta = rewards[t, e] - values[t, e]
                running = delta
            elif truncated[t, e]:
                delta = rewards[t, e] + gamma * final_value[t, e] - values[t, e]
                running = delta
            else:
                following = next_value[e] if t == steps - 1 else values[t + 1, e]
                delta = rewards[t, e] + gamma * following - values[t, e]
                running = delta + gamma * lam * running
            adv[t, e] = running
    return adv


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_reference_loop(seed):
    rng = np.random.default_rng(seed)
    steps, envs = 17, 5
    rewards = rng.normal(size=(steps, envs))
    values = rng.normal(size=(steps, envs))
    next_value = rng.normal(size=envs)
    terminated = rng.random((steps, envs)) < 0.1
    truncated = (rng.random((steps, envs)) < 0.1) & ~terminated
    final_value = np.where(truncated, rng.normal(size=(steps, envs)), 0.0)
    expected = reference_gae(
        rewards, values, next_value, terminated, truncated, final_value, 0.97, 0.9
    )
    t = lambda x: torch.as_tensor(x)  # noqa: E731
    adv, ret = gae(
        t(rewards), t(values), t(next_value), t(terminated), t(truncated), t(final_value), 0.97, 0.9
    )
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ret.numpy(), expected + values, rtol=1e-6, atol=1e-8)


def test_clipped_surrogate_ignores_ratio_beyond_the_clip():
    config = PPOConfig(norm_adv=False, clip_vloss=False)
    adv = torch.tensor([1.0, -1.0])
    old = torch.zeros(2)
    zeros = torch.zeros(2)
    # ratio e^0.5 > 1.2 with positive advantage and e^-0.5 < 0.8 with negative: both clipped
    new = torch.tensor([0.5, -0.5], requires_grad=True)
    loss, stats = ppo_loss(new, old, adv, zeros, zeros, zeros, zeros, config, kl_coef=0.0)
    loss.backward()
    assert torch.allclose(new.grad, torch.zeros(2))
    assert stats["losses/clipfrac"] == 1.0
    assert stats["losses/policy_loss"] == pytest.approx(-(1.2 - 0.8) / 2)
    # inside the clip range the gradient flows
    new2 = torch.tensor([0.1, -0.1], requires_grad=True)
    loss2, _ = ppo_loss(new2, old, adv, zeros, zeros, zeros, zeros, config, kl_coef=0.0)
    loss2.backward()
    assert (new2.grad.abs() > 0).all()


def test_approx_kl_is_zero_for_identical_policies_and_positive_otherwise():
    config = PPOConfig()
    logp = torch.log(torch.tensor([0.2, 0.5, 0.9]))
    zeros = torch.zeros(3)
    _, same = ppo_loss(logp, logp, torch.ones(3), zeros, zeros, zeros, zeros, config, 0.0)
    _, diff = ppo_loss(logp + 0.3, logp, torch.ones(3), zeros, zeros, zeros, zeros, config, 0.0)
    assert same["losses/approx_kl"] == 0.0 and diff["losses/approx_kl"] > 0.0


def test_adaptive_kl_coefficient_rule():
    assert adapt_kl_coef(1.0, 0.1, 0.01) == 2.0
    assert adapt_kl_coef(1.0, 0.001, 0.01) == 0.5
    assert adapt_kl_coef(1.0, 0.01, 0.01) == 1.0
