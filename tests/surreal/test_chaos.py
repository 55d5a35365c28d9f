"""Chaos: kill -9 of a random non-learner process every 2.5 s for a minute; the run still
finishes (rc 0) and learns CartPole (eval >= 475).

Slow (a real run, several minutes here). Every helper (actors, buffer, parameter server,
evaluator, metrics sink) dies several times; each comes back under the restart policy, actors wait
out the parameter server, and the learner never stands still for good.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.surreal.helpers import describe, metric_records, start_launch, status, wait_until
from tests.surreal.test_hostile_peers import SETTINGS, sample_steps

CHAOS_S, EVERY_S = 60.0, 2.5  # 24 kills: each of the 8 helpers dies ~3 times
# A step budget that keeps the run going past the chaos on this machine (the learner does a few
# thousand steps per second here, fewer while its helpers keep dying).
STEPS = 300_000


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_killing_random_helpers_for_a_minute_does_not_stop_a_run_from_learning(tmp_path):
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
            str(STEPS),
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
        while time.monotonic() - started < CHAOS_S and proc.poll() is None:
            if time.monotonic() >= next_kill:  # a paced kill loop, not a synchronization
                victims = [
                    p
                    for p in describe(home, "chaos-a").processes
                    if p.name != "learner" and p.state == "running" and p.pid
                ]
                victim = rng.choice(victims)
                try:
                    os.kill(victim.pid, signal.SIGKILL)
                    killed.append(victim.name)
                except ProcessLookupError:
                    pass
                next_kill += EVERY_S
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
    assert chaos_s >= CHAOS_S, f"the run ended after {chaos_s:.0f} s of chaos; raise STEPS"
    assert len(killed) >= CHAOS_S / EVERY_S - 2
    assert status(run)["global_step"] >= STEPS > step_after_chaos
    evals = [r["value"] for r in metric_records(run) if r["name"] == "charts/eval_return"]
    assert max(evals) >= 475, f"evaluation never reached 475: {evals[-10:]}"
