"""The in-job launcher of the slurm backend, run directly (no Slurm needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from symphony.spec import Experiment, Process, ProcessGroup
from symphony.testing import wait_for

pytestmark = pytest.mark.timeout(60)

PRINT_ENV = (
    "import os; print(*sorted(f'{k}={v}' for k, v in os.environ.items() if k.startswith('SYMPH_')))"
)


def prepare(tmp_path: Path, exp: Experiment, resolve_timeout_s: float = 10) -> Path:
    """The shared folder as `SlurmBackend.launch` leaves it."""
    folder = tmp_path / "exp"
    (folder / "logs").mkdir(parents=True)
    (folder / "spec.yaml").write_text(exp.to_yaml())
    (folder / "slurm.json").write_text(
        json.dumps({"launch_id": "L1", "resolve_timeout_s": resolve_timeout_s})
    )
    return folder


def run_launcher(folder: Path, group: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "symphony.backends.slurm_launcher", str(folder), group],
        env={**os.environ, "SLURM_JOB_ID": "42", "SYMPHONY_SLURM_HOST": "node-x"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def status(folder: Path, process: str) -> dict:
    return json.loads((folder / "status" / f"{process}.json").read_text())


def test_publishes_binds_resolves_connects_and_sets_symph_env(tmp_path):
    server = Process("server", [sys.executable, "-c", PRINT_ENV]).binds("replay")
    client = Process("client", [sys.executable, "-c", PRINT_ENV]).connects("replay")
    exp = Experiment("e").add(ProcessGroup("both", [server, client]))
    folder = prepare(tmp_path, exp)
    launcher = run_launcher(folder, "both")
    out, _ = launcher.communicate(timeout=30)
    assert launcher.returncode == 0, out
    published = json.loads((folder / "names" / "replay.json").read_text())
    assert (published["host"], published["process"], published["job_id"]) == (
        "node-x",
        "server",
        "42",
    )
    addr = f"node-x:{published['port']}"
    for name in ("server", "client"):
        log = (folder / "logs" / f"{name}.log").read_text()
        assert f"SYMPH_REPLAY_ADDR={addr}" in log and f"SYMPH_PROCESS={name}" in log
        assert status(folder, name)["state"] == "exited"
    assert "SYMPH_BIND_HOST=*" in (folder / "logs" / "server.log").read_text()


def test_unresolvable_connect_fails_with_a_message_in_the_log(tmp_path):
    exp = Experiment("e").add(
        Process("lonely", ["true"]).connects("nobody"),
        Process("nobody-home", ["true"]).binds("nobody"),
    )
    folder = prepare(tmp_path, exp, resolve_timeout_s=0.3)
    launcher = run_launcher(folder, "lonely")
    out, _ = launcher.communicate(timeout=30)
    assert launcher.returncode == 1
    assert "['nobody'] were not published" in (folder / "logs" / "lonely.log").read_text()
    assert status(folder, "lonely")["state"] == "failed"


def test_sigterm_stops_every_process_and_exits(tmp_path):
    exp = Experiment("e").add(
        ProcessGroup("g", [Process("s1", "sleep 300"), Process("s2", "sleep 300")])
    )
    folder = prepare(tmp_path, exp)
    launcher = run_launcher(folder, "g")

    def running() -> bool:
        files = [folder / "status" / f"{p}.json" for p in ("s1", "s2")]
        return all(f.exists() and json.loads(f.read_text())["state"] == "running" for f in files)

    wait_for(running, 20, what="both processes to run")
    pids = [status(folder, p)["pid"] for p in ("s1", "s2")]
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == 128 + signal.SIGTERM
    assert not [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert [status(folder, p)["state"] for p in ("s1", "s2")] == ["stopped", "stopped"]
