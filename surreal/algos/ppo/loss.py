"""The PPO math, top to bottom: GAE, then the surrogate, value and entropy terms (CleanRL names)."""

from __future__ import annotations

import torch

from surreal.algos.ppo.config import PPOConfig


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    final_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over segments of shape [T, N].

    A step that ended its episode does not bootstrap from the next observation (which belongs to a
    new episode); a truncated step bootstraps from `final_value`, the value of its true last
    observation; a terminated one from 0.

    Returns:
        (advantages, returns), both [T, N]; returns = advantages + values.
    """
    num_steps = rewards.shape[0]
    done = (terminated | truncated).to(rewards.dtype)
    cut = truncated.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        bootstrap = (1.0 - done[t]) * nextvalues + cut[t] * final_value[t]
        delta = rewards[t] + gamma * bootstrap - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - done[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def ppo_loss(
    newlogprob: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    newvalue: torch.Tensor,
    oldvalue: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    config: PPOConfig,
    kl_coef: float,
    clip_coef: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO objective for one minibatch (to minimize), and its diagnostics.

    Args:
        newlogprob / oldlogprob: log pi(a|s) under the current and the acting policy.
        advantages: GAE advantages (normalized here when config.norm_adv).
        newvalue / oldvalue / returns: value predictions now and when acting, and value targets.
        entropy: policy entropy per sample.
        kl_coef: the current KL penalty coefficient (used when config.loss == "kl").
        clip_coef: the surrogate's clip range now (annealed with config.anneal_clip); None:
            config.clip_coef. The value clip always uses config.clip_coef.
    """
    clip = config.clip_coef if clip_coef is None else clip_coef
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()

    with torch.no_grad():
        # http://joschu.net/blog/kl-approx.html
        old_approx_kl = (-logratio).mean()
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip).float().mean()

    pg_loss = _policy_loss(advantages, ratio, logratio, config, kl_coef, clip)
    v_loss = _value_loss(newvalue, oldvalue, returns, config)
    entropy_loss = entropy.mean()
    loss = pg_loss - config.ent_coef * entropy_loss + v_loss * config.vf_coef
    return loss, {
        "losses/policy_loss": pg_loss.detach(),
        "losses/value_loss": v_loss.detach(),
        "losses/entropy": entropy_loss.detach(),
        "losses/old_approx_kl": old_approx_kl,
        "losses/approx_kl": approx_kl,
        "losses/clipfrac": clipfrac,
    }


def _policy_loss(
    advantages: torch.Tensor,
    ratio: torch.Tensor,
    logratio: torch.Tensor,
    config: PPOConfig,
    kl_coef: float,
    clip: float,
) -> torch.Tensor:
    """The clipped surrogate (config.loss == "clip") or the KL-penalized one, to minimize."""
    if config.norm_adv and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    if config.loss == "clip":
        pg_loss1 = -advantages * ratio
        pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip, 1 + clip)
        return torch.max(pg_loss1, pg_loss2).mean()
    # Adaptive KL penalty (Schulman et al. 2017, Sec. 4): surrogate minus beta * KL
    return -(advantages * ratio).mean() + kl_coef * ((ratio - 1) - logratio).mean()


def _value_loss(
    newvalue: torch.Tensor, oldvalue: torch.Tensor, returns: torch.Tensor, config: PPOConfig
) -> torch.Tensor:
    """Half the squared error to the returns; with config.clip_vloss, the larger of it and the
    error of the prediction clipped to config.clip_coef around the acting one."""
    if not config.clip_vloss:
        return 0.5 * ((newvalue - returns) ** 2).mean()
    v_loss_unclipped = (newvalue - returns) ** 2
    v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -config.clip_coef, config.clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    return 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()


def adapt_kl_coef(kl_coef: float, approx_kl: float, kl_target: float) -> float:
    """The original PPO's rule: double beta when KL > 1.5 target, halve it when KL < target / 1.5."""
    if approx_kl > 1.5 * kl_target:
        return kl_coef * 2.0
    if approx_kl < kl_target / 1.5:
        return kl_coef / 2.0
    return kl_coef
