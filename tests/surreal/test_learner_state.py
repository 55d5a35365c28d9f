"""A researcher's own Learner resumes with everything torch it holds: the default
`state_dict` saves the target network, a second optimizer and a scheduler next to `model` and
`optimizer` (before, a resumed DQN of the docs' kind trained against a target network of
random weights until its next sync, and a second optimizer started afresh)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from surreal.api import Learner
from surreal.api.spaces import EnvInfo

INFO = EnvInfo((3,), True, 2, (), (), ())


class TwoNets(Learner):
    @classmethod
    def make_policy(cls, config, env_info):
        raise NotImplementedError  # not needed for its state

    @classmethod
    def make_model(cls, config, env_info):
        return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))

    def __init__(self, config, env_info):
        super().__init__(config, env_info)
        self.target = copy.deepcopy(self.model)
        self.head = self.model[2]  # a module inside the model: saved with it, not again
        self.critic = nn.Linear(3, 1)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.critic_optimizer = torch.optim.SGD(self.critic.parameters(), lr=0.1, momentum=0.9)
        self.schedule = torch.optim.lr_scheduler.StepLR(self.critic_optimizer, 1, gamma=0.5)
        self.updates = 0

    def learn(self, batch):
        obs = torch.randn(4, 3)
        loss = self.model(obs).pow(2).mean() + self.critic(obs).pow(2).mean()
        self.optimizer.zero_grad(), self.critic_optimizer.zero_grad()
        loss.backward()
        self.optimizer.step(), self.critic_optimizer.step(), self.schedule.step()
        with torch.no_grad():
            for p in self.target.parameters():
                p.add_(1.0)
        return {"losses/loss": float(loss.detach())}


def _trained() -> TwoNets:
    learner = TwoNets(TwoNets.config_class(), INFO)
    for _ in range(3):
        learner.learn({})
    return learner


def _same(a: nn.Module | dict, b: nn.Module | dict) -> bool:
    sa = a if isinstance(a, dict) else a.state_dict()
    sb = b if isinstance(b, dict) else b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_every_torch_attribute_comes_back():
    before = _trained()
    state = before.state_dict()
    assert sorted(state["modules"]) == ["critic", "critic_optimizer", "schedule", "target"]
    after = TwoNets(TwoNets.config_class(), INFO)
    assert not _same(after.target, before.target)
    after.load_state_dict(state)
    for name in ("model", "target", "critic"):
        assert _same(getattr(after, name), getattr(before, name)), name
    momentum = lambda o: [s["momentum_buffer"] for s in o.state.values()]  # noqa: E731
    assert all(
        map(torch.equal, momentum(after.critic_optimizer), momentum(before.critic_optimizer))
    )
    assert after.critic_optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**3)
    assert after.schedule.last_epoch == 3
    assert after.head is after.model[2]  # the alias still points into the loaded model


def test_a_checkpoint_of_the_older_form_still_loads():
    before = _trained()
    old = {"model": before.model.state_dict(), "optimizer": before.optimizer.state_dict()}
    after = TwoNets(TwoNets.config_class(), INFO)
    after.load_state_dict(old)
    assert _same(after.model, before.model)


def test_a_checkpoint_with_a_network_this_learner_lacks_is_refused():
    state = _trained().state_dict()
    state["modules"]["value_net"] = nn.Linear(3, 1).state_dict()
    with pytest.raises(KeyError, match="value_net"):
        TwoNets(TwoNets.config_class(), INFO).load_state_dict(state)


def test_a_learner_with_only_a_model_keeps_the_plain_form():
    class One(Learner):
        make_policy = TwoNets.make_policy

        @classmethod
        def make_model(cls, config, env_info):
            return nn.Linear(3, 2)

        def learn(self, batch):
            return {}

    state = One(One.config_class(), INFO).state_dict()
    assert sorted(state) == ["model", "optimizer"]
