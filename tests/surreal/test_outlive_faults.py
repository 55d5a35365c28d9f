"""A run outlives its launcher, and a dead supervisor leaves a checkpoint and nothing else;
one run folder takes one launch.

`surreal launch` watches a run whose processes live under a supervisor daemon. Killed with
SIGKILL, the launcher takes nothing with it: the run goes on, ends at its budget by itself (the
learner's end is the experiment's end) and `surreal status -f` follows it there. A supervisor
killed with SIGKILL sends each process it started SIGTERM (their death signal), so the learner
writes its checkpoint, every process ends and frees its shared memory, and `--resume` goes on
from that checkpoint.
"""

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from surreal.testing import surreal_cli
from symphony.records import Records
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    describe,
    env_for,
    processes_of,
    run_segments,
    start_launch,
    status,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _launch(tmp_path, name: str, steps: int):
    home, run = tmp_path / "home", tmp_path / "runs" / name / "a"
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", str(steps)]
    proc = start_launch([*args, "--name", name, "--trial", "a", *QUICK], tmp_path, home)
    return home, run, proc


def _error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def _snapshot(run) -> dict[str, float]:
    """What a launch writes before it starts anything: config, run record, spec, monitoring."""
    files = [run / "config.json", run / "run.json", run / "experiment.yaml"]
    files += sorted((run / "monitoring").rglob("*"))
    return {str(f): f.stat().st_mtime_ns for f in files}


def test_a_killed_launcher_leaves_the_run_going_to_its_budget_and_status_follow_sees_it(
    tmp_path,
):
    home, run, proc = _launch(tmp_path, "orphan", 40_000)
    try:
        wait_until(lambda: status(run).get("global_step", 0) > 0, 120, "first learner step", proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    at_kill = status(run)["global_step"]
    wait_until(
        lambda: status(run).get("global_step", 0) > at_kill, 30, "the run to go on without it"
    )
    # the learner is held (SIGSTOP) while the checks below run, so a fast machine cannot finish
    # the budget before `status -f` has seen the run alive; it goes on once status -f has
    learner = next(p for p in describe(home, "orphan-a").processes if p.name == "learner")
    os.kill(learner.pid, signal.SIGSTOP)
    try:
        # one run folder, one launch: the run still runs (under its supervisor), so launching
        # it again is refused in one line before anything of it is rewritten
        before = _snapshot(run)
        args = ["ppo", "--env", "gym:CartPole-v1", "--name", "orphan", "--trial", "a"]
        again = surreal_cli(["launch", *args], tmp_path, home)
        resumed = surreal_cli(["launch", "--resume", str(run)], tmp_path, home)
        for result, says in ((again, "exists"), (resumed, "the run is still running")):
            assert result.returncode == 2, result.stdout + result.stderr
            assert len(_error_lines(result)) == 1 and says in _error_lines(result)[0], result.stderr
        assert "surreal status -f" in _error_lines(resumed)[0]
        assert _snapshot(run) == before
        follow = subprocess.Popen(
            [sys.executable, "-m", "surreal", "status", "-f", str(run)],
            cwd=tmp_path,
            env=env_for(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        seen = []
        for line in follow.stdout:  # its summary first, whose processes line shows them alive
            seen.append(line)
            if line.lstrip().startswith("processes"):
                break
    finally:
        os.kill(learner.pid, signal.SIGCONT)
    try:
        rest, _ = follow.communicate(timeout=scaled(300))
    finally:
        if follow.poll() is None:
            follow.kill()
    out = "".join(seen) + rest
    assert follow.returncode == 0, out
    assert "learner=running" in out, out
    assert "the run ended: finished" in out, out
    assert status(run)["global_step"] >= 40_000
    # nobody stopped it: the supervisor ended the experiment when the learner ended
    wait_until(lambda: not processes_of(run), 30, "every process to end")
    # the supervisor records the outcome after it stopped the others (it outlives them)
    wait_until(lambda: Records(home).load("orphan-a").outcome, 30, "the supervisor's record")
    assert Records(home).load("orphan-a").outcome == "finished"
    assert (
        "ends the experiment"
        in (home / "experiments" / "orphan-a" / "logs" / "learner.log").read_text()
    )
    ended = surreal_cli(["status", "-f", str(run)], tmp_path, home)
    assert ended.returncode == 0 and "not running (finished)" in ended.stdout, ended.stdout
    # a launch holds the folder's lock (flock) while it writes and runs it
    with open(run / ".launch.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = surreal_cli(["launch", "--resume", str(run), "--steps", "1"], tmp_path, home)
    assert busy.returncode == 2 and "is being launched or run by another" in busy.stderr


def test_a_killed_supervisor_stops_every_process_after_a_checkpoint_and_resume_continues(
    tmp_path,
):
    home, run, proc = _launch(tmp_path, "nosup", 10_000_000)
    ckpt = run / "checkpoints" / "latest.pt"
    try:
        wait_until(
            lambda: ckpt.is_file() and status(run).get("global_step", 0) > 0, 120, "a step", proc
        )
        described = describe(home, "nosup-a")
        supervisor = described.details["supervisor_pid"]
        pids = {p.pid for p in described.processes if p.pid} | {supervisor}
        assert run_segments(pids), "the run holds no shared memory: nothing to check below"
        killed_at = time.time()
        os.kill(supervisor, signal.SIGKILL)
        out, _ = proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out
    assert f"the run's supervisor (pid {supervisor}) died" in out, out
    assert f"surreal launch --resume {run}" in out or "surreal launch --resume runs/nosup/a" in out
    wait_until(lambda: not processes_of(run), 30, "every process to end")
    wait_until(lambda: not run_segments(pids), 30, "the run's shared memory to be freed")
    learner_log = (run / "logs" / "learner.log").read_text()
    assert f"the supervisor (pid {supervisor}) is gone: stopping" in learner_log, learner_log
    saved = torch.load(ckpt, weights_only=False)
    assert saved["time"] >= killed_at, "the last checkpoint was not written after the death"
    step = saved["counters"]["global_step"]
    resumed = surreal_cli(
        ["launch", "--resume", str(run), "--steps", str(step + 2000)], tmp_path, home
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = torch.load(ckpt, weights_only=False)
    assert after["counters"]["global_step"] >= step + 2000
    assert after["counters"]["iterations"] > saved["counters"]["iterations"]
