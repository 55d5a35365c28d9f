"""A 2-node Slurm run with Curve on (the default there): `surreal launch ppo --env
gym:CartPole-v1 --backend slurm` solves CartPole (eval >= 475, the local test's goal and
settings) with its jobs spread over both nodes and its run folder on a path every node sees, and
a caraml client without the run's keys gets nothing from its parameter server. `symphony logs
curve-a actor-0` shows the actor's log while the run runs and after it, and `symphony list --all`
keeps the finished run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import caraml
from symphony.testing import scaled
from tests.surreal.helpers import (
    describe,
    listed_status,
    metric_records,
    own_lines,
    shown_log,
    wait_until,
)
from tests.surreal.test_ppo_learns import cartpole_until
from tests.symphony.slurm_cluster import SlurmCluster, require_slurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(900)]
GOAL = 300


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    require_slurm()
    # 6 CPUs a node: the run's 9 one-CPU jobs all start (4 a node would leave one pending)
    monkeypatch.setenv("SLURM_NODE_CPUS", "6")
    cluster = SlurmCluster(tmp_path / "cluster").start()
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SYMPHONY_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.delenv(caraml.curve_env.ENV, raising=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def _wait(what: str, check, deadline: float):
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)  # polling a condition with a deadline
    raise AssertionError(f"timed out waiting for {what}")


def _answers_with_the_runs_keys(address: str, keys: Path) -> None:
    """A client with the run's keys gets an answer (a reply or the server's error reply)."""
    os.environ[caraml.curve_env.ENV] = str(keys)
    try:
        with caraml.Client(address, timeout=10, retries=3) as keyed:
            assert keyed.curve is not None
            try:
                keyed.request({"kind": "get"})
            except caraml.RemoteError:
                pass
    finally:
        del os.environ[caraml.curve_env.ENV]


def test_curve_slurm_run_learns_on_both_nodes_and_refuses_a_client_without_the_key(
    cluster, tmp_path
):
    args = ["launch", "ppo", "--env", "gym:CartPole-v1", "--backend", "slurm", "--actors", "4"]
    args += ["--steps", "300000", "--name", "curve", "--trial", "a"]
    # eval >= 300 ends the run: it learns across the nodes (a random policy gets ~20); the local
    # test_ppo_learns checks 475
    args += ["--set", "actor.group_size=1", *cartpole_until(GOAL)]
    launcher = subprocess.Popen(
        [sys.executable, "-m", "surreal", *args],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    run = tmp_path / "runs" / "curve" / "a"
    home = Path(os.environ["SYMPHONY_HOME"])
    try:
        deadline = time.monotonic() + scaled(240)
        keys = _wait(
            "the run's keys", lambda: (run / "keys" / "client.key_secret").exists(), deadline
        )
        assert keys and oct((run / "keys" / "server.key_secret").stat().st_mode & 0o777) == "0o600"
        names = _wait("the params service", lambda: list(home.rglob("names/params.json")), deadline)
        rec = json.loads(names[0].read_text())
        address = f"tcp://{rec['host']}:{rec['port']}"
        _answers_with_the_runs_keys(address, run / "keys")  # the server is up
        # actor-0's log through symphony while the run runs (the job's file on the shared folder)
        live = wait_until(lambda: shown_log(home, "curve-a"), 120, "actor-0's log", launcher)
        # a client without the experiment's key: no reply at all (refused in the handshake)
        with caraml.Client(address, timeout=2, retries=2) as plain:
            assert plain.curve is None
            with pytest.raises(caraml.RequestTimeout):
                plain.request({"kind": "get"})
        # ... and it was the same server all along: never restarted. (No second request: at
        # GOAL the run may end any moment from here, and its server with it.)
        server = [p for p in describe(home, "curve-a").processes if p.name == "param-server"]
        assert len(server) == 1 and server[0].restarts == 0, server
        nodes: set[str] = set()

        def both_nodes() -> bool:  # the union of the nodes the run's jobs were seen on
            for proc in describe(home, "curve-a").processes:
                if " on " in (proc.location or ""):  # "slurm job 12 on n1[ STATE]"
                    nodes.add(proc.location.split(" on ")[-1].split()[0])
            return len(nodes) == 2 or launcher.poll() is not None

        _wait("jobs on both nodes", both_nodes, deadline)
        assert len(nodes) == 2, nodes
        out, _ = launcher.communicate(timeout=scaled(600))
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGINT)
            launcher.communicate(timeout=scaled(180))
    assert launcher.returncode == 0, out
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert state["counters"]["global_step"] > 0  # the learner's jobs wrote to the shared folder
    evals = [
        (r["step"], r["value"]) for r in metric_records(run) if r["name"] == "charts/eval_return"
    ]
    print(f"\nSlurm PPO CartPole: evals (step, mean return): {evals[-5:]}")
    solved = [step for step, value in evals if value >= GOAL]
    assert solved, f"no evaluation reached {GOAL} within 300k steps: {evals}"
    assert solved[0] <= 300_000
    # symphony keeps the ended run: its list entry, and every process's log
    assert listed_status(home, "curve-a") == "finished"
    kept = shown_log(home, "curve-a")
    assert kept[: len(live)] == live and "actor-0: stop: " in kept[-1], kept
    processes = ["metrics", "buffer", "learner", "param-server", "evaluator"]
    for process in processes + [f"actor-{i}" for i in range(4)]:
        text = (run / "logs" / f"{process}.log").read_text()
        assert len(own_lines(text, process)) >= 3, text
