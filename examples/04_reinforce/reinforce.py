"""REINFORCE on whole episodes (run: surreal launch examples/04_reinforce/reinforce.py:Reinforce --env gym:CartPole-v1)."""

from dataclasses import dataclass

import torch
from torch import nn
from torch.distributions import Categorical

from surreal.api import Learner, LearnerConfig, Policy


@dataclass
class ReinforceConfig(LearnerConfig):
    lr: float = 1e-2
    gamma: float = 0.99
    hidden: int = 64


class ReinforcePolicy(Policy):
    def __init__(self, config, env_info) -> None:
        self.model = Reinforce.make_model(config, env_info)  # load_params fills it (default)

    @torch.no_grad()
    def act(self, obs, deterministic=False):
        logits = self.model(torch.as_tensor(obs))
        action = logits.argmax(-1) if deterministic else Categorical(logits=logits).sample()
        return action.numpy(), {}


class Reinforce(Learner):
    """Monte Carlo policy gradient: every segment holds whole episodes (the `episodes` recipe)."""

    config_class, recipe = ReinforceConfig, "episodes"

    def __init__(self, config, env_info) -> None:
        super().__init__(config, env_info)  # self.model = make_model(...)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)

    @classmethod
    def make_model(cls, config, env_info):
        n, h = env_info.obs_shape[0], config.hidden
        return nn.Sequential(nn.Linear(n, h), nn.Tanh(), nn.Linear(h, env_info.num_actions))

    @classmethod
    def make_policy(cls, config, env_info):
        return ReinforcePolicy(config, env_info)

    def learn(self, batch):
        # [segments, T, envs]: each column is one episode from its first step; mask 0 after it
        reward, mask = torch.as_tensor(batch["reward"]), torch.as_tensor(batch["mask"])
        returns, running = torch.zeros_like(reward), torch.zeros_like(reward[:, 0])
        for t in reversed(range(reward.shape[1])):  # reward-to-go (padding rewards are 0)
            running = returns[:, t] = reward[:, t] + self.config.gamma * running
        valid = mask.bool()
        adv = (returns - returns[valid].mean()) / (returns[valid].std() + 1e-8)
        logits = self.model(torch.as_tensor(batch["obs"]))
        logp = Categorical(logits=logits).log_prob(torch.as_tensor(batch["action"]))
        loss = -(logp * adv * mask).sum() / mask.sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"losses/policy_loss": loss.item(), "charts/episodes": float(mask[:, 0].sum())}
