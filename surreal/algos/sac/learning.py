"""The SAC update: soft twin-critic target, entropy-regularized policy loss, temperature tuning."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from surreal.algos.ddpg.learning import (
    as_tensors,
    clip_and_step,
    critic_step,
    critics_backward,
    optimize,
    update_target,
)
from surreal.algos.ddpg.networks import Critic
from surreal.algos.sac.config import SACConfig
from surreal.algos.sac.networks import GaussianActor, squashed_sample


class SAC:
    """Networks, optimizers and the update of SAC with automatic entropy tuning.

    A batch is DDPG's (`surreal.algos.ddpg.learning.DDPG`): obs [B, O], act [B, A] in [-1, 1],
    rew [B] (the n-step return), next_obs [B, O] and discount [B] (0 where the episode ended).
    The policy's noise comes from a generator of its own (in `state_dict`), so a resumed run
    draws what the uninterrupted one would have.
    """

    def __init__(
        self, obs_dim: int, act_dim: int, config: SACConfig, seed: int = 0, device: Any = "cpu"
    ) -> None:
        torch.manual_seed(seed)
        self.device = torch.device(device)
        self.config, self.obs_dim, self.act_dim = config, obs_dim, act_dim
        self.actor = GaussianActor(obs_dim, act_dim, config.hidden).to(self.device)
        n_critics = 2 if config.twin_critics else 1
        self.critics = nn.ModuleList(
            Critic(obs_dim, act_dim, config.hidden) for _ in range(n_critics)
        ).to(self.device)
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.lr)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=config.lr)
        self.target_entropy = (
            -float(act_dim) if config.target_entropy is None else float(config.target_entropy)
        )
        self.log_alpha = torch.tensor(
            math.log(config.init_alpha), device=self.device, requires_grad=True
        )
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=config.lr)
        self.generator = torch.Generator().manual_seed(seed)  # on the CPU: portable state
        self.iteration = 0
        self._last: dict[str, Any] = {
            "losses/actor_loss": 0.0,
            "losses/alpha_loss": 0.0,
            "losses/entropy": 0.0,
        }
        self._compiled: tuple[Callable, Callable] | None = None  # `use_compiled`

    def use_compiled(self, compiled: Callable[..., Callable]) -> None:
        """Run the critics' and the policy's loss and backward through `compiled(fn, name,
        reset)` (`Learner.compiled`, with `run.compile`) from now on, with fused Adam; the
        policy's noise is drawn outside (from `self.generator`, as the eager update does)."""
        lr = self.config.lr  # fused Adam: new optimizers, before any step
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr, fused=True)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=lr, fused=True)
        self._compiled = (
            compiled(self._critic_backward, "SAC's critic step", self.critic_opt.zero_grad),
            compiled(self._policy_backward, "SAC's policy step", self.actor_opt.zero_grad),
        )

    def _critic_backward(self, obs: torch.Tensor, act: torch.Tensor, y: torch.Tensor) -> Any:
        """`critics_backward` of SAC's critics: (the summed loss, Q_1's mean)."""
        return critics_backward(self.critics, obs, act, y)

    def _policy_backward(
        self, obs: torch.Tensor, eps: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The policy's loss alpha log pi(a|o) - min_j Q_j(o, a), a = squash(mean + std eps),
        backward; (the loss, log pi(a|o)), detached."""
        act, logp = squashed_sample(*self.actor(obs), eps)
        actor_loss = (alpha * logp - self.min_q(self.critics, obs, act)).mean()
        actor_loss.backward()
        return actor_loss.detach(), logp.detach()

    @property
    def alpha(self) -> torch.Tensor:
        """The temperature exp(log alpha), as a constant of the other losses."""
        return self.log_alpha.detach().exp()

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """a ~ pi(.|o) in [-1, 1] (reparameterized) and log pi(a|o)."""
        mean, log_std = self.actor(obs)
        return squashed_sample(mean, log_std, self._noise(mean.shape))

    def _noise(self, shape: torch.Size) -> torch.Tensor:
        """Standard normal draws from `self.generator` (on the CPU), on the device."""
        return torch.randn(shape, generator=self.generator).to(self.device)

    def min_q(self, critics: nn.ModuleList, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """min_j Q_j(o, a) over `critics`."""
        return torch.stack([q(obs, act) for q in critics]).min(dim=0).values

    def target_q(
        self, rew: torch.Tensor, next_obs: torch.Tensor, discount: torch.Tensor
    ) -> torch.Tensor:
        """y = R^n + discount * (min_j Q'_j(o', a') - alpha log pi(a'|o')), a' ~ pi(.|o')."""
        with torch.no_grad():
            next_act, next_logp = self.sample(next_obs)
            soft_v = self.min_q(self.critics_target, next_obs, next_act) - self.alpha * next_logp
            return rew + discount * soft_v

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        """One learner iteration: critic step, then (every actor_delay) the policy and
        temperature steps and the target update. Its metrics are floats, or 0-d tensors with a
        compiled step (`float()` reads them)."""
        c = self.config
        obs, act, rew, next_obs, discount = as_tensors(batch, self.device)
        y = self.target_q(rew, next_obs, discount)
        if self._compiled is not None:
            return self._compiled_update(obs, act, y)
        metrics = critic_step(self.critics, self.critic_opt, obs, act, y, c.grad_clip)
        self.iteration += 1
        if self.iteration % c.actor_delay == 0:
            self.update_policy(obs)
            update_target(self.critics_target, self.critics, c, self.iteration)
        return {**metrics, **self._last, "losses/alpha": self.alpha.item()}

    def _compiled_update(self, obs: torch.Tensor, act: torch.Tensor, y: torch.Tensor) -> dict:
        """`update` with the compiled losses (`use_compiled`): the same math, the metrics left
        on the device."""
        critic, policy = self._compiled
        c = self.config
        self.critic_opt.zero_grad(set_to_none=True)
        loss, q1 = critic(obs, act, y)
        clip_and_step(self.critic_opt, self.critics, c.grad_clip)
        self.critic_opt.zero_grad(set_to_none=True)  # the policy's backward reaches them too
        metrics = {"losses/qf_loss": loss / len(self.critics), "losses/qf_values": q1}
        self.iteration += 1
        if self.iteration % c.actor_delay == 0:
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss, logp = policy(obs, self._noise((len(obs), self.act_dim)), self.alpha)
            clip_and_step(self.actor_opt, self.actor, c.grad_clip)
            self._last["losses/actor_loss"], self._last["losses/entropy"] = actor_loss, -logp.mean()
            if c.autotune:
                self._last["losses/alpha_loss"] = self._alpha_step(logp)
            update_target(self.critics_target, self.critics, c, self.iteration)
        return {**metrics, **self._last, "losses/alpha": self.alpha}

    def _alpha_step(self, logp: torch.Tensor) -> torch.Tensor:
        """One step of log alpha on -log alpha (log pi(a|o) + target_entropy); the loss."""
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        return alpha_loss.detach()

    def update_policy(self, obs: torch.Tensor) -> None:
        """Policy step on alpha log pi(a|o) - min_j Q_j(o, a), a ~ pi(.|o); then, with
        autotune, a step of log alpha on -log alpha (log pi(a|o) + target_entropy): alpha
        grows while the entropy is below its target and shrinks while it is above."""
        act, logp = self.sample(obs)
        actor_loss = (self.alpha * logp - self.min_q(self.critics, obs, act)).mean()
        optimize(self.actor_opt, actor_loss, self.actor, self.config.grad_clip)
        self._last["losses/actor_loss"] = actor_loss.item()
        self._last["losses/entropy"] = -logp.mean().item()
        if self.config.autotune:
            self._last["losses/alpha_loss"] = self._alpha_step(logp).item()

    def actor_params(self) -> dict[str, np.ndarray]:
        """The policy's weights as numpy arrays (what the parameter server hands to actors)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.actor.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint needs to resume learning exactly, the temperature, its
        optimizer and the noise generator included."""
        return {
            "actor": self.actor.state_dict(),
            "critics": self.critics.state_dict(),
            "critics_target": self.critics_target.state_dict(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "alpha_opt": self.alpha_opt.state_dict(),
            "generator": self.generator.get_state(),
            "iteration": self.iteration,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from `state_dict()` (log alpha in place: alpha_opt keeps optimizing it)."""
        self.actor.load_state_dict(state["actor"])
        self.critics.load_state_dict(state["critics"])
        self.critics_target.load_state_dict(state["critics_target"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
        self.generator.set_state(state["generator"])
        self.iteration = int(state["iteration"])
