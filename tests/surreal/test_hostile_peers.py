"""Nothing a peer sends stops a run: junk on every port of a live PPO run, then it still learns.

Slow (a real CartPole run, ~3-5 minutes here): 10,000 garbled caraml messages plus one well-formed
message that is not what the port expects, and 200 raw junk TCP connections, to every port the
run binds, while it trains. No process may crash, the global step must grow in every 20 s window,
the run must end by itself (rc 0) and its evaluation reach 475.
"""

from __future__ import annotations

import io
import random
import subprocess
import threading
from pathlib import Path

import pytest

from caraml.wire import serialize
from symphony.scrape import is_scrape_service
from symphony.testing import FairClock, scaled
from tests.surreal.helpers import ctrl_c, metric_records, start_launch, status, wait_until
from tests.surreal.port_fuzz import flood, garbled, http_junk, junk_connections, socket_types
from tests.surreal.run_ports import endpoints, restarts_in_logs
from tests.surreal.test_ppo_learns import CARTPOLE

# The learning test's settings, but with a goal no CartPole return reaches (not the first eval
# >= 475), so the run is surely still training while the junk arrives, and its learner binds
# `learner-goal` (where an evaluator's word would end the run: `surreal.runtime.wire.goal`).
SETTINGS = [
    arg
    for flag, value in zip(CARTPOLE[::2], CARTPOLE[1::2], strict=True)
    for arg in (flag, "run.stop_at_return=1000000" if value == "run.stop_at_return=475" else value)
]
MESSAGES, CONNECTIONS, WINDOW_S = 10_000, 200, 20.0
HTTP_REQUESTS = 200  # to each process's Prometheus /metrics port (HTTP, not caraml)
BUDGET = 10_000_000  # never reached: the test ends the run


def _attack(host: str, port: int, service: str, seed: int, report: dict) -> None:
    rng = random.Random(seed)
    if is_scrape_service(service):
        sent = http_junk(host, port, HTTP_REQUESTS, rng)
        report[service] = (sent, junk_connections(host, port, CONNECTIONS, rng))
        return
    messages = [garbled(rng) for _ in range(MESSAGES)]
    messages.append([bytes(f) for f in serialize({"not": "a segment"})])  # well-formed, foreign
    sent = 0
    for kind in socket_types(service):
        sent += flood(f"tcp://{host}:{port}", kind, messages, deadline_s=scaled(120.0))
    report[service] = (sent, junk_connections(host, port, CONNECTIONS, rng))


def sample_steps(
    proc: subprocess.Popen, run: Path, until=None, timeout: float | None = None
) -> list[tuple[float, int]]:
    """(time, global step) about every second until the launch ends by itself, or `until()`
    holds; the time in seconds of a fair share of the machine (`FairClock`: a stall check is a
    guard against a hang, not a speed claim, on a machine that CI loads ~6x over its cores).
    Sampling ends when the launch ends by itself, or `until()`
    holds (then it is left running), or `timeout` seconds (fair-share: FairClock) pass (its
    output is kept in a pipe that a thread drains)."""
    lines: list[str] = []
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    drain.start()
    steps = []
    clock = FairClock(timeout) if timeout is not None else None
    fair = FairClock(float("inf"))  # the samples' times: seconds of a fair share of the machine
    while True:
        fair.expired()  # adds the time since the last sample, slowed while the machine is loaded
        steps.append((fair.fair, status(run).get("global_step", 0)))
        if until is not None and until():
            break
        if clock is not None and clock.expired():
            raise AssertionError(f"timed out after {clock.describe()}: {steps[-3:]}")
        try:
            proc.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:  # left running: stop it here, so that the pipe ends
        ctrl_c(proc)
        proc.wait(timeout=scaled(180))
    drain.join(timeout=10)
    proc.stdout = io.StringIO("".join(lines))
    return steps


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_junk_on_every_port_of_a_ppo_run_crashes_nothing_and_it_still_learns(tmp_path):
    """The run has a budget it never reaches: the test ends it (Ctrl-C) once every attacker is
    done and an evaluation reached 475, so a run that learns fast cannot end while a port still
    takes junk (CI of 1f76965: an actor's /metrics port closed with the run after 185 of 200
    junk connections)."""
    home, run = tmp_path / "home", tmp_path / "runs" / "fuzz" / "a"
    proc = start_launch(
        [
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "4",
            "--steps",
            str(BUDGET),
            "--name",
            "fuzz",
            "--trial",
            "a",
            *SETTINGS,
        ],
        tmp_path,
        home,
    )
    report: dict = {}
    try:
        wait_until(lambda: status(run).get("global_step", 0) > 0, 180, "first learner step", proc)
        ports = endpoints(home, "fuzz-a")
        assert {"experience", "batches", "params", "params-pub", "metrics", "learner-goal"} <= set(
            ports
        )
        attackers = [
            threading.Thread(target=_attack, args=(host, port, name, i, report), daemon=True)
            for i, (name, (host, port)) in enumerate(sorted(ports.items()))
        ]
        for thread in attackers:
            thread.start()
        steps = sample_steps(
            proc,
            run,
            until=lambda: not any(t.is_alive() for t in attackers) and _best_eval(run) >= 475,
            timeout=scaled(600),
        )  # it pressed Ctrl-C once `until` held
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out  # stopped by the test, not ended (or failed) by itself
    assert set(report) == set(ports), f"an attacker did not finish: {report}"
    for service, (sent, connected) in report.items():
        least = HTTP_REQUESTS if is_scrape_service(service) else MESSAGES
        assert sent >= least and connected == CONNECTIONS, (service, sent, connected)
    assert restarts_in_logs(run) == [], "a process crashed"
    # the learner read the junk on `learner-goal` and dropped it (its goal stays unreached)
    assert "[learner-goal] dropped a message (" in (run / "logs" / "learner.log").read_text()
    final = status(run)
    assert final["buffer/invalid"] > 0 and final["invalid_messages"] > 0  # they saw the junk
    stalls = [
        (round(t0 - steps[0][0]), s0)
        for t0, s0 in steps
        if t0 + WINDOW_S <= steps[-1][0]
        and max(s for t, s in steps if t0 <= t <= t0 + WINDOW_S) <= s0
    ]
    assert not stalls, f"the global step stood still for {WINDOW_S} s from (t, step): {stalls[:5]}"
    assert _best_eval(run) >= 475, "evaluation never reached 475"


def _best_eval(run: Path) -> float:
    try:
        records = metric_records(run)
    except FileNotFoundError:
        return float("-inf")
    return max((r["value"] for r in records if r["name"] == "charts/eval_return"), default=-1e9)
