"""PPO CartPole with remote inference (`actor.inference=remote`) learns, and survives a kill -9 of
its policy worker: one launch (module-scoped) serves both tests.

The settings are the README line's (the classic family's defaults and its 200k-step budget), with
the 4 actors' policies on one policy worker; the first evaluation at the goal ends the run. `make
test` runs it to 250 (it learns: a random policy gets ~20), `make test-long` to 475 (it solves it). The older pinned recipe
(`test_ppo_learns.CARTPOLE`) sometimes held ~200 for the whole 100k budget (two local CI runs).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psutil
import pytest

from surreal.runtime.wire.parameter_client import ParameterClient
from symphony.testing import scaled
from tests.surreal.helpers import (
    metric_records,
    processes_of,
    start_launch,
    status,
    wait_until,
)
from tests.surreal.run_ports import endpoints, restarts_in_logs

pytest.importorskip("torch")
pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
BUDGET = 200_000  # the classic family's run.steps
QUICK_EVAL = ["--set", "eval.episodes=10", "--set", "eval.every_s=2"]


def _worker(run: Path) -> psutil.Process | None:
    for proc in processes_of(run):
        try:
            if "policy-worker" in proc.cmdline():
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.fixture(
    scope="module",
    params=[pytest.param(250, id="learns"), pytest.param(475, id="solves", marks=pytest.mark.long)],
)
def remote_run(tmp_path_factory, request):
    goal = request.param
    tmp = tmp_path_factory.mktemp("remote")
    home, run = tmp / "home", tmp / "runs" / "remote" / "a"
    started = time.monotonic()
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
            "remote",
            "--trial",
            "a",
            *QUICK_EVAL,
            "--set",
            f"run.stop_at_return={goal}",
            "--set",
            "actor.inference=remote",
            "--set",
            "run.policy_workers=1",
        ],
        tmp,
        home,
    )
    lines: list[str] = []
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    drain.start()
    try:
        # kill -9 the policy worker while the parameter server still holds the first
        # parameters (the actors act with them through the worker; nothing learned yet). A kill
        # at the first learner step as status.json shows it came, under load, when the policy
        # already scored the goal: the run ended before the restart was seen (CI of 1f76965).
        # (RUN/logs/ is no signal here: the launcher appends the processes' logs to it when the
        # run stops; the live ones are in symphony's home, `symphony logs`.)
        address = wait_until(lambda: endpoints(home, "remote-a").get("params"), 300, "ports", proc)
        params = ParameterClient(f"tcp://{address[0]}:{address[1]}", timeout=2.0, outage_s=60.0)
        try:

            def first_parameters_and_a_worker():
                params.fetch()
                return params.version >= 1 and _worker(run)

            victim = wait_until(first_parameters_and_a_worker, 300, "parameters, a worker", proc)
        finally:
            params.close()
        killed_at = status(run).get("global_step", 0)
        victim.kill()
        wait_until(
            lambda: (w := _worker(run)) is not None and w.pid != victim.pid and w,
            120,
            "a restarted policy worker",
            proc,
        )
        proc.wait(timeout=scaled(600))
    finally:
        if proc.poll() is None:
            proc.kill()
    drain.join(timeout=10)
    wall = time.monotonic() - started
    print(f"\nremote-inference CartPole: wall {wall:.0f} s, worker killed at step {killed_at}")
    return run, proc.returncode, "".join(lines), killed_at, goal


def test_a_killed_policy_worker_is_restarted_and_the_run_goes_on(remote_run):
    run, returncode, out, killed_at, _ = remote_run
    assert returncode == 0, out[-3000:]
    assert any(line.startswith("policy-worker-0.log") for line in restarts_in_logs(run)), out[
        -2000:
    ]
    assert status(run)["global_step"] > killed_at  # the actors resumed with the new worker
    assert (
        not (run / "crashes.jsonl").exists() or "actor" not in (run / "crashes.jsonl").read_text()
    )


def test_ppo_cartpole_with_remote_inference_reaches_its_goal(remote_run):
    run, returncode, out, killed_at, goal = remote_run
    evals = [
        (r["step"], r["value"]) for r in metric_records(run) if r["name"] == "charts/eval_return"
    ]
    solved = [step for step, value in evals if value >= goal]
    assert solved, f"no evaluation reached {goal} within {BUDGET} steps: {evals}"
    assert solved[0] > killed_at  # learned on after the kill, not before it
