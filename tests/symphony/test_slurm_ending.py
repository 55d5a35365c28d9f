"""On a real Slurm cluster, the end of an `Experiment.ends_with` process ends every group's job
with no launcher watching: before, the other jobs held their nodes until the time limit (three
days by default) or `symphony delete`."""

from __future__ import annotations

import sys

import pytest

from symphony.launcher import launch
from symphony.spec import Experiment, Process, ProcessGroup
from symphony.testing import cli, wait_for
from tests.symphony.slurm_cluster import module_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(200)]

# waits for the file that says its end (argv 1), then exits with argv 2; or, with no argv,
# serves until stopped (its SIGTERM handler says so in its log)
PROGRAM = r"""
import os, signal, sys, time
if len(sys.argv) > 2:
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.1)
    print("leader: ending with", sys.argv[2], flush=True)
    sys.exit(int(sys.argv[2]))
signal.signal(signal.SIGTERM, lambda *_: (print("stop: asked to", flush=True), sys.exit(0)))
print("serving", flush=True)
while True:
    time.sleep(1)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory)


def server(name: str) -> Process:
    return Process(name, [sys.executable, "-c", PROGRAM])


@pytest.mark.parametrize("code", [0, 3])
def test_the_leaders_end_stops_every_group_and_frees_every_job(cluster, tmp_path, code):
    go = tmp_path / "go"
    name = f"lead{code}"
    exp = Experiment(name)
    exp.add(Process("trainer", [sys.executable, "-c", PROGRAM, str(go), str(code)]))
    exp.add(ProcessGroup("workers", [server("worker-0"), server("worker-1")]))
    exp.add(server("metrics"))
    exp.ends_with = ["trainer"]
    handle = launch(exp, "slurm", detach=True)  # nothing of this test watches it
    ids = list(handle.record.data["jobs"].values())
    wait_for(
        lambda: all(p.state == "running" for p in handle.status().processes),
        60,
        what="every process to run",
    )
    go.touch()
    ended = wait_for(
        lambda: (s := handle.status()).status != "running" and s,
        90,
        what="the experiment to end by itself",
    )
    assert not set(ids) & set(cluster.squeue_ids())  # no job holds a node any more
    states = {p.name: p.state for p in ended.processes}
    assert states == {
        "trainer": "exited" if code == 0 else "failed",
        "worker-0": "stopped",
        "worker-1": "stopped",
        "metrics": "stopped",
    }
    assert ended.status == ("finished" if code == 0 else "failed")
    assert "stop: asked to" in handle.logs("worker-1")
    shown = cli("describe", name).stdout
    assert f"{name}" in shown and ("finished" if code == 0 else "failed") in shown, shown
    handle.stop()
