"""Typed config overrides: types are checked and unknown keys suggest the nearest one."""

import json

import pytest

from surreal.algos.ppo.config import PPOConfig
from surreal.api.config import Config, ConfigError, apply_overrides, from_dict, keys, load, save

pytestmark = pytest.mark.timeout(30)


def _config() -> Config:
    return Config(algo=PPOConfig())


def test_overrides_parse_each_field_type():
    config = apply_overrides(
        _config(),
        [
            "algo.lr=1e-3",
            "env.num_envs=4",
            "algo.norm_adv=false",
            "run.stop_at_return=475",
            "algo.hidden_sizes=32,32",
            "env.max_episode_steps=none",
            "algo.loss=kl",
        ],
    )
    assert config.algo.lr == 1e-3 and config.env.num_envs == 4
    assert config.algo.norm_adv is False and config.run.stop_at_return == 475.0
    assert config.algo.hidden_sizes == (32, 32) and config.env.max_episode_steps is None
    assert config.algo.loss == "kl"


def test_unknown_key_suggests_nearest():
    with pytest.raises(ConfigError, match="did you mean 'algo.lr'"):
        apply_overrides(_config(), ["algo.lrr=1e-3"])
    with pytest.raises(ConfigError, match="did you mean 'env.num_envs'"):
        apply_overrides(_config(), ["env.num_env=3"])


def test_wrong_value_type_names_the_expected_type():
    with pytest.raises(ConfigError, match="algo.lr expects float, got 'fast'"):
        apply_overrides(_config(), ["algo.lr=fast"])
    with pytest.raises(ConfigError, match="expects int"):
        apply_overrides(_config(), ["env.num_envs=2.5"])
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides(_config(), ["algo.lr"])


def test_saved_config_round_trips(tmp_path):
    config = apply_overrides(_config(), ["algo.lr=5e-4", "run.actors=3"])
    save(config, tmp_path / "config.json")
    again = load(tmp_path / "config.json", PPOConfig)
    assert again == config


def test_loading_rejects_unknown_and_mistyped_keys():
    with pytest.raises(ConfigError, match="did you mean 'actors'"):
        from_dict(Config, {"run": {"actor": 2}}, algo_class=PPOConfig)
    with pytest.raises(ConfigError, match="expects int"):
        from_dict(Config, {"run": {"actors": "two"}}, algo_class=PPOConfig)


def test_keys_lists_every_settable_field():
    names = keys(_config())
    assert "algo.clip_coef" in names and "run.steps" in names and "eval.episodes" in names


def test_a_retired_key_says_what_to_set_instead():
    with pytest.raises(
        ConfigError, match=r"algo.segments_per_batch is retired; set algo.batch_size"
    ):
        apply_overrides(_config(), ["algo.segments_per_batch=4"])


def test_a_run_saved_with_segments_per_batch_resumes_with_the_same_batch(tmp_path):
    """A run folder written before algo.batch_size: its N segments become N x rollout x envs
    env steps, and 0 (one per actor) stays 0."""
    path = tmp_path / "config.json"
    save(_config(), path)
    for segments, expected in ((3, 3 * 16 * 4), (0, 0)):
        data = json.loads(path.read_text())
        data["algo"].pop("batch_size", None)
        data["algo"]["segments_per_batch"] = segments
        data["actor"]["rollout_length"], data["env"]["num_envs"] = 16, 4
        path.write_text(json.dumps(data))
        assert load(path, PPOConfig).algo.batch_size == expected
