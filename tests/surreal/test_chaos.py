"""Chaos: kill -9 of a random non-learner process every 2.5 s for a minute or every 5 s for 3
minutes (both `make test-long`); the run still finishes (rc 0) and learns CartPole.

Slow (a real run, several minutes here). Every helper (actors, buffer, parameter server,
evaluator, metrics sink) dies several times; each comes back under the restart policy (a kill
from outside never uses up its restarts), actors wait out the parameter server, and the learner
never stands still for good. Every kill is one restart in symphony's record, and the progress
line says how the processes died.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.surreal.helpers import describe, metric_records, start_launch, status, wait_until
from tests.surreal.test_hostile_peers import SETTINGS, sample_steps

# (chaos seconds, seconds between kills, step budget, eval goal). The budget keeps the run
# going past the chaos on this machine (the learner does a few thousand steps per second here,
# fewer while its helpers keep dying). A minute: 24 kills, each of the 8 helpers dies ~3 times;
# three minutes: 36 kills, as the issue that asked for it measures (eval >= 400). These settings
# run ~14k steps/s on a quiet machine, kills included: 1.2M steps ended after 88 s of chaos (and
# 300k within the minute under CI's load, once actors no longer polled for parameters).
MINUTE = (60.0, 2.5, 1_500_000, 475.0)
THREE_MINUTES = (180.0, 5.0, 3_200_000, 400.0)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    ("chaos", "every", "steps", "goal"),
    # both `make test-long` (CONTRIBUTING.md): in `make test`, test_chaos_learner kills random
    # helpers and the learner every 5 s, and test_chaos_offpolicy replay shards and parameter
    # servers, on runs that must reach their budget (and learn, off-policy)
    [
        pytest.param(*MINUTE, marks=pytest.mark.long),
        pytest.param(*THREE_MINUTES, marks=pytest.mark.long),
    ],
    ids=["a-minute", "three-minutes"],
)
def test_killing_random_helpers_does_not_stop_a_run_from_learning(
    tmp_path, chaos, every, steps, goal
):
    home, run = tmp_path / "home", tmp_path / "runs" / "chaos" / "a"
    rng = random.Random(25)
    proc = start_launch(
        [
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "4",
            "--steps",
            str(steps),
            "--name",
            "chaos",
            "--trial",
            "a",
            *SETTINGS,
        ],
        tmp_path,
        home,
    )
    killed: list[str] = []
    try:
        wait_until(lambda: status(run).get("global_step", 0) > 0, 180, "first learner step", proc)
        started = next_kill = time.monotonic()
        while time.monotonic() - started < chaos and proc.poll() is None:
            if time.monotonic() >= next_kill:  # a paced kill loop, not a synchronization
                victims = [
                    p
                    for p in describe(home, "chaos-a").processes
                    if p.name != "learner" and p.state == "running" and p.pid
                ]
                if not victims:  # the run is ending (its budget used): nothing left to kill
                    break
                victim = rng.choice(victims)
                try:
                    os.kill(victim.pid, signal.SIGKILL)
                    killed.append(victim.name)
                except ProcessLookupError:
                    pass
                next_kill += every
            time.sleep(0.2)
        chaos_s = time.monotonic() - started
        step_after_chaos = status(run).get("global_step", 0)
        sample_steps(proc, run)  # until the run ends by itself
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"\nchaos: {len(killed)} kills in {chaos_s:.0f} s: {sorted(set(killed))}")
    assert proc.returncode == 0, out
    assert chaos_s >= chaos, f"the run ended after {chaos_s:.0f} s of chaos; raise steps"
    assert len(killed) >= chaos / every - 2
    assert status(run)["global_step"] >= steps > step_after_chaos
    evals = [r["value"] for r in metric_records(run) if r["name"] == "charts/eval_return"]
    assert max(evals) >= goal, f"evaluation never reached {goal}: {evals[-10:]}"
    # every kill counted once, none past a limit, and the progress line said how they died
    restarts = {p.name: p.restarts for p in describe(home, "chaos-a").processes}
    assert sum(restarts.values()) == len(killed), (restarts, sorted(killed))
    assert all(restarts[name] == killed.count(name) for name in restarts), restarts
    assert "(killed by SIGKILL)" in out, out[-3000:]
