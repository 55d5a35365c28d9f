"""Declared markers instead of name conventions (issue 32): `Policy.remote_methods` is what a
policy worker serves, `Policy.recurrent` what it keeps memory for, `LearnerConfig.replay_items()`
what the buffer's memory request counts; the old rules still work for one deprecation line."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from surreal.algos.ddpg.config import DDPGConfig, TD3Config
from surreal.algos.ddpg.learner import DDPGPolicy
from surreal.algos.ppo.policy import PPOPolicy
from surreal.algos.ppo.vision_policy import VisionPolicy
from surreal.algos.sac.config import SACConfig
from surreal.algos.sac.learner import SACPolicy
from surreal.api.core import LearnerConfig, Policy
from surreal.runtime.plan.sizing import memory_gb, replay_gb
from surreal.runtime.processes.policy_worker import PolicyServer, is_recurrent
from surreal.runtime.wire.guard import Invalid
from surreal.runtime.wire.policy_protocol import inference_methods

SERVED_BEFORE = {  # what the name rule (`obs` first) served for each built-in policy
    PPOPolicy: {"act", "value"},
    VisionPolicy: {"act", "value", "inputs"},
    DDPGPolicy: {"act", "value", "unit_action"},
    SACPolicy: {"act", "value", "unit_action"},
}


class Probe(Policy):
    """Declares `probe`; `debug` takes `obs` first but is not declared."""

    remote_methods = ("act", "probe")

    def act(self, obs, deterministic=False):
        return obs, {}

    def probe(self, obs):
        return obs * 2

    def debug(self, obs):
        return obs


class Memory(Policy):
    """Recurrent by its marker alone (it keeps the base's no-op reset)."""

    recurrent = True

    def __init__(self) -> None:
        self.state = None

    def act(self, obs, deterministic=False):
        return obs, {}


class Yesterday(Policy):
    """Written before the markers: overrides reset, has an undeclared `obs`-first method."""

    def __init__(self) -> None:
        self.state = (torch.zeros(1),)

    def act(self, obs, deterministic=False):
        return obs, {}

    def features(self, obs):
        return obs

    def reset(self, done):
        pass


@pytest.mark.parametrize("cls", list(SERVED_BEFORE), ids=lambda c: c.__name__)
def test_built_in_policies_serve_exactly_their_remote_methods_as_before(cls):
    policy = object.__new__(cls)  # no networks: the markers are class attributes
    assert inference_methods(policy) == set(cls.remote_methods) == SERVED_BEFORE[cls]
    assert is_recurrent(policy) == (cls is VisionPolicy) == cls.recurrent


def test_served_methods_are_the_declared_ones_and_others_are_refused(caplog):
    with caplog.at_level(logging.WARNING):
        server = PolicyServer(Probe(), (2,))
    assert server.validate.methods == {"act", "probe"} and not caplog.records
    obs = np.zeros((3, 2), np.float32)
    req = server.validate({"client": "a", "method": "probe", "obs": obs})
    server.version = 1
    np.testing.assert_array_equal(server.answer([req])[0]["result"], obs * 2)
    with pytest.raises(Invalid, match="must be one of the policy's remote_methods"):
        server.validate({"client": "a", "method": "debug", "obs": obs})


def test_remote_methods_naming_a_local_or_missing_method_is_refused_at_start():
    class Wrong(Probe):
        remote_methods = ("act", "reset", "missing")

    with pytest.raises(ValueError, match=r"names \['missing', 'reset'\]"):
        PolicyServer(Wrong(), (2,))


def test_a_recurrent_policy_is_known_by_its_marker(caplog):
    class Stateless(Yesterday):  # overrides reset, but says it keeps no memory
        recurrent = False
        remote_methods = ("act",)

    with caplog.at_level(logging.WARNING):
        assert PolicyServer(Memory(), (2,)).recurrent
        assert not PolicyServer(Stateless(), (2,)).recurrent
    assert not caplog.records


def test_yesterdays_policy_still_works_with_one_warning_line_each(caplog):
    with caplog.at_level(logging.WARNING):
        server = PolicyServer(Yesterday(), (2,))
    assert server.recurrent and server.validate.methods == {"act", "value", "features"}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert "Yesterday overrides reset() without declaring `recurrent`" in lines[0]
    assert "set `recurrent = True` on Yesterday" in lines[0]
    assert "['features']" in lines[1]
    assert "remote_methods = ('act', 'value', 'features')" in lines[1]


def _plan(algo: object) -> SimpleNamespace:
    return SimpleNamespace(
        config=SimpleNamespace(algo=algo, env=SimpleNamespace(id="gym:Pendulum-v1")),
        env_info=SimpleNamespace(obs_shape=(3,), action_dim=1),
    )


def test_sizing_counts_the_configs_replay_items():
    per_transition = 4 * (2 * 3 + 1 + 2)
    for config in (DDPGConfig(), TD3Config(), SACConfig(), DDPGConfig(replay_capacity=5_000)):
        assert config.replay_items() == config.replay_capacity
        assert replay_gb(_plan(config)) == config.replay_capacity * per_transition / 2**30
    assert LearnerConfig().replay_items() == 0 and memory_gb("buffer", _plan(LearnerConfig())) == 2
    assert memory_gb("buffer", _plan(DDPGConfig())) == 2.25  # 1M x 36 B x 1.2 + 2 GiB

    @dataclass
    class Big(LearnerConfig):  # no replay_capacity field: only the hook counts
        def replay_items(self) -> int:
            return 100_000_000

    assert memory_gb("buffer", _plan(Big())) == 6.25  # 100M x 36 B x 1.2 + 2 GiB, rounded up
    assert memory_gb("learner", _plan(Big())) == 4.0
