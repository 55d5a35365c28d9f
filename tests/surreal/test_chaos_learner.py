"""Chaos that includes the learner (issue 50 item 3): `kill -9` every 5 s (or every 34k steps of
the run's progress, whichever comes first), every second kill the learner's, the others a random
helper's, on a CartPole PPO run; the run still reaches its step budget (rc 0), each restarted
learner resumed at a checkpoint no older than the one it had written before the kill, and the work
lost per learner kill is bounded by `run.checkpoint_every`.

Slow (a real run under kills, ~1-2 minutes here). `test_chaos.py` kills only the helpers, for
longer, and checks that the run still learns.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from symphony.testing import FairClock
from tests.surreal.helpers import QUICK, describe, start_launch, status, wait_until
from tests.surreal.test_hostile_peers import sample_steps
from tests.surreal.test_learner_restart import checkpoint_step, resumed_steps

ACTORS, CHECKPOINT_EVERY, STEPS = 4, 5, 400_000
PER_ITERATION = ACTORS * 16 * 4  # QUICK: one segment of 16 steps x 4 envs per actor
CHAOS_S, EVERY_S = 45.0, 5.0
STEP_GAP = 0.85 * STEPS / 10
"""A kill is also due once the run moved this many steps since the last one: on a machine so
loaded that a fair share's 5 s take a minute of wall time, the run (many processes) still moves
on, and the kills by time alone were too few for the run to see 3 of the learner's (the CI of
3ee4b9f: 2 in the run's 3.5 minutes)."""


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(1200)
def test_killing_the_learner_and_helpers_every_5_s_the_run_reaches_its_budget(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "chaosl" / "a"
    latest = run / "checkpoints" / "latest.pt"
    rng = random.Random(50)
    proc = start_launch(
        ["ppo", "--env", "gym:CartPole-v1", "--actors", str(ACTORS), "--steps", str(STEPS)]
        + ["--name", "chaosl", "--trial", "a", *QUICK]
        + ["--set", f"run.checkpoint_every={CHECKPOINT_EVERY}", "--set", "eval.every_s=5"],
        tmp_path,
        home,
    )
    killed: list[str] = []
    learner_kills: list[tuple[int, int]] = []  # (checkpoint step, run step) just before each
    try:
        wait_until(lambda: latest.is_file(), 180, "the first checkpoint", proc)
        started, next_kill, killed_at = time.monotonic(), 0.0, 0
        # the chaos lasts CHAOS_S and kills every EVERY_S, both in seconds of a fair share of the
        # reference machine (FairClock), so a slower or loaded machine gets as many kills per step
        clock = FairClock(CHAOS_S)
        while not clock.expired() and proc.poll() is None:
            step = status(run).get("global_step", 0)
            if step >= 0.85 * STEPS:
                # no kills in the last stretch: a process killed as the run reaches its budget is
                # never restarted (the run ends first), and no kill would then be its restart
                break
            # a paced kill loop, not a synchronization: by time, or by the run's progress
            if clock.fair >= next_kill or step - killed_at >= STEP_GAP:
                running = [p for p in describe(home, "chaosl-a").processes if p.state == "running"]
                # the learner is killed once it has resumed since its last kill: a kill while it
                # still starts (imports, loads its checkpoint) would leave no resume to check
                up = len(resumed_steps(live_log(home))) == killed.count("learner")
                learner = [p for p in running if p.name == "learner" and p.pid and up]
                helpers = [p for p in running if p.name != "learner" and p.pid]
                if len(killed) % 2 == 0 and learner:
                    victim = learner[0]
                    learner_kills.append((checkpoint_step(latest), status(run)["global_step"]))
                elif len(killed) % 2 == 1 and helpers:
                    victim = rng.choice(helpers)
                else:
                    victim = None  # the learner's turn while it starts: the next poll tries again
                if victim is not None:
                    try:
                        os.kill(victim.pid, signal.SIGKILL)
                        killed.append(victim.name)
                    except ProcessLookupError:
                        pass
                    next_kill, killed_at = next_kill + EVERY_S, step
            time.sleep(0.2)
        chaos_s = time.monotonic() - started
        sample_steps(proc, run)  # until the run ends by itself
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"\nchaos: {len(killed)} kills in {chaos_s:.0f} s: {killed}")
    assert proc.returncode == 0, out
    assert status(run)["global_step"] >= STEPS
    assert killed.count("learner") >= 3, f"the run ended after {chaos_s:.0f} s; raise STEPS"
    # every kill counted once as a restart (a kill never uses up the restart limit)
    restarts = {p.name: p.restarts for p in describe(home, "chaosl-a").processes}
    assert sum(restarts.values()) == len(killed), (restarts, killed)
    assert restarts["learner"] == killed.count("learner")
    resumed = resumed_steps((run / "logs" / "learner.log").read_text())
    assert len(resumed) == killed.count("learner"), resumed
    for (saved, reached), back in zip(learner_kills, resumed, strict=True):
        assert back >= saved, f"resumed at {back}, behind the checkpoint {saved} it had"
        lost = reached - back
        assert lost <= (CHECKPOINT_EVERY + 1) * PER_ITERATION, (reached, back)
    assert resumed[-1] > resumed[0], resumed  # resumes move on with the run


def live_log(home) -> str:
    """The learner's log while the run goes on, as symphony keeps it (every start appends)."""
    path = home / "experiments" / "chaosl-a" / "logs" / "learner.log"
    return path.read_text() if path.is_file() else ""
