"""A run's logs keep every attempt (issue 50, item 4): a process the supervisor restarted and a
run launched again with `--resume` append to RUN/logs/P.log and to symphony's record of it, each
new attempt opened by one marking line; nothing of an earlier attempt is lost or repeated."""

import os
import signal

import pytest
import torch

from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    ctrl_c,
    describe,
    own_lines,
    processes_of,
    shown_log,
    start_launch,
    status,
    symphony_cli,
    wait_until,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration]

ARGS = ["ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "20000", *QUICK]


def _starts(text: str, process: str) -> list[int]:
    """The line numbers of `process`'s start lines in a log's `text`."""
    lines = text.splitlines()
    return [i for i, line in enumerate(lines) if f" {process}: start: " in line]


def test_a_killed_actor_s_log_keeps_both_attempts_and_marks_the_restart(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "kill9" / "a"
    proc = start_launch([*ARGS, "--name", "kill9", "--trial", "a"], tmp_path, home)
    try:
        first = wait_until(lambda: shown_log(home, "kill9-a"), 120, "actor-0's lines", proc)
        actor = describe(home, "kill9-a").process("actor-0")
        os.kill(actor.pid, signal.SIGKILL)
        wait_until(
            lambda: (
                len(_starts(symphony_cli(home, "logs", "kill9-a", "actor-0").stdout, "actor-0"))
                == 2
            ),
            60,
            "actor-0's second start line",
            proc,
        )
        ctrl_c(proc)
        proc.wait(timeout=scaled(180))
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(lambda: not processes_of(run), 30, "every process to end")
    kept = (run / "logs" / "actor-0.log").read_text()
    shown = symphony_cli(home, "logs", "kill9-a", "actor-0")
    assert shown.returncode == 0 and shown.stdout == kept  # the record's log, copied whole
    lines = kept.splitlines()
    mark = lines.index("--- restarted after signal 9 (attempt 2) ---")
    assert lines.count(lines[mark]) == 1
    one, two = _starts(kept, "actor-0")
    assert one < mark < two, kept  # the first attempt's lines, the mark, then the second's
    assert own_lines(kept, "actor-0")[: len(first)] == first  # what it wrote before the kill
    assert "stop: stopped (surreal launch was interrupted)" in own_lines(kept, "actor-0")[-1]


def _sigkill(proc):
    """The launcher killed outright: it keeps no log (its supervisor dies with it and the
    processes stop themselves); only symphony's record has the first launch's lines."""
    os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("stop", [ctrl_c, _sigkill], ids=["ctrl-c", "launcher-kill-9"])
def test_a_resumed_run_s_learner_log_keeps_the_first_launch_and_marks_the_resume(tmp_path, stop):
    home, run = tmp_path / "home", tmp_path / "runs" / "again" / "a"
    ckpt = run / "checkpoints" / "latest.pt"
    proc = start_launch([*ARGS, "--name", "again", "--trial", "a"], tmp_path, home)
    try:
        wait_until(
            lambda: ckpt.is_file() and status(run).get("global_step", 0) > 0, 120, "a step", proc
        )
        stop(proc)  # the learner writes its checkpoint as it stops
        proc.wait(timeout=scaled(180))
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(lambda: not processes_of(run), 60, "every process to end")
    first = (home / "experiments" / "again-a" / "logs" / "learner.log").read_text()
    if stop is ctrl_c:  # the launcher copied it into the run's folder as it ended
        assert (run / "logs" / "learner.log").read_text() == first
    assert len(_starts(first, "learner")) == 1 and "learner: stop: " in first, first
    step = torch.load(ckpt, weights_only=False)["counters"]["global_step"]

    args = ["launch", "--resume", str(run), "--steps", str(step + 1000)]
    resumed = surreal_cli(args, tmp_path, home)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    log = (run / "logs" / "learner.log").read_text()
    assert log.startswith(first), log  # the first launch's lines, once, in order
    rest = log[len(first) :].splitlines()
    assert rest[0] == f"--- resumed at step {step:,} ---", rest[:3]
    assert len(_starts(log, "learner")) == 2 and "resumed from" in log[len(first) :]
    assert "learner: stop: finished" in own_lines(log, "learner")[-1]
    shown = symphony_cli(home, "logs", "again-a", "learner")  # the record keeps both launches
    assert shown.returncode == 0 and shown.stdout == log
