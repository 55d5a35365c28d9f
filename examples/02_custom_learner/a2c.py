"""A2C as a custom surreal Learner (run: surreal launch examples/02_custom_learner/a2c.py:A2C --env gym:CartPole-v1)."""

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from surreal.api import Learner, LearnerConfig, Policy


@dataclass
class A2CConfig(LearnerConfig):
    """Settings, each overridable with --set algo.<name>=value."""

    lr: float = 3e-3
    gamma: float = 0.99
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    hidden: int = 64


class ActorCritic(nn.Module):
    def __init__(self, obs_dim: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
        )
        self.pi, self.v = nn.Linear(hidden, num_actions), nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[Categorical, torch.Tensor]:
        h = self.body(obs)
        return Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)


class A2CPolicy(Policy):
    """Runs in the actors: samples actions; `value` bootstraps each segment's last step."""

    def __init__(self, config: A2CConfig, env_info) -> None:
        self.net = ActorCritic(env_info.obs_shape[0], env_info.num_actions, config.hidden)

    @torch.no_grad()
    def act(self, obs, deterministic=False):
        dist, _ = self.net(torch.as_tensor(obs))
        action = dist.probs.argmax(-1) if deterministic else dist.sample()
        return action.numpy(), {}

    @torch.no_grad()
    def value(self, obs):
        return self.net(torch.as_tensor(obs))[1].numpy()

    def load_params(self, params) -> None:
        self.net.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in params.items()})


class A2C(Learner):
    """Advantage actor-critic: n-step returns over each segment, one gradient step per batch."""

    config_class = A2CConfig

    def __init__(self, config: A2CConfig, env_info) -> None:
        super().__init__(config, env_info)
        if not env_info.discrete:
            raise ValueError("this A2C example handles discrete actions only")
        self.net = A2CPolicy(config, env_info).net
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=config.lr)

    @classmethod
    def make_policy(cls, config, env_info):
        return A2CPolicy(config, env_info)

    def learn(self, batch):
        # every key is [segments, T, envs, ...]; next_value is [segments, envs]
        obs, actions = torch.as_tensor(batch["obs"]), torch.as_tensor(batch["action"])
        rewards = torch.as_tensor(batch["reward"])
        done = torch.as_tensor(batch["terminated"] | batch["truncated"]).float()
        bootstrap = torch.as_tensor(batch["final_value"])  # value after a time limit, else 0
        returns = torch.zeros_like(rewards)
        running = torch.as_tensor(batch["next_value"])
        for t in reversed(range(rewards.shape[1])):
            running = rewards[:, t] + self.config.gamma * (
                running * (1 - done[:, t]) + bootstrap[:, t]
            )
            returns[:, t] = running
        dist, values = self.net(obs)
        advantages = (returns - values).detach()
        policy_loss = -(dist.log_prob(actions) * advantages).mean()
        value_loss = 0.5 * ((returns - values) ** 2).mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + self.config.vf_coef * value_loss - self.config.ent_coef * entropy
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), 0.5)
        self.optimizer.step()
        return {
            "losses/policy_loss": policy_loss.item(),
            "losses/value_loss": value_loss.item(),
            "losses/entropy": entropy.item(),
        }

    def params(self):
        return {k: v.detach().numpy().copy() for k, v in self.net.state_dict().items()}

    def state_dict(self):
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
