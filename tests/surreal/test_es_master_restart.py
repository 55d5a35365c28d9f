"""An ES master killed with `kill -9` comes back from its checkpoint and the run reaches its budget.

The master is ES's learner: it hands out the population's tasks, steps theta and publishes it.
Its workers keep their own copy of the ES state and follow it from seeds and returns, so after
the restart they re-sync with the master's (older) checkpointed state and the run goes on; the
generations since that checkpoint are run again (with other noise draws) under the version
numbers published before (a version is a generation), which the parameter server, holding the
newer ones, ignores until the master passes them. What a user relies on: the run finishes its budget by itself, the master
resumed from its last checkpoint (not from scratch), the step in the metrics never goes back,
the parameter server ends at the master's last version, and the noise table in /dev/shm is gone.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import torch

from surreal.algos.es.config import ESConfig
from surreal.algos.es.loop import build
from surreal.algos.es.master import ESMaster
from symphony.testing import scaled
from tests.surreal.helpers import (
    ES_SMALL,
    describe,
    metric_records,
    processes_of,
    resumed_steps,
    start_launch,
    status,
    wait_until,
)

pytest.importorskip("gymnasium")

ENV = "gym:CartPole-v1"


@pytest.mark.timeout(400)
@pytest.mark.integration
def test_a_killed_es_master_resumes_from_its_checkpoint_and_the_run_reaches_its_budget(tmp_path):
    steps = 150_000
    home, before = tmp_path / "home", set(Path("/dev/shm").glob("surreal-es-noise-*"))
    args = ["es", "--env", ENV, "--actors", "2", "--steps", str(steps)]
    args += ["--name", "esk", "--trial", "a", "--set", "run.checkpoint_every=2", *ES_SMALL]
    proc = start_launch(args, tmp_path, home)
    run = tmp_path / "runs" / "esk" / "a"
    latest = run / "checkpoints" / "latest.pt"
    try:
        wait_until(lambda: latest.is_file(), 120, "the master's first checkpoint", proc)
        saved = torch.load(latest, weights_only=False)["counters"]
        shown = status(run).get("version", 0)  # the lost master's, as the status showed it
        os.kill(describe(home, "esk-a").process("learner").pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=scaled(300))  # a guard: the run ends by itself
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert "restarts learner 1 (killed by SIGKILL)" in out, out[-3000:]
    final = status(run)
    assert final["global_step"] >= steps
    log = (run / "logs" / "learner.log").read_text()
    after_kill = log.split("restarted after signal 9", 1)[1]
    (resumed,) = resumed_steps(after_kill)
    # the checkpoint read before the kill, or a later one the master wrote before it died
    assert resumed >= saved["global_step"] > 0, (saved, resumed)
    last: dict[str, int] = {}
    for row in metric_records(run):  # metrics.jsonl: never backwards across the restart
        assert row["step"] >= last.get(row["name"], 0), row
        last[row["name"]] = row["step"]
    server = (run / "logs" / "param-server.log").read_text()
    # the server took the restarted master's versions once they passed the lost master's
    # (the last publication may still be on its way when the run stops the server)
    (held,) = map(int, re.findall(r"held version (\d+) at the end", server))
    assert final["version"] - 1 <= held <= final["version"], (held, final)
    assert held > shown, (held, shown)  # past what the lost master had published
    assert "Traceback" not in server and "Traceback" not in after_kill
    assert not processes_of(run)
    assert set(Path("/dev/shm").glob("surreal-es-noise-*")) <= before


def test_a_worker_ahead_of_a_restarted_master_gets_the_whole_state_at_once(tmp_path):
    """The restarted master is at its checkpoint's generation; a worker that followed the killed
    one is further on, and no record steps a state back: its first reply carries the full state
    (before, an empty list of updates, and the worker took one more round trip to ask for it)."""
    cfg = ESConfig(hidden=(8,), population=4, noise_size=50_000)
    _, policy, state, noise = build(ENV, cfg, 0, str(tmp_path))
    state.generation = 3  # resumed from a checkpoint taken at generation 3
    master = ESMaster(policy, state, noise, cfg, generations=10, seed=0)
    ask = {"op": "task", "worker": "w0", "result": None}
    ahead = master.handle({**ask, "generation": 5})
    assert ahead["generation"] == 3 and "updates" not in ahead
    assert ahead["sync"] == state.to_wire() and "task" in ahead
    behind = master.handle({**ask, "worker": "w1", "generation": -1})  # a joining worker
    assert "sync" in behind and "updates" not in behind
    in_step = master.handle({**ask, "worker": "w2", "generation": 3})
    assert "sync" not in in_step and "updates" not in in_step
