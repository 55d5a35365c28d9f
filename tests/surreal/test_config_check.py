"""Every config value is checked before anything starts: a refused launch writes nothing and says
in one line (one paragraph for a broken learner file) what to fix."""

from __future__ import annotations

import pytest

from surreal.api.config import ConfigError
from surreal.launch.experiment import plan
from surreal.testing import surreal_cli
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "algo, env, override, says",
    [
        ("ppo", "gym:CartPole-v1", "algo.lr=nan", "algo.lr=nan is not a finite number"),
        ("ppo", "gym:CartPole-v1", "algo.lr=0", "algo.lr=0.0 must be > 0"),
        ("ppo", "gym:CartPole-v1", "algo.gamma=inf", "algo.gamma=inf is not a finite"),
        ("ppo", "gym:CartPole-v1", "algo.gae_lambda=1.5", "must be in [0, 1]"),
        ("ppo", "gym:CartPole-v1", "eval.every_s=-1", "eval.every_s=-1.0 must be >= 0"),
        ("ddpg", "gym:Pendulum-v1", "algo.replay_shards=0", "algo.replay_shards=0 must be >= 1"),
        ("ddpg", "gym:Pendulum-v1", "algo.replay_start=10000000", "exceeds what the replay"),
        ("td3", "gym:Pendulum-v1", "run.steps=900", "would end without a single update"),
        ("sac", "gym:Pendulum-v1", "algo.replay_start=500000", "does not pass algo.replay_start"),
        ("es", "gym:CartPole-v1", "algo.population=0", "algo.population=0 must be >= 1"),
    ],
)
def test_values_that_cannot_run_are_refused_in_the_plan(tmp_path, algo, env, override, says):
    with pytest.raises(ConfigError, match=None) as err:
        plan(algo, env=env, overrides=(override,), folder=str(tmp_path / "runs"))
    assert says in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_an_algorithm_that_cannot_act_in_the_action_space_is_refused(tmp_path):
    with pytest.raises(ConfigError) as err:
        plan("ddpg", env="gym:CartPole-v1", folder=str(tmp_path))
    text = str(err.value)
    assert "cannot run on gym:CartPole-v1 (2 discrete actions)" in text and "continuous" in text
    assert "use ppo or dqn" in text  # what to run instead


def _refused(tmp_path, args: list[str]) -> str:
    result = surreal_cli(
        ["launch", *args, "--quiet"], tmp_path, tmp_path / "home", timeout=scaled(100)
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert not (tmp_path / "runs").exists(), "a refused launch wrote a run folder"
    return result.stderr.strip()


@pytest.mark.integration
def test_the_cli_refuses_bad_values_and_unknown_backends_before_writing_anything(tmp_path):
    err = _refused(tmp_path, ["ppo", "--env", "gym:CartPole-v1", "--set", "algo.lr=nan"])
    assert err.startswith("Error: algo.lr=nan") and len(err.splitlines()) == 1
    err = _refused(tmp_path, ["ddpg", "--env", "gym:CartPole-v1"])
    assert "cannot run on gym:CartPole-v1" in err and len(err.splitlines()) == 1
    err = _refused(tmp_path, ["ppo", "--env", "gym:CartPole-v1", "--backend", "foo"])
    assert "unknown backend 'foo'" in err and "local" in err
    assert "test" not in err.split("choose one of:")[1]  # symphony's in-process backend


@pytest.mark.parametrize(
    "source, line, says",
    [
        ("import numpy\n\ndef broken(:\n    pass\n", 3, "SyntaxError"),
        ("import numpy\nraise RuntimeError('no GPU here')\n", 2, "RuntimeError: no GPU here"),
    ],
)
def test_a_broken_learner_file_is_reported_in_one_paragraph(tmp_path, source, line, says):
    learner = tmp_path / "my_learner.py"
    learner.write_text(source)
    err = _refused(tmp_path, [f"{learner}:MyLearner", "--env", "gym:CartPole-v1"])
    assert len(err.splitlines()) == 1, err  # not a traceback
    assert f"{learner}:{line}" in err and says in err and "full traceback: " in err
    log = err.split("full traceback: ", 1)[1].split(")", 1)[0]
    with open(log) as f:
        assert "Traceback" in f.read()
