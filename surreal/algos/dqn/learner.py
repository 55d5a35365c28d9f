"""DQNLearner: Double DQN with a target network and a Huber loss, on the off-policy recipe.

A batch (`surreal.algos.offpolicy`): obs [B, O], act [B] (action indices), rew [B] (the n-step
return), next_obs [B, O], discount [B] (gamma^n, 0 where the episode terminated).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F

from surreal.algos.dqn.config import DQNConfig
from surreal.algos.dqn.policy import DQNPolicy, q_network
from surreal.api import Batch, EnvInfo, Learner


class DQNLearner(Learner):
    """Q-learning from replayed transitions: y = R^n + discount * Q'(o', argmax_a Q(o', a))."""

    config_class = DQNConfig
    recipe = "off-policy"

    def __init__(self, config: DQNConfig, env_info: EnvInfo) -> None:
        super().__init__(config, env_info)  # self.model: make_model, on self.device
        self.target = copy.deepcopy(self.model).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.updates = 0

    @classmethod
    def make_model(cls, config: DQNConfig, env_info: EnvInfo) -> torch.nn.Module:
        return q_network(env_info, config)

    @classmethod
    def make_policy(cls, config: DQNConfig, env_info: EnvInfo) -> DQNPolicy:
        return DQNPolicy(config, env_info)

    def learn(self, batch: Batch) -> dict[str, Any]:
        cfg = self.config
        t = self.to_device(batch)
        obs, next_obs = t["obs"].float(), t["next_obs"].float()
        act = t["act"].long().reshape(-1)
        with torch.no_grad():
            chooser = self.model if cfg.double else self.target
            next_act = chooser(next_obs).argmax(-1, keepdim=True)
            next_q = self.target(next_obs).gather(-1, next_act).squeeze(-1)
            y = t["rew"].float() + t["discount"].float() * next_q
        q = self.model(obs).gather(-1, act[:, None]).squeeze(-1)
        loss = F.smooth_l1_loss(q, y) if cfg.huber else F.mse_loss(q, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.updates += 1
        if self.updates % cfg.target_period == 0:
            self._update_target(cfg.tau)
        # tensors: the learner process reads them when it reports (no host read per update)
        return {"losses/td_loss": loss.detach(), "losses/q_values": q.detach().mean()}

    @torch.no_grad()
    def _update_target(self, tau: float) -> None:
        for target, online in zip(self.target.parameters(), self.model.parameters(), strict=True):
            target.lerp_(online, tau)

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
