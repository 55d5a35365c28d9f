"""DDPG / TD3 learning step: n-step critic target, deterministic policy gradient, target networks."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from surreal.algos.ddpg.config import DDPGConfig
from surreal.algos.ddpg.networks import Actor, Critic, hard_update, soft_update

BATCH_KEYS = ("obs", "act", "rew", "next_obs", "discount")
"""The arrays of a replay sample, in the order `as_tensors` returns them."""


def as_tensors(batch: dict[str, np.ndarray], device: torch.device) -> tuple[torch.Tensor, ...]:
    """obs, act, rew, next_obs, discount of a batch as float32 tensors on `device`."""
    return tuple(
        torch.as_tensor(batch[k], dtype=torch.float32).to(device, non_blocking=True)
        for k in BATCH_KEYS
    )


def optimize(
    opt: torch.optim.Optimizer, loss: torch.Tensor, module: nn.Module, grad_clip: float
) -> None:
    """One gradient step of `opt` on `loss`; the gradient of `module` clipped to `grad_clip`
    in global norm first (0: no clipping)."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        nn.utils.clip_grad_norm_(module.parameters(), grad_clip)
    opt.step()


def clip_and_step(opt: torch.optim.Optimizer, module: nn.Module, grad_clip: float) -> None:
    """`opt`'s step on the gradients already there, clipped to `grad_clip` in global norm first
    (0: no clipping)."""
    if grad_clip > 0:
        nn.utils.clip_grad_norm_(module.parameters(), grad_clip)
    opt.step()


def critic_step(
    critics: nn.ModuleList,
    opt: torch.optim.Optimizer,
    obs: torch.Tensor,
    act: torch.Tensor,
    y: torch.Tensor,
    grad_clip: float,
) -> dict[str, float]:
    """One step of every critic on its squared error to the target y; returns losses/qf_loss
    (the mean per critic) and losses/qf_values (Q_1's mean)."""
    qs = [q(obs, act) for q in critics]
    critic_loss = sum(((q - y) ** 2).mean() for q in qs)
    optimize(opt, critic_loss, critics, grad_clip)
    return {
        "losses/qf_loss": critic_loss.item() / len(qs),
        "losses/qf_values": qs[0].mean().item(),
    }


