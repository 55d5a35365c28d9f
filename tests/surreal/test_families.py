"""Defaults per task family: which family an env is, what `surreal launch` sets, --set wins."""

from __future__ import annotations

import pytest

from surreal.algos.families import env_family

pytest.importorskip("gymnasium")


@pytest.mark.parametrize(
    ("env_id", "family"),
    [
        ("gym:CartPole-v1", "classic"),
        ("gym:Pendulum-v1", "classic"),
        ("gym:HalfCheetah-v5", "mujoco"),
        ("gym:Hopper-v5", "mujoco"),
        ("robosuite:Lift", "robosuite"),
        ("gym:NoSuchEnv-v0", "other"),
    ],
)
def test_the_family_comes_from_the_env_id(env_id, family):
    assert env_family(env_id) == family


def test_launch_applies_the_family_defaults_and_the_users_settings_win(tmp_path):
    pytest.importorskip("torch")
    from surreal.launch.experiment import plan

    p = plan("ppo", env="gym:CartPole-v1", folder=str(tmp_path))
    assert p.config.algo.norm_obs is False and p.config.algo.update_epochs == 20
    assert (p.config.algo.lr, p.config.algo.gamma, p.config.algo.gae_lambda) == (1e-3, 0.98, 0.8)
    assert p.config.algo.clip_vloss is False and p.config.algo.anneal_clip is True
    assert p.config.run.steps == 200_000  # the budget the schedules anneal over
    assert (
        plan("ppo", env="gym:CartPole-v1", steps=40_000, folder=str(tmp_path)).config.run.steps
        == 40_000
    )
    assert plan("ppo", env="gym:HalfCheetah-v5", folder=str(tmp_path)).config.run.steps == 100_000
    mine = plan(
        "ppo",
        env="gym:CartPole-v1",
        folder=str(tmp_path),
        overrides=("algo.norm_obs=true", "algo.lr=3e-4", "run.steps=50000"),
    )
    assert mine.config.algo.norm_obs is True and mine.config.algo.lr == 3e-4
    assert mine.config.run.steps == 50_000
    assert mine.config.algo.gamma == 0.98  # what the user did not set keeps the family's
    td3 = plan("td3", env="gym:HalfCheetah-v5", folder=str(tmp_path))
    assert td3.config.algo.lr == 3e-4 and td3.config.algo.replay_start == 10_000
    assert td3.config.algo.twin_critics is True
    assert td3.config.env.num_envs == 1  # 16 parallel envs explored too little (issue 49)
    assert td3.config.algo.n_step == 1 and td3.config.algo.sigma_spread == 1.0  # CleanRL's
    assert plan("td3", env="gym:Pendulum-v1", folder=str(tmp_path)).config.env.num_envs == 8


def test_a_family_setting_goes_through_the_typed_path_of_set():
    """A family default with a misspelt key or a wrong type is refused like `--set` refuses it,
    instead of adding an attribute the run never reads."""
    from dataclasses import dataclass

    from surreal.algos.families import apply_family_defaults
    from surreal.algos.ppo.config import PPOConfig
    from surreal.api.config import Config, ConfigError

    @dataclass
    class Misspelt(PPOConfig):
        @classmethod
        def family_defaults(cls, family: str) -> dict:
            return {"algo.learning_rate": 1e-3}

    @dataclass
    class Mistyped(PPOConfig):
        @classmethod
        def family_defaults(cls, family: str) -> dict:
            return {"algo.update_epochs": "many"}

    with pytest.raises(ConfigError, match=r"unknown config key 'algo.learning_rate'"):
        apply_family_defaults(Config(algo=Misspelt()))
    with pytest.raises(ConfigError, match=r"algo.update_epochs expects int, got 'many'"):
        apply_family_defaults(Config(algo=Mistyped()))
    config = Config(algo=PPOConfig())
    family, settings = apply_family_defaults(config)
    assert family == "classic" and config.algo.batch_size == settings["algo.batch_size"] == 1024


def test_ppo_on_mujoco_starts_with_less_action_noise_and_set_still_wins(tmp_path):
    """Issue 38: the MuJoCo family's Gaussian policy starts at log std -1 (HalfCheetah-v5 at 1M
    steps: 5,443 vs 1,632 with log std 0; bench/reports/learning.md); other families keep 0."""
    torch = pytest.importorskip("torch")
    from surreal.algos.ppo.learner import PPOLearner
    from surreal.launch.experiment import plan

    cheetah = plan("ppo", env="gym:HalfCheetah-v5", folder=str(tmp_path))
    model = PPOLearner.make_model(cheetah.config.algo, cheetah.env_info)
    assert torch.equal(model.log_std.detach(), torch.full((6,), -1.0))
    pendulum = plan("ppo", env="gym:Pendulum-v1", folder=str(tmp_path))
    assert PPOLearner.make_model(pendulum.config.algo, pendulum.env_info).log_std.abs().sum() == 0
    mine = plan(
        "ppo", env="gym:HalfCheetah-v5", folder=str(tmp_path), overrides=("algo.log_std_init=0",)
    )
    assert mine.config.algo.log_std_init == 0.0
