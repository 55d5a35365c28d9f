"""The surreal CLI: help, dry run, and bad input that starts nothing."""

import pytest
from click.testing import CliRunner

from surreal.cli import main
from surreal.testing import surreal_cli

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["launch", "--help"],
        ["eval", "--help"],
        ["status", "--help"],
        ["export", "--help"],
        ["plot", "--help"],
    ],
)
def test_help(command, tmp_path):
    result = surreal_cli(command, tmp_path, tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
    assert list(tmp_path.iterdir()) == []  # no side effects


@pytest.mark.integration
def test_dry_run_prints_config_and_processes_and_writes_nothing(tmp_path):
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "3",
            "--set",
            "algo.lr=1e-3",
            "--dry-run",
        ],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    assert '"lr": 0.001' in result.stdout
    for name in ("actor-0", "actor-2", "learner", "buffer", "param-server", "metrics", "evaluator"):
        assert f"name: {name}" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["launch", "ppx", "--env", "gym:CartPole-v1"], "did you mean 'ppo'"),
        (["launch", "ppo", "--env", "gym:CartPol-v1"], "did you mean gym:CartPole-v1"),
        (
            ["launch", "ppo", "--env", "gym:CartPole-v1", "--set", "algo.clip=0.1"],
            "did you mean 'algo.clip_coef'",
        ),
        (
            ["launch", "ppo", "--env", "gym:CartPole-v1", "--set", "algo.lr=fast"],
            "algo.lr expects float, got 'fast'",
        ),
        (["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "0"], "run.actors must be >= 1"),
        (["launch", "--env", "gym:CartPole-v1"], "name an algorithm"),
        (["launch", "--resume", "nowhere"], "not a run folder"),
    ],
)
def test_bad_input_is_a_clear_error_and_starts_nothing(args, message, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("SYMPHONY_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "runs").exists()
    assert not (home / "experiments").exists() or not any((home / "experiments").iterdir())


@pytest.mark.integration
def test_status_and_eval_of_a_missing_run(tmp_path):
    for command in (["status", "nowhere"], ["eval", "nowhere"]):
        result = surreal_cli(command, tmp_path, tmp_path / "home")
        assert result.returncode == 2 and "not a surreal run folder" in result.stderr


def test_launch_without_env_is_a_usage_error_that_shows_examples(tmp_path):
    # no environment is assumed (it was CartPole, silently, for 200k steps)
    result = surreal_cli(["launch", "ppo", "--steps", "2000"], tmp_path, tmp_path / "home", 60)
    assert result.returncode == 2, result.stdout + result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("Error: name the environment")
    for example in ("surreal launch ppo --env gym:CartPole-v1", "robosuite:Lift", "--resume"):
        assert example in line
    assert list(tmp_path.iterdir()) == []  # no run folder, nothing started