def critics_backward(
    critics: nn.ModuleList, obs: torch.Tensor, act: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every critic's squared error to y, backward; (the summed loss, Q_1's mean), detached
    (the compiled critic step of DDPG/TD3 and SAC)."""
    qs = [q(obs, act) for q in critics]
    critic_loss = sum(((q - y) ** 2).mean() for q in qs)
    critic_loss.backward()
    return critic_loss.detach(), qs[0].detach().mean()


def update_target(target: nn.Module, source: nn.Module, config: DDPGConfig, iteration: int) -> None:
    """Called at every actor update: soft (Polyak with config.tau) or hard (a copy once every
    config.target_period iterations)."""
    if config.target_update == "soft":
        soft_update(target, source, config.tau)
    elif iteration % config.target_period < config.actor_delay:
        hard_update(target, source)


class DDPG:
    """Networks, optimizers and the update of DDPG, with TD3's three options behind config flags.

    A batch is a dict of arrays: obs [B, O], act [B, A] in [-1, 1], rew [B] (the n-step return
    R_t^n), next_obs [B, O] (o_t+m) and discount [B] (gamma^m, 0 where the episode terminated).
    """

    def __init__(
        self, obs_dim: int, act_dim: int, config: DDPGConfig, seed: int = 0, device: Any = "cpu"
    ) -> None:
        torch.manual_seed(seed)
        self.device = torch.device(device)
        self.config, self.obs_dim, self.act_dim = config, obs_dim, act_dim
        self.actor = Actor(obs_dim, act_dim, config.hidden)
        n_critics = 2 if config.twin_critics else 1
        self.critics = nn.ModuleList(
            Critic(obs_dim, act_dim, config.hidden) for _ in range(n_critics)
        )
        self.actor.to(self.device)
        self.critics.to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.lr)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=config.lr)
        self.iteration = 0
        self._last_actor_loss = 0.0
        self._compiled: tuple[Callable, Callable] | None = None  # `use_compiled`

    def use_compiled(self, compiled: Callable[..., Callable]) -> None:
        """Run the critic's and the actor's loss and backward through `compiled(fn, name,
        reset)` (`Learner.compiled`, with `run.compile`) from now on, with fused Adam."""
        lr = self.config.lr  # fused Adam: new optimizers, before any step
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr, fused=True)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=lr, fused=True)
        self._compiled = (
            compiled(self._critic_backward, "DDPG/TD3's critic step", self.critic_opt.zero_grad),
            compiled(self._actor_backward, "DDPG/TD3's actor step", self.actor_opt.zero_grad),
        )

    def _critic_backward(self, obs: torch.Tensor, act: torch.Tensor, y: torch.Tensor) -> Any:
        """`critics_backward` of this algorithm's critics."""
        return critics_backward(self.critics, obs, act, y)

    def _actor_backward(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic policy gradient's loss -Q_1(o, mu(o)), backward; the loss."""
        actor_loss = -self.critics[0](obs, self.actor(obs)).mean()
        actor_loss.backward()
        return actor_loss.detach()

    def _compiled_update(
        self, obs: torch.Tensor, act: torch.Tensor, y: torch.Tensor
    ) -> dict[str, Any]:
        """`update`'s steps with the compiled losses (`use_compiled`): the same math; the
        metrics stay tensors on the device (read when reported, not every update)."""
        critic, actor = self._compiled
        c = self.config
        self.critic_opt.zero_grad(set_to_none=True)
        loss, q1 = critic(obs, act, y)
        clip_and_step(self.critic_opt, self.critics, c.grad_clip)
        # the actor's backward reaches the critics too: fresh gradients there, not sums into
        # tensors a CUDA graph's next replay overwrites (run.compile=graphs)
        self.critic_opt.zero_grad(set_to_none=True)
        metrics = {"losses/qf_loss": loss / len(self.critics), "losses/qf_values": q1}
        self.iteration += 1
        if self.iteration % c.actor_delay == 0:
            self.actor_opt.zero_grad(set_to_none=True)
            self._last_actor_loss = actor(obs)
            clip_and_step(self.actor_opt, self.actor, c.grad_clip)
            self.update_targets()
        return {**metrics, "losses/actor_loss": self._last_actor_loss}

    def target_q(
        self, rew: torch.Tensor, next_obs: torch.Tensor, discount: torch.Tensor
    ) -> torch.Tensor:
        """y = R^n + discount * min_j Q'_j(o', clip(mu'(o') + eps)) (eps only with smoothing)."""
        c = self.config
        with torch.no_grad():
            next_act = self.actor_target(next_obs)
            if c.policy_smoothing > 0:
                eps = (torch.randn_like(next_act) * c.policy_smoothing).clamp(
                    -c.smoothing_clip, c.smoothing_clip
                )
                next_act = (next_act + eps).clamp(-1.0, 1.0)
            next_q = (
                torch.stack([q(next_obs, next_act) for q in self.critics_target]).min(dim=0).values
            )
            return rew + discount * next_q

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        """One learner iteration: critic step, then (every actor_delay) actor step + target
        update. Its metrics are floats, or 0-d tensors with a compiled step (`float()` reads
        them)."""
        c = self.config
        obs, act, rew, next_obs, discount = as_tensors(batch, self.device)
        y = self.target_q(rew, next_obs, discount)
        if self._compiled is not None:
            return self._compiled_update(obs, act, y)
        metrics = critic_step(self.critics, self.critic_opt, obs, act, y, c.grad_clip)
        self.iteration += 1
        if self.iteration % c.actor_delay == 0:
            # Deterministic policy gradient: maximize Q_1(o, mu(o)).
            actor_loss = -self.critics[0](obs, self.actor(obs)).mean()
            optimize(self.actor_opt, actor_loss, self.actor, c.grad_clip)
            self._last_actor_loss = actor_loss.item()
            self.update_targets()
        return {**metrics, "losses/actor_loss": self._last_actor_loss}

    def update_targets(self) -> None:
        """Soft (Polyak, every actor update) or hard (copy every target_period iterations)."""
        update_target(self.actor_target, self.actor, self.config, self.iteration)
        update_target(self.critics_target, self.critics, self.config, self.iteration)

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """The greedy action mu(o) in [-1, 1] for one observation or a batch."""
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        return self.actor(obs_t).cpu().numpy()

    def actor_params(self) -> dict[str, np.ndarray]:
        """The actor's weights as numpy arrays (what the parameter server hands to actors)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.actor.state_dict().items()}

    def state_dict(self) -> dict:
        """Everything a checkpoint needs to resume learning exactly."""
        return {
            "actor": self.actor.state_dict(),
            "critics": self.critics.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critics_target": self.critics_target.state_dict(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "iteration": self.iteration,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict()`."""
        self.actor.load_state_dict(state["actor"])
        self.critics.load_state_dict(state["critics"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critics_target.load_state_dict(state["critics_target"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.iteration = int(state["iteration"])
