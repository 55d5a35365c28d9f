"""A 2-node Slurm run with Curve on (the default there): the run trains across both nodes, and a
caraml client without the run's keys gets nothing from its parameter server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import caraml
from tests.surreal.helpers import QUICK, describe
from tests.symphony.slurm_cluster import SlurmCluster, require_slurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    require_slurm()
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


def test_curve_slurm_run_refuses_a_client_without_the_key(cluster, tmp_path):
    args = ["launch", "ppo", "--backend", "slurm", "--actors", "2", "--steps", "3000"]
    args += ["--name", "curve", "--trial", "a", "--set", "actor.group_size=1", *QUICK]
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
        deadline = time.monotonic() + 240
        keys = _wait(
            "the run's keys", lambda: (run / "keys" / "client.key_secret").exists(), deadline
        )
        assert keys and oct((run / "keys" / "server.key_secret").stat().st_mode & 0o777) == "0o600"
        names = _wait("the params service", lambda: list(home.rglob("names/params.json")), deadline)
        import json

        rec = json.loads(names[0].read_text())
        address = f"tcp://{rec['host']}:{rec['port']}"
        # a client without the experiment's key: no reply at all (refused in the handshake)
        with caraml.Client(address, timeout=2, retries=2) as plain:
            assert plain.curve is None
            with pytest.raises(caraml.RequestTimeout):
                plain.request({"kind": "get"})
        # a client with the run's keys gets an answer (a reply or the server's error reply)
        os.environ[caraml.curve_env.ENV] = str(run / "keys")
        try:
            with caraml.Client(address, timeout=10, retries=3) as keyed:
                try:
                    keyed.request({"kind": "get"})
                except caraml.RemoteError:
                    pass
        finally:
            del os.environ[caraml.curve_env.ENV]
        status = describe(home, "curve-a")
        nodes = {
            p.location.split(" on ")[-1] for p in status.processes if " on " in (p.location or "")
        }
        assert len(nodes) == 2, [p.location for p in status.processes]
        out, _ = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGINT)
            launcher.communicate(timeout=60)
    assert launcher.returncode == 0, out
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert state["counters"]["global_step"] >= 3000  # actors on both nodes fed the learner
