"""Ranges live beside their config fields (`surreal.api.bounds.bounded`, issue 48 item 3): the
launch checks each, a redeclared default keeps its base's range, and a misspelt key, in
`--set` or in a range's declaration, is an error, never a check that checks nothing."""

from __future__ import annotations

import dataclasses

import pytest

from surreal.api.bounds import Bounds, bounded, declared_bounds, out_of_bounds, require
from surreal.api.config import Config, ConfigError
from surreal.api.core import LearnerConfig
from surreal.api.registry import config_class, names
from surreal.launch.config_check import check_values
from surreal.launch.experiment import plan

# What `surreal/launch/config_check.py`'s table checked, by key, before the ranges moved beside
# their fields; applied to every config that has the key (the off-policy batch size is >= 1
# there: its own check said so after the table's >= 0; ES's eval_every may be 0, "never").
BEFORE = {
    "run": "actors steps checkpoint_every learner_replicas:>=1 seed torch_threads:>=0",
    "env": "num_envs frame_stack action_repeat max_episode_steps:>=1 clip_obs:>0",
    "actor": "rollout_length group_size:>=1 max_ahead:>=0",
    "eval": "episodes:>=1 every_s:>=0",
    "algo": "lr clip_coef target_kl checkpoint_every_s noise_std task_timeout:>0 "
    "gamma gae_lambda tau:[0,1] update_epochs minibatch_size ent_coef vf_coef max_grad_norm "
    "bptt_length batch_size sigma grad_clip updates_per_step action_std max_episode_steps:>=0 "
    "num_minibatches lstm_size image_size n_step target_period actor_delay replay_capacity "
    "replay_start replay_shards param_shards chunk_size fetch_batches publish_every population "
    "noise_size eval_every eval_episodes:>=1",
}
TEXT = {">=1": ">= 1", ">=0": ">= 0", ">0": "> 0", "[0,1]": "in [0, 1]"}


def _before(section: str) -> dict[str, str]:
    out, pending = {}, []
    for word in BEFORE[section].split():
        name, _, bound = word.partition(":")
        pending.append(name)
        if bound:
            out.update(dict.fromkeys(pending, TEXT[bound]))
            pending = []
    return out


@pytest.mark.parametrize("algo", names())
def test_every_range_the_launch_checked_before_is_declared_beside_its_field(algo):
    config = Config(algo=config_class(algo)())
    for section in BEFORE:
        cls = type(getattr(config, section))
        declared = {k: str(v) for k, v in declared_bounds(cls).items()}
        fields = {f.name for f in dataclasses.fields(cls)}
        expected = {k: v for k, v in _before(section).items() if k in fields}
        if section == "algo" and "replay_capacity" in fields:
            expected["batch_size"] = ">= 1"
        if section == "algo" and algo == "es":
            expected["eval_every"] = ">= 0"  # 0: never, as its docstring says (the table said 1)
        assert {k: declared.get(k) for k in expected} == expected, (algo, section)


def test_a_redeclared_default_keeps_the_range_of_its_base_and_bounded_replaces_it():
    @dataclasses.dataclass
    class Mine(LearnerConfig):
        lr: float = 1e-2  # only the default changes: still > 0
        gamma: float = bounded(0.9, ge=0.5, le=1)
        ent_coef: float = bounded(0.01, ge=0)

    assert str(declared_bounds(Mine)["lr"]) == "> 0"
    bad = Mine(lr=-1.0, gamma=0.2, ent_coef=-0.5)
    assert [(k, str(b)) for k, _, b in out_of_bounds(bad)] == [
        ("lr", "> 0"),
        ("gamma", "in [0.5, 1]"),
        ("ent_coef", ">= 0"),
    ]
    with pytest.raises(
        ConfigError, match=r"^algo.ent_coef=-0.5 must be >= 0; --set algo.ent_coef="
    ):
        check_values(Config(algo=Mine(ent_coef=-0.5)))


def test_a_range_declared_with_a_misspelt_bound_fails_when_the_class_is_defined():
    with pytest.raises(TypeError, match="lo"):
        bounded(1, lo=0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="needs a bound"):
        bounded(1)
    with pytest.raises(TypeError, match="not both"):
        Bounds(ge=0, gt=0)


def test_none_and_nan_and_the_edges():
    assert Bounds(ge=0, le=1).holds(0) and Bounds(ge=0, le=1).holds(1)
    assert not Bounds(gt=0).holds(0) and not Bounds(gt=0).holds(float("nan"))
    assert str(Bounds(gt=0, le=1)) == "in (0, 1]" and str(Bounds(le=5)) == "<= 5"
    config = Config(algo=config_class("ppo")())
    config.env.clip_obs = None  # an optional setting left unset is in range
    config.algo.target_kl = None
    check_values(config)
    config.env.num_envs = 0
    with pytest.raises(ConfigError, match=r"^env.num_envs=0 must be >= 1; --set env.num_envs="):
        check_values(config)


def test_a_misspelt_set_key_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="unknown config key 'algo.lerning_rate'") as err:
        plan(
            "ppo",
            env="gym:CartPole-v1",
            overrides=("algo.lerning_rate=1e-3",),
            folder=str(tmp_path / "runs"),
        )
    assert "did you mean" in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_each_range_is_checked_once_at_launch_with_its_flag_named(tmp_path):
    with pytest.raises(ConfigError) as err:
        plan("ppo", env="gym:CartPole-v1", actors=0, folder=str(tmp_path / "runs"))
    assert str(err.value) == "run.actors must be >= 1, got 0 (--actors N)"
    for override, says in [
        ("run.learner_replicas=0", "run.learner_replicas=0 must be >= 1; --set"),
        ("actor.max_ahead=-1", "actor.max_ahead=-1 must be >= 0; --set"),
        ("run.torch_threads=-2", "run.torch_threads=-2 must be >= 0; --set"),
    ]:
        with pytest.raises(ConfigError) as err:
            plan("ppo", env="gym:CartPole-v1", overrides=(override,), folder=str(tmp_path / "r"))
        assert str(err.value).startswith(says), err.value


def test_a_config_built_in_python_is_checked_against_the_same_declared_ranges():
    ddpg, es = config_class("ddpg"), config_class("es")
    with pytest.raises(ValueError, match=r"^algo.actor_delay=0; it must be >= 1$"):
        ddpg(actor_delay=0)
    with pytest.raises(ValueError, match=r"^algo.replay_shards=0; it must be >= 1$"):
        ddpg(replay_shards=0)
    with pytest.raises(ValueError, match=r"^algo.noise_std=0.0; it must be > 0$"):
        es(noise_std=0.0)
    mappo = config_class("mappo")(pool_latest=1.5)
    with pytest.raises(ValueError, match=r"^algo.pool_latest=1.5; it must be in \[0, 1\]$"):
        mappo.check()
    with pytest.raises(TypeError, match="declares no range"):
        require(ddpg(), "actor_dleay")
