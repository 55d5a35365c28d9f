"""A short real run through `surreal launch` on the local backend, then eval, status, resume."""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from surreal.monitoring.logs import PROGRESS_ENV
from surreal.testing import surreal_cli
from symphony.errors import SymphonyError
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    ctrl_c,
    describe,
    listed_status,
    metric_records,
    own_lines,
    shown_log,
    start_launch,
    wait_until,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("launch")
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "2",
            "--steps",
            "3000",
            "--name",
            "smoke",
            "--trial",
            "a",
            "--set",
            "run.checkpoint_every=2",
            *QUICK,
        ],
        root,
        root / "home",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root, root / "runs" / "smoke" / "a", result


def test_run_writes_config_metrics_tensorboard_and_checkpoint(finished_run):
    _, run, result = finished_run
    assert "steps/s" in result.stdout and "return" in result.stdout  # live progress
    config = json.loads((run / "config.json").read_text())
    assert config["run"]["actors"] == 2 and config["env"]["num_envs"] == 4
    records = metric_records(run)
    names = {r["name"] for r in records}
    for name in (
        "charts/episodic_return",
        "charts/sps",
        "losses/policy_loss",
        "losses/approx_kl",
        "losses/value_loss",
        "charts/eval_return",
    ):
        assert name in names, name
    assert all(isinstance(r["step"], int) for r in records)
    assert any((run / "tb").glob("events.out.tfevents.*"))
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert state["counters"]["global_step"] >= 3000
    assert "optimizer" in state["learner"] and "normalizer" in state["learner"]


def test_status_and_eval_read_the_run(finished_run):
    root, run, _ = finished_run
    status = surreal_cli(["status", str(run)], root, root / "home")
    assert status.returncode == 0, status.stderr
    assert "steps" in status.stdout and "not running" in status.stdout
    result = surreal_cli(["eval", str(run), "--episodes", "3"], root, root / "home")
    assert result.returncode == 0, result.stderr
    assert "3 episodes at step" in result.stdout


def test_eval_records_a_video(finished_run, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # as on a server: SDL would complain
    pytest.importorskip("imageio")
    pytest.importorskip("pygame")  # CartPole renders with pygame (gymnasium[classic-control])
    root, run, _ = finished_run
    video = root / "episode.gif"
    result = surreal_cli(
        ["eval", str(run), "--episodes", "1", "--video", str(video)], root, root / "home"
    )
    assert result.returncode == 0, result.stderr
    assert video.stat().st_size > 1000
    assert "XDG_RUNTIME_DIR" not in result.stderr + result.stdout  # no renderer noise
    assert result.stdout.splitlines()[-1] == f"video: {video}"


def test_resume_continues_the_global_step_and_optimizer(finished_run):
    root, run, _ = finished_run
    before = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    result = surreal_cli(["launch", "--resume", str(run), "--steps", "5000"], root, root / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    after = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert after["counters"]["global_step"] >= 5000
    assert after["counters"]["iterations"] > before["counters"]["iterations"]
    step = lambda s: s["learner"]["optimizer"]["state"][0]["step"]  # noqa: E731
    assert step(after) > step(before)
    learner_steps = [r["step"] for r in metric_records(run) if r["name"] == "losses/policy_loss"]
    assert learner_steps == sorted(learner_steps)  # the resumed run continues, never restarts at 0


def test_custom_learner_from_a_file(tmp_path):
    source = Path(__file__).resolve().parents[2] / "examples" / "02_custom_learner" / "a2c.py"
    example = tmp_path / "mine" / "a2c.py"
    example.parent.mkdir()
    example.write_text(source.read_text())
    result = surreal_cli(
        [
            "launch",
            f"{example}:A2C",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "1",
            "--steps",
            "2000",
            "--set",
            "eval.every_s=0",
            "--set",
            "env.num_envs=4",
            "--set",
            "actor.rollout_length=16",
        ],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").glob("*/t1")
    names = {r["name"] for r in metric_records(run)}
    assert "losses/policy_loss" in names and "charts/episodic_return" in names
    # The run keeps its own copy of the learner: editing (here: breaking) the original later
    # changes neither `surreal eval` nor `--resume` of this run.
    assert (run / "code" / "a2c.py").read_text() == source.read_text()
    example.write_text("raise RuntimeError('the file changed since the run')\n")
    home = tmp_path / "home"
    evaluated = surreal_cli(["eval", str(run), "--episodes", "2"], tmp_path, home)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "2 episodes at step" in evaluated.stdout
    resumed = surreal_cli(["launch", "--resume", str(run), "--dry-run"], tmp_path, home)
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.tmux
def test_same_run_on_the_tmux_backend(tmp_path, monkeypatch):
    """The run on a tmux server of its own; `symphony logs` shows actor-0's log while the run
    runs (its learner is held with SIGSTOP until then, so that a fast machine cannot use the
    budget first) and after it, and every process's log holds lines of its own."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (make system-deps)")
    socket = f"surreal-test-{os.getpid()}"
    monkeypatch.setenv("SYMPHONY_TMUX_SOCKET", socket)
    monkeypatch.setenv(PROGRESS_ENV, "0.5")  # a held run's processes say so at once
    home, run = tmp_path / "home", tmp_path / "runs" / "tm" / "a"
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "1000"]
    proc = start_launch(
        [*args, "--backend", "tmux", "--name", "tm", "--trial", "a", *QUICK], tmp_path, home
    )
    try:
        learner = wait_until(lambda: pid_of(home, "tm-a", "learner"), 120, "the learner", proc)
        os.kill(learner, signal.SIGSTOP)
        try:
            live = wait_until(lambda: shown_log(home, "tm-a"), 120, "actor-0's log lines", proc)
        finally:
            os.kill(learner, signal.SIGCONT)
        out, _ = proc.communicate(timeout=scaled(240))
    finally:
        if proc.poll() is None:
            ctrl_c(proc)
            proc.communicate(timeout=scaled(120))
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=20)
    assert proc.returncode == 0, out
    assert (run / "checkpoints" / "latest.pt").is_file()
    assert "losses/policy_loss" in {r["name"] for r in metric_records(run)}
    logs = {log.stem: log.read_text() for log in (run / "logs").glob("*.log")}
    assert set(logs) == {"metrics", "buffer", "learner", "param-server", "evaluator", "actor-0"}
    for process, text in logs.items():
        assert len(own_lines(text, process)) >= 3, text
    assert listed_status(home, "tm-a") == "finished"
    kept = shown_log(home, "tm-a")
    assert kept[: len(live)] == live and "actor-0: stop: " in kept[-1], kept


def pid_of(home, experiment: str, process: str) -> int | None:
    """The pid of a process of a launched experiment (None before it has one)."""
    try:
        return describe(home, experiment).process(process).pid
    except SymphonyError:  # no record yet
        return None
