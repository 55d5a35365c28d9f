"""A run outlives its helpers: actors wait out a parameter-server restart, a lost segment does not
stall the lag bound, and a helper's end after the step budget does not fail the run."""

from __future__ import annotations

import io
import json
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import caraml
from caraml.testing import free_address
from surreal.launch.progress import monitor
from surreal.runtime.processes.actor import _wait_for
from surreal.runtime.processes.param_server import ParameterStore
from surreal.runtime.runfolder.rundir import RunDir
from surreal.runtime.wire.parameter_client import ParameterClient

pytestmark = pytest.mark.timeout(60)


def test_parameter_client_waits_out_a_server_restart(capfd):
    address = free_address()
    store = ParameterStore()
    store.update({"version": 2, "step": 5, "params": {"w": np.ones(2, np.float32)}})
    server = caraml.Server(address, store.handle).start()
    client = ParameterClient(address, timeout=0.2, outage_s=30.0)
    assert client.fetch()["w"].shape == (2,) and client.version == 2
    server.stop()  # the parameter server dies ...
    restarted = threading.Event()

    def restart() -> None:  # ... and comes back a few retries later, with a newer version
        store.update({"version": 3, "step": 9, "params": {"w": np.zeros(2, np.float32)}})
        restarted.server = caraml.Server(address, store.handle).start()
        restarted.set()

    timer = threading.Timer(1.5, restart)
    timer.start()
    try:
        fresh = client.fetch()  # blocks through the outage instead of raising RequestTimeout
        assert restarted.is_set() and client.version == 3 and fresh["w"].sum() == 0
        out = capfd.readouterr().out
        assert "did not answer" in out and "answers again" in out and client.outages == 1
    finally:
        timer.join()
        client.close()
        if restarted.is_set():
            restarted.server.stop()


def test_parameter_client_gives_up_after_its_outage_deadline():
    client = ParameterClient(free_address(), timeout=0.1, outage_s=0.5)
    try:
        with pytest.raises(caraml.RequestTimeout, match="no valid answer"):
            client.fetch()
    finally:
        client.close()


class _StuckParams:
    """Parameters that never reach the version an actor waits for (its segments were lost)."""

    version = 4

    def wait_for(self, target, deadline_s):
        raise TimeoutError


def test_an_actor_stops_waiting_for_a_version_that_lost_segments_never_bring():
    comp = SimpleNamespace(stopping=threading.Event())
    assert _wait_for(_StuckParams(), 7, comp, give_up_s=0.3) == {}  # go on collecting
    stuck_without_params = _StuckParams()
    stuck_without_params.version = 0
    threading.Timer(0.5, comp.stopping.set).start()
    assert _wait_for(stuck_without_params, 1, comp, give_up_s=0.1) is None  # needs params first


class _Handle:
    """A backend handle whose processes follow a script of states."""

    def __init__(self, script):
        self.script = script

    def status(self):
        states = self.script[0] if len(self.script) == 1 else self.script.pop(0)
        return SimpleNamespace(
            processes=[
                SimpleNamespace(name=name, state=state, exit_code=None, restarts=0)
                for name, state in states.items()
            ]
        )


def _run_dir(tmp_path, status: dict) -> RunDir:
    (tmp_path / "status.json").write_text(json.dumps(status))
    return RunDir(tmp_path)


def test_a_helper_that_fails_after_the_step_budget_does_not_fail_the_run(tmp_path):
    run = _run_dir(tmp_path, {"global_step": 1000, "total_steps": 1000, "finished": True})
    script = [
        {"learner": "running", "evaluator": "failed"},
        {"learner": "running", "evaluator": "failed"},
        {"learner": "exited", "evaluator": "failed"},
    ]
    assert monitor(_Handle(script), run, out=io.StringIO(), total=1000) == 0


def test_a_helper_that_fails_before_the_budget_still_fails_the_run(tmp_path):
    run = _run_dir(tmp_path, {"global_step": 10, "total_steps": 1000})
    out = io.StringIO()
    assert monitor(_Handle([{"learner": "running", "evaluator": "failed"}]), run, out=out) == 1
    assert "evaluator failed past their restart limit" in out.getvalue()
