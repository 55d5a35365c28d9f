"""The inner loop's one real run (`make check`): a small PPO run through real processes.

Actors, buffer, learner, parameter server, evaluator and metrics sink start as processes of the
local backend; the test watches the run's own files grow (learner steps, parameter versions, a
checkpoint written during the run), then presses Ctrl-C and checks that no process of the run is
left and that the shared memory it held is freed. The buffer, the parameter server and the
metrics sink run without torch. The training itself is not judged here: the
learning tests of `make test` do that.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from surreal.launch.evaluate import run_status
from symphony.records import Records
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    ctrl_c,
    processes_of,
    run_segments,
    start_launch,
    status,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)


def test_a_2k_step_ppo_run_trains_checkpoints_and_ctrl_c_leaves_nothing(tmp_path, monkeypatch):
    home, run = tmp_path / "home", tmp_path / "runs" / "smoke" / "a"
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "1000000"]
    # a checkpoint every 2 iterations: one appears within the first ~300 env steps
    settings = [*QUICK, "--set", "run.checkpoint_every=2"]
    proc = start_launch([*args, "--name", "smoke", "--trial", "a", *settings], tmp_path, home)
    latest = run / "checkpoints" / "latest.pt"
    try:
        first = wait_until(lambda: status(run).get("global_step", 0), 180, "a learner step", proc)
        version = status(run).get("version") or 0
        wait_until(latest.is_file, 120, "a checkpoint during the run", proc)
        written = latest.stat().st_mtime_ns
        grown = wait_until(
            lambda: (lambda s: s if s.get("global_step", 0) >= first + 2000 else None)(status(run)),
            180,
            "2,000 more env steps",
            proc,
        )
        assert grown["version"] > version  # the parameter server got newer parameters
        wait_until(lambda: latest.stat().st_mtime_ns > written, 120, "a newer checkpoint", proc)
        running = processes_of(run)
        names = {" ".join(p.cmdline()) for p in running}
        assert len(running) >= 6, names  # 2 actors, buffer, learner, parameter server, ...
        # the buffer, the parameter server and the metrics sink never load torch (~1.5 CPU-s
        # and ~130 MB each): their entry points, config class and replay size come without
        # the learner's module
        for role in ("buffer", "param-server", "metrics"):
            (server,) = [p for p in running if role in p.cmdline()]
            maps = Path(f"/proc/{server.pid}/maps").read_text()
            assert "libtorch" not in maps, f"{role} loaded torch"
        pids = {proc.pid} | {p.pid for p in running}
        assert run_segments(pids), "the run holds no shared memory: nothing to check below"
        ctrl_c(proc)
        proc.wait(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_until(lambda: not processes_of(run), 30, "every process of the run to end")
    wait_until(lambda: not run_segments(pids), 30, "the run's shared memory to be freed")
    assert Records(home).load("smoke-a").outcome == "stopped"
    # each process says it was stopped because the launch was interrupted, and so does status
    actor = (run / "logs" / "actor-0.log").read_text()
    assert "actor-0: stop: stopped (surreal launch was interrupted) after" in actor
    monkeypatch.setenv("SYMPHONY_HOME", str(home))
    assert "\n  state      stopped (surreal launch was interrupted)\n" in run_status(run)
