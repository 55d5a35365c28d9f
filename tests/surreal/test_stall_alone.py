"""A run that stands still ends with no launcher watching it: the learner's own stall watch.

Before, only `surreal launch` applied `run.stall_timeout_s`: a kube run (always detached), or a
slurm or local run whose launcher died, stood still for good when its learner starved (helpers
failed past their restarts) or hung, and held its machines until `symphony delete`.
"""

import os
import signal
import threading
from types import SimpleNamespace

import pytest

from surreal.runtime.processes import stall_watch
from surreal.runtime.runfolder.rundir import RunDir
from surreal.testing import surreal_cli
from symphony.records import Records
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    describe,
    launch_unwatched,
    process_log,
    processes_of,
    status,
    wait_until,
)


class _Learner:
    """What the watch reads of the learner's Component; its `_end` is recorded, not run (it
    would stop this test's own process)."""

    def __init__(self, run_path, timeout_s: float):
        self.config = SimpleNamespace(run=SimpleNamespace(stall_timeout_s=timeout_s))
        self.run = RunDir(run_path)
        self.stopping = threading.Event()
        self.step = 0


@pytest.fixture
def quick_checks(monkeypatch):
    monkeypatch.setattr(stall_watch, "CHECK_S", 0.01)
    monkeypatch.setattr(stall_watch, "GRACE_S", 0.0)
    ended = threading.Event()
    monkeypatch.setattr(stall_watch.StallWatch, "_end", lambda self, quiet, step: ended.set())
    return ended


def test_the_watch_arms_only_once_the_step_moved(tmp_path, quick_checks):
    learner = _Learner(tmp_path, timeout_s=0.05)
    watch = stall_watch.StallWatch(learner, lambda: learner.step)
    try:
        # waiting for its first batch (a cluster pulling images, adding nodes): never ended
        assert not quick_checks.wait(0.5)
        learner.step = 64  # it learned once: from here a step that stays put ends it
        assert quick_checks.wait(10)
    finally:
        learner.stopping.set()
        watch.thread.join(5)


def test_a_learner_a_stall_ended_before_is_armed_from_its_start(tmp_path, quick_checks):
    mark = tmp_path / "monitoring" / "starts" / stall_watch.MARK
    mark.parent.mkdir(parents=True)
    mark.write_text("stalled\n")  # kube started it again (no final_codes there)
    learner = _Learner(tmp_path, timeout_s=0.05)
    watch = stall_watch.StallWatch(learner, lambda: 0)
    try:
        assert quick_checks.wait(10), "it starved again: ended without a step"
    finally:
        learner.stopping.set()
        watch.thread.join(5)


def test_no_watch_with_a_stall_timeout_of_0(tmp_path, quick_checks):
    assert stall_watch.StallWatch(_Learner(tmp_path, timeout_s=0), lambda: 0).thread is None


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_starved_run_whose_launcher_was_killed_ends_failed_by_itself(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "stuck" / "a"
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "10000000"]
    sets = ["--set", "run.stall_timeout_s=5", "--name", "stuck", "--trial", "a", *QUICK]
    # nobody watches the run from its start (the launcher's own watch, 5 s, would end it while
    # the learner waits for its first batch)
    launch_unwatched([*args, *sets], tmp_path, home, run)
    wait_until(lambda: status(run).get("global_step", 0) > 0, 180, "first learner step")
    # the actors wait for a parameter server that answers nothing: the learner starves
    frozen = describe(home, "stuck-a").process("param-server").pid
    os.kill(frozen, signal.SIGSTOP)
    try:
        wait_until(
            lambda: Records(home).load("stuck-a").outcome,
            scaled(300),
            "the learner's watch to end the run",
        )
    finally:
        try:
            os.kill(frozen, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert Records(home).load("stuck-a").outcome == "failed"
    learner = describe(home, "stuck-a").process("learner")
    assert learner.exit_code == stall_watch.STALLED_EXIT and learner.restarts == 0
    wait_until(lambda: not processes_of(run), 60, "every process to end")
    said = surreal_cli(["status", str(run)], tmp_path, home)
    assert "state      failed (the learner's step stayed at " in said.stdout, said.stdout
    assert "(run.stall_timeout_s=5 + 60 s)" in said.stdout, said.stdout
    logs = process_log(home, "stuck-a", "learner")
    assert "ending the learner (exit 75, not restarted)" in logs, logs[-2000:]
    assert f"surreal launch --resume {run}" in logs
    assert (run / "checkpoints" / "latest.pt").is_file(), "its checkpoint stays for --resume"
