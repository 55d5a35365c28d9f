"""Chaos on an off-policy run (issue 49 item 4): `surreal launch td3 --env gym:Pendulum-v1` with
a kill -9 every 1,200 env steps (every 5 s of a fair share of the machine until 2026-12-05) of
a replay shard or a parameter server (never the learner, nor the proxies) while it runs. The run
finishes its budget (rc 0) and learns; every kill is one restart in symphony's record.

The run has the defaults' one replay shard and one parameter server, the harshest case: each kill
takes away the only one. The learner waits while the shard is back (it reloads its last saved
part, or refills), publishing its parameters again every second meanwhile, so a parameter server
that restarted has them; the actors wait out a parameter server's restart. The learner
checkpoints every 10 s, so the shard saves its part that often and is killed mid-save now and
then. Issue 49 measured this run stuck at 4,416 of 30,000 steps after 30 kills (restarted
parameter servers never got parameters, and the actors waited for versions); with the fixes and
before the pacing bound, a shard's restart let the actors spend 4k steps of the budget in a
second (surreal.algos.ddpg.actor.Pacer).

Measured here (2026-12-04, 2 cores, load 0.5-4): `learns` 15 kills in 76 s, 8,448 steps, best
eval -99 (86 s in all; again: 14 kills in 71 s, -75); `solves` 48 kills in 241 s, 20,352 steps, best eval -100 (252 s).
With kills paced by a fair share of the machine (2026-12-05, load ~4: a HalfCheetah benchmark
beside it): `solves` 31 kills in 363 s, 20,352 steps, best eval -75 (385 s in all).
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time

import pytest

from symphony.testing import FairClock, scaled
from tests.surreal.helpers import (
    PENDULUM_SMALL,
    describe,
    metric_records,
    start_launch,
    status,
    wait_until,
)

pytest.importorskip("torch")

VICTIMS = re.compile(r"(replay|param-server)-\d+")
"""The processes the chaos kills: the replay shards and the parameter servers (not the
proxies in front of them, nor the learner)."""

# (step budget, eval goal, fair-share seconds the chaos may last). `make test`: a budget a quiet
# machine runs in ~2 min, kills included (8k once ended after 5 kills in a CI), and a goal that
# says it learned (a random policy scores about -1,200 to -1,500); `make test-long`: the issue's
# goal, -200. With the 64x64 networks (2026-12-05, a machine ~2.7x slower than the reference):
# 12k steps took 97 s with 7 kills (best -75.7), too near the 6 asked: 16k.
LEARNS = (16_000, -800.0, 600.0)
KILL_EVERY = 1_200
"""Env steps between two kills: ~12 in the 16k-step run (the 256x256 8k-step run of 2026-12-04
had one every ~550 steps and still learned)."""
SOLVES = (20_000, -200.0, 1200.0)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(2400)
@pytest.mark.parametrize(
    ("steps", "goal", "limit"),
    # the kills come every 5 s of a fair share of the machine: paced on wall time, a loaded CI
    # (27 kills in 137 s where a quiet run had 15 in 76 s) cost the 8k-step run its learning once
    # (best -1,009); paced on the fair share, at load 4 it had 14 kills in 120 s (best -118) and
    # 8 in 92 s (best -77)
    [LEARNS, pytest.param(*SOLVES, marks=pytest.mark.long)],
    ids=["learns", "solves"],
)
def test_killing_replay_shards_and_parameter_servers_td3_finishes_and_learns(
    tmp_path, steps, goal, limit
):
    home, run = tmp_path / "home", tmp_path / "runs" / "chaos" / "a"
    args = ["td3", "--env", "gym:Pendulum-v1", "--actors", "2", "--steps", str(steps)]
    args += ["--folder", str(tmp_path / "runs"), "--name", "chaos", "--trial", "a"]
    args += ["--set", "eval.every_s=3", "--set", "algo.checkpoint_every_s=10"]
    # the README's small Pendulum networks (-200 in ~3k steps): a quarter of the default 256x256
    # update's time, so the chaos is spent on kills and restarts, not on matrix products
    args += PENDULUM_SMALL
    proc = start_launch(args, tmp_path, home)
    out: list[str] = []
    drain = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    drain.start()
    rng, killed, kill_times = random.Random(49), [], []
    try:
        wait_until(lambda: status(run).get("version", 0) >= 1, 240, "the learner's first update")
        started, next_kill = time.monotonic(), status(run).get("global_step", 0)
        # a guard against a run that stands still, not a speed claim
        clock = FairClock(limit)
        while proc.poll() is None:
            if clock.expired():
                raise AssertionError(
                    f"the run still ran after {clock.describe()} of chaos ({len(killed)} kills): "
                    f"step {status(run).get('global_step')} of {steps}"
                )
            # the kills' pace: one every KILL_EVERY env steps, so that the run gets as many on a
            # slow or loaded machine as on a quiet one (paced on seconds, even of a fair share,
            # a faster run on a loaded CI got 5 where the test asks 6)
            step = status(run).get("global_step", 0)
            if step >= next_kill:  # not a synchronization
                victims = [
                    p
                    for p in describe(home, "chaos-a").processes
                    if VICTIMS.fullmatch(p.name) and p.state == "running" and p.pid
                ]
                if victims:
                    victim = rng.choice(victims)
                    try:
                        os.kill(victim.pid, signal.SIGKILL)
                        killed.append(victim.name)
                        kill_times.append(time.monotonic())
                    except ProcessLookupError:
                        pass
                    next_kill = step + KILL_EVERY
            time.sleep(0.2)
        ended = time.monotonic()
        chaos_s = ended - started
        proc.wait(timeout=60)
        drain.join(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=scaled(120))
    text = "".join(out)
    evals = [r["value"] for r in metric_records(run) if r["name"] == "charts/eval_return"]
    final = status(run)
    print(
        f"\nchaos: {len(killed)} kills in {chaos_s:.0f} s ({sorted(set(killed))}); "
        f"{final.get('global_step')} steps; best eval {max(evals, default=None)}, last "
        f"{evals[-3:]}"
    )
    assert proc.returncode == 0, text[-3000:]
    assert final["finished"] and final["global_step"] >= steps
    assert len(killed) >= 6, f"{len(killed)} kills: the run ended too soon for the chaos"
    assert {name.split("-")[0] for name in killed} == {"replay", "param"}
    assert max(evals) >= goal, f"evaluation never reached {goal}: {evals[-10:]}"
    # every kill is one restart, none past a limit (a killed process is restarted, not given
    # up); a kill in the run's last seconds may not be, the run ending within its restart delay
    restarts = {p.name: p.restarts for p in describe(home, "chaos-a").processes}
    early = [name for name, t in zip(killed, kill_times, strict=True) if t < ended - scaled(15)]
    for name, count in restarts.items():
        assert early.count(name) <= count <= killed.count(name), (name, restarts, killed)
    assert "(killed by SIGKILL)" in text, text[-3000:]
