"""Reliability: a killed actor comes back, a killed learner resumes, Ctrl-C leaves nothing."""

import os
import signal

import pytest
import torch

from surreal.testing import surreal_cli
from symphony.records import Records
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    ctrl_c,
    describe,
    listed_status,
    processes_of,
    run_segments,
    shm_segments,
    shown_log,
    start_launch,
    status,
    wait_until,
)

pytestmark = pytest.mark.timeout(600)


def starts(lines: list[str]) -> int:
    """How many times a process started, by its log's lines."""
    return sum(": start: " in line for line in lines)


@pytest.mark.integration
def test_killed_actor_restarts_and_ctrl_c_leaves_no_process_or_shm(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "rel" / "a"
    shm_before = shm_segments()
    proc = start_launch(
        [
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "2",
            "--steps",
            "10000000",
            "--name",
            "rel",
            "--trial",
            "a",
            *QUICK,
        ],
        tmp_path,
        home,
    )
    try:
        wait_until(lambda: status(run).get("global_step", 0) > 0, 120, "first learner step", proc)
        # what actor-0 wrote so far, while it runs (its start line and more)
        live = wait_until(lambda: shown_log(home, "rel-a"), 60, "actor-0's log lines", proc)
        actor = describe(home, "rel-a").process("actor-0")
        os.kill(actor.pid, signal.SIGKILL)
        wait_until(
            lambda: (lambda a: a.restarts >= 1 and a.state == "running" and a.pid != actor.pid)(
                describe(home, "rel-a").process("actor-0")
            ),
            60,
            "actor-0 to restart",
            proc,
        )
        wait_until(
            lambda: starts(shown_log(home, "rel-a")) == 2, 60, "actor-0's second start line", proc
        )
        after_kill = status(run)["global_step"]
        # training goes on, and the restarted actor contributes again
        wait_until(
            lambda: status(run).get("global_step", 0) > after_kill + 2000,
            120,
            "training to continue",
            proc,
        )
        assert describe(home, "rel-a").process("learner").state == "running"
        running = processes_of(run)
        assert running
        pids = {proc.pid, actor.pid} | {p.pid for p in running}
        assert run_segments(pids), "the run holds no shared memory: nothing for the check below"
        ctrl_c(proc)
        proc.wait(timeout=scaled(180))
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(lambda: not processes_of(run), 30, "every process to end")
    # /dev/shm is machine-wide and other tests' runs hold segments of their own for minutes: look
    # only at this run's (caraml names a segment after the pid that created it)
    wait_until(
        lambda: not (run_segments(pids) - shm_before), 30, "the run's shared memory to be freed"
    )
    # symphony keeps the interrupted run's record (`symphony list --all`, `symphony logs`)
    assert Records(home).load("rel-a").outcome == "stopped"
    assert listed_status(home, "rel-a") == "stopped"  # symphony's word for interrupted
    kept = shown_log(home, "rel-a")  # the lines of both of actor-0's lives
    assert kept[: len(live)] == live and starts(kept) == 2, kept
    assert (run / "checkpoints" / "latest.pt").is_file()  # written at exit


@pytest.mark.integration
def test_killed_learner_resumes_with_optimizer_state(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "kill" / "a"
    proc = start_launch(
        [
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "2",
            "--steps",
            "10000000",
            "--name",
            "kill",
            "--trial",
            "a",
            "--set",
            "run.checkpoint_every=2",
            "--set",
            "run.max_restarts=0",  # the learner is not restarted: its kill ends the run
            *QUICK,
        ],
        tmp_path,
        home,
    )
    try:
        ckpt = run / "checkpoints" / "latest.pt"
        wait_until(
            lambda: ckpt.is_file() and status(run).get("charts/sps"), 120, "a checkpoint", proc
        )
        learner = describe(home, "kill-a").process("learner")
        os.kill(learner.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=scaled(180))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert "surreal launch --resume runs/kill/a" in out, out
    wait_until(lambda: not processes_of(run), 30, "every process to end")
    saved = torch.load(ckpt, weights_only=False)
    step = saved["counters"]["global_step"]
    adam_steps = saved["learner"]["optimizer"]["state"][0]["step"]
    assert adam_steps > 0
    result = surreal_cli(
        ["launch", "--resume", str(run), "--steps", str(step + 2000)], tmp_path, home
    )
    assert result.returncode == 0, result.stdout + result.stderr
    resumed = torch.load(ckpt, weights_only=False)
    assert resumed["counters"]["global_step"] >= step + 2000
    assert resumed["learner"]["optimizer"]["state"][0]["step"] > adam_steps
    assert resumed["counters"]["iterations"] > saved["counters"]["iterations"]
    assert "resumed from" in (run / "logs" / "learner.log").read_text()
