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
import time
from pathlib import Path

import pytest

from caraml.wire import serialize
from symphony.scrape import is_scrape_service
from tests.surreal.helpers import metric_records, start_launch, status, wait_until
from tests.surreal.port_fuzz import flood, garbled, http_junk, junk_connections, socket_types
from tests.surreal.run_ports import endpoints, restarts_in_logs
from tests.surreal.test_ppo_learns import CARTPOLE

# The learning test's settings, but ended by the step budget (not by the first eval >= 475), so
# the run is surely still training while the junk arrives.
SETTINGS = [
    arg
    for flag, value in zip(CARTPOLE[::2], CARTPOLE[1::2], strict=True)
    if value != "run.stop_at_return=475"
    for arg in (flag, value)
]
MESSAGES, CONNECTIONS, WINDOW_S = 10_000, 200, 20.0
HTTP_REQUESTS = 200  # to each process's Prometheus /metrics port (HTTP, not caraml)


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
        sent += flood(f"tcp://{host}:{port}", kind, messages, deadline_s=120.0)
    report[service] = (sent, junk_connections(host, port, CONNECTIONS, rng))


def sample_steps(proc: subprocess.Popen, run: Path) -> list[tuple[float, int]]:
    """(time, global step) about every second until the launch ends by itself (its output is
    kept in a pipe that a thread drains)."""
    lines: list[str] = []
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    drain.start()
    steps = []
    while True:
        steps.append((time.monotonic(), status(run).get("global_step", 0)))
        try:
            proc.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            continue
    drain.join(timeout=10)
    proc.stdout = io.StringIO("".join(lines))
    return steps


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_junk_on_every_port_of_a_ppo_run_crashes_nothing_and_it_still_learns(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "fuzz" / "a"
    proc = start_launch(
        [
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            "4",
            "--steps",
            "300000",
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
        assert {"experience", "batches", "params", "params-pub", "metrics"} <= set(ports)
        attackers = [
            threading.Thread(target=_attack, args=(host, port, name, i, report), daemon=True)
            for i, (name, (host, port)) in enumerate(sorted(ports.items()))
        ]
        for thread in attackers:
            thread.start()
        steps = sample_steps(proc, run)
        for thread in attackers:
            thread.join(timeout=5)
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert set(report) == set(ports), f"the run ended before every port got its junk: {report}"
    for service, (sent, connected) in report.items():
        least = HTTP_REQUESTS if is_scrape_service(service) else MESSAGES
        assert sent >= least and connected == CONNECTIONS, (service, sent, connected)
    assert restarts_in_logs(run) == [], "a process crashed"
    final = status(run)
    assert final["buffer/invalid"] > 0 and final["invalid_messages"] > 0  # they saw the junk
    stalls = [
        (round(t0 - steps[0][0]), s0)
        for t0, s0 in steps
        if t0 + WINDOW_S <= steps[-1][0]
        and max(s for t, s in steps if t0 <= t <= t0 + WINDOW_S) <= s0
        and s0 < final["total_steps"]
    ]
    assert not stalls, f"the global step stood still for {WINDOW_S} s from (t, step): {stalls[:5]}"
    evals = [r["value"] for r in metric_records(run) if r["name"] == "charts/eval_return"]
    assert max(evals) >= 475, f"evaluation never reached 475: {evals[-10:]}"
