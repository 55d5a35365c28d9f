"""Issue 50 items 2 and 3 on real runs (CartPole PPO, local backend): a learner killed with
`kill -9` comes back by itself from its checkpoint and the run finishes; a stopped parameter
server is named by the launcher, and with a short `run.stall_timeout_s` the run ends `failed`
with that reason and the `--resume` hint instead of hanging.

The chaos run that kills the learner too (every 5 s) is in `test_chaos_learner.py`.
"""

from __future__ import annotations

import os
import re
import signal

import pytest
import torch

from surreal.launch.evaluate import run_status
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    describe,
    metric_records,
    resumed_steps,
    start_launch,
    status,
    wait_until,
)


def waits(run) -> dict:
    """The waits the run's processes reported (`status.json`'s `waits`)."""
    return status(run).get("waits") or {}


def checkpoint_step(path) -> int:
    """The step of the checkpoint at `path` (whole: it is renamed into place)."""
    return int(torch.load(path, weights_only=False)["counters"]["global_step"])


def _launch(tmp_path, name: str, steps: int, *settings: str):
    home = tmp_path / "home"
    proc = start_launch(
        ["ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", str(steps)]
        + ["--name", name, "--trial", "a", "--set", "run.checkpoint_every=2", *QUICK, *settings],
        tmp_path,
        home,
    )
    return home, tmp_path / "runs" / name / "a", proc


# How each end shows in the learner's log and in the launcher's `restarts` field. A SIGTERM from
# outside (a drained or preempted node, `kill`) used to make the learner exit 0: the run then
# ended as if its budget were used, at whatever step it stood (on kube: its Job completed).
KILLS = {
    "kill -9": (signal.SIGKILL, "signal 9", "killed by SIGKILL"),
    "SIGTERM": (signal.SIGTERM, "exit code 143 (SIGTERM)", "stopped by SIGTERM, exit code 143"),
}


@pytest.mark.timeout(600)
@pytest.mark.integration
@pytest.mark.parametrize("kill", list(KILLS))
def test_a_learner_killed_from_outside_comes_back_from_its_checkpoint_and_the_run_finishes(
    tmp_path, kill
):
    sig, mark, said = KILLS[kill]
    steps = 60_000
    name = "back" if sig == signal.SIGKILL else "term"
    home, run, proc = _launch(tmp_path, name, steps)
    latest = run / "checkpoints" / "latest.pt"
    per_iteration = 2 * 16 * 4  # QUICK: one segment of 16 steps x 4 envs per actor
    try:
        wait_until(
            lambda: latest.is_file() and status(run).get("global_step", 0) > 0,
            180,
            "a checkpoint",
            proc,
        )
        before = checkpoint_step(latest)
        os.kill(describe(home, f"{name}-a").process("learner").pid, sig)
        out, _ = proc.communicate(timeout=scaled(480))  # a guard: the run ends by itself
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert status(run)["global_step"] >= steps
    assert describe(home, f"{name}-a").process("learner").restarts == 1
    log = (run / "logs" / "learner.log").read_text()
    assert f"--- restarted after {mark} (attempt 2) ---" in log, log[-3000:]
    assert "(0/3 crashes in 600s)" in log, "a kill from outside is not a crash"
    after_kill = log.split(f"restarted after {mark}", 1)[1]
    (resumed,) = resumed_steps(after_kill)
    # the checkpoint the killed learner wrote last: the one read before the kill, or at most
    # one more (a checkpoint every 2 iterations; on SIGTERM also the one it writes as it
    # stops), never a restart from scratch
    assert before <= resumed <= before + 2 * 2 * per_iteration, (before, resumed)
    assert "publishing from version" in after_kill and "parameter server holds" in after_kill
    assert f"restarts learner 1 ({said})" in out, out[-3000:]
    assert "finished (budget used)" in run_status(run), "it used its budget after all"
    last: dict[str, int] = {}  # metrics.jsonl went back to the resumed step: never backwards
    for row in metric_records(run):
        assert row["step"] >= last.get(row["name"], 0), row
        last[row["name"]] = row["step"]


@pytest.mark.timeout(600)
@pytest.mark.integration
def test_a_stopped_parameter_server_is_named_and_the_stalled_run_ends_failed_with_the_hint(
    tmp_path, monkeypatch
):
    # 35 s on the reference machine: room for the actors' wait to reach status.json first
    stall = f"run.stall_timeout_s={scaled(35):.0f}"
    home, run, proc = _launch(tmp_path, "stall", 10_000_000, "--set", stall)
    latest = run / "checkpoints" / "latest.pt"
    stopped = None
    try:
        wait_until(
            lambda: latest.is_file() and status(run).get("global_step", 0) > 0,
            180,
            "a checkpoint",
            proc,
        )
        stopped = describe(home, "stall-a").process("param-server").pid
        os.kill(stopped, signal.SIGSTOP)
        wait_until(
            lambda: any(w.get("for") == "param-server" for w in waits(run).values()),
            240,
            "the actors' wait in status.json",
            proc,
        )
        monkeypatch.setenv("SYMPHONY_HOME", str(home))
        shown = run_status(run)  # `surreal status RUN` (in this process: quick)
        out, _ = proc.communicate(timeout=scaled(480))  # a guard: the stall timeout ends the run
    finally:
        if stopped is not None:
            try:
                os.kill(stopped, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out
    assert re.search(r"waiting for param-server: no answer for \d+ s \(actor-", out), out[-3000:]
    (ended,) = [line for line in out.splitlines() if "made no progress for" in line]
    assert stall in ended and "waiting for param-server" in ended, ended
    assert "surreal launch --resume runs/stall/a" in ended, ended
    assert "Traceback" not in out, out[-3000:]
    assert "waiting    for param-server: no answer for" in shown, shown
    assert checkpoint_step(latest) > 0  # nothing lost: --resume continues from it
    actor_log = (run / "logs" / "actor-0.log").read_text()
    assert "waiting for param-server: no answer for" in actor_log, actor_log[-2000:]


def test_a_restarted_ddpg_learner_counts_only_what_the_living_shards_add_after_its_start():
    from surreal.algos.ddpg.learner_loop import StepCounter

    steps = StepCounter(start=1_000, restarted=True)  # its checkpoint's step counts shard 0's 900
    assert steps.update(0, 900, boot=7) == 1_000
    assert steps.update(0, 950, boot=7) == 1_050
    assert steps.update(0, 940, boot=7) == 1_050  # a late reply
    assert StepCounter(start=1_000).update(0, 900, boot=7) == 1_900  # shards new at a --resume
