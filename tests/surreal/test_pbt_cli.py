"""`surreal launch --population N`: help, bad values, the dry run, a population's folder, resume."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from surreal.cli import main
from surreal.testing import surreal_cli

pytestmark = pytest.mark.timeout(180)


def test_help_documents_population(tmp_path):
    result = surreal_cli(["launch", "--help"], tmp_path, tmp_path / "home")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "--population N" in text and "Population-based training" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--population", "0"], "needs N >= 2 members, got 0"),
        (["--population", "-3"], "needs N >= 2 members, got -3"),
        (["--population", "1"], "needs N >= 2 members, got 1"),
        (["--set", "pbt.interval=100"], "pbt.* settings need --population N"),
        (["--population", "2", "--set", "pbt.fraction=0.9"], "pbt.fraction must be in (0, 0.5]"),
        (["--population", "2", "--set", "pbt.space=algo.lrr:0:1"], "no setting 'algo.lrr'"),
    ],
)
def test_bad_population_input_is_a_one_line_usage_error(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["launch", "ppo", "--env", "gym:CartPole-v1", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_dry_run_shows_every_members_processes_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--population", "3"]
    result = CliRunner().invoke(main, [*args, "--set", "pbt.interval=777", "--dry-run"])
    assert result.exit_code == 0, result.output
    for m in ("m0", "m1", "m2"):
        for role in ("learner", "buffer", "param-server", "evaluator", "metrics", "actor-0"):
            assert f"name: {m}-{role}" in result.output
    assert "name: population-manager" in result.output and '"interval": 777' in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_population_folder_resumes_as_a_population(tmp_path, monkeypatch):
    """What `--resume RUN` of a population plans: every member from its own folder (its current
    hyperparameters), the saved pbt.json with new pbt.* values, --steps for every member."""
    from surreal.launch import experiment as launching
    from surreal.pbt import create_population, make_config, plan_population

    monkeypatch.chdir(tmp_path)
    base = launching.plan("ppo", env="gym:CartPole-v1", actors=1, name="pop", trial="t1")
    create_population(plan_population(base, make_config(2, ("pbt.init=1:algo.lr=1e-6",))))
    run = tmp_path / "runs" / "pop" / "t1"
    assert json.loads((run / "m1" / "config.json").read_text())["algo"]["lr"] == 1e-6
    assert json.loads((run / "m1" / "member.json").read_text())["name"] == "m1"
    result = CliRunner().invoke(
        main,
        [
            "launch",
            "--resume",
            str(run),
            "--steps",
            "999",
            "--set",
            "pbt.interval=555",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "name: m1-learner" in result.output and '"interval": 555' in result.output
    bad = CliRunner().invoke(main, ["launch", "--resume", str(run), "--population", "3"])
    assert bad.exit_code == 2 and "a population of 2; drop --population 3" in bad.output

    status = CliRunner().invoke(main, ["status", str(run)])
    assert status.exit_code == 0, status.output
    assert "2 members" in status.output and "algo.lr" in status.output
    assert status.output.count("1e-06") == 1  # m1's learning rate in the table
