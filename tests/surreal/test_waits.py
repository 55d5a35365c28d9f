"""Issue 50 item 2, no silent waits, and item 3's pieces that need no run: a process waiting on
another says so (its log, its reports, the launcher's line), a run that stands still ends with
the reason, and a restarted learner's versions and restart policy."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace

import pytest

from surreal.api.config import Config, RunConfig
from surreal.launch.progress import PlainView, Stall, _Watch, waiting_for
from surreal.runtime.plan.topology import learner_restart_policy
from surreal.runtime.processes.metrics import MetricsSink
from surreal.runtime.processes.param_server import ParameterStore
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import RunDir
from surreal.runtime.wire import schemas
from surreal.runtime.wire.waits import SILENT, WAIT_REPORT_S, WAIT_SAY_S, Waits, pick

pytestmark = pytest.mark.timeout(60)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _waits(caplog) -> tuple[Waits, _Clock, list[dict]]:
    clock, sent = _Clock(), []
    log = logging.getLogger("test-waits")
    waits = Waits(log, lambda: sent.append(waits.field()), clock=clock)
    caplog.set_level(logging.INFO, logger="test-waits")
    return waits, clock, sent


def test_a_wait_is_said_once_after_20_s_reported_while_it_lasts_and_its_end_said(caplog):
    waits, clock, sent = _waits(caplog)
    waits.waiting("param-server", SILENT, 5.0)
    assert not caplog.records and not sent and waits.field() == {}  # short waits are normal
    waits.waiting("param-server", SILENT, WAIT_SAY_S + 15)
    assert [r.getMessage() for r in caplog.records] == [
        "waiting for param-server: no answer for 35 s"
    ]
    assert sent == [{"for": "param-server", "what": SILENT, "s": 35.0}]
    clock.now += WAIT_REPORT_S / 2
    waits.waiting("param-server", SILENT, 36.0)
    assert len(sent) == 1 and len(caplog.records) == 1  # neither repeated at once
    clock.now += WAIT_REPORT_S
    waits.waiting("param-server", SILENT, 38.0)
    assert len(sent) == 2 and len(caplog.records) == 1  # reported again, said once
    waits.over("param-server")
    assert sent[-1] == {} and "param-server again after 38 s" in caplog.records[-1].getMessage()


def test_a_wait_without_its_seconds_counts_from_its_first_call(caplog):
    waits, clock, sent = _waits(caplog)
    waits.waiting("learner", "no new parameters")
    clock.now += WAIT_SAY_S + 1
    waits.waiting("learner", "no new parameters")
    assert waits.field() == {"for": "learner", "what": "no new parameters", "s": 21.0}
    waits.over("actors")  # another peer's end changes nothing
    assert waits.field()["for"] == "learner"


def test_the_launcher_names_a_silent_peer_before_the_waits_it_causes_and_drops_stale_ones():
    now = 1000.0
    status = {
        "waits": {
            "learner": {"for": "actors", "what": "no batch in the buffer", "s": 60, "time": now},
            "actor-0": {"for": "param-server", "what": SILENT, "s": 33, "time": now - 2},
            "actor-1": {"for": "param-server", "what": SILENT, "s": 30, "time": now},
            "evaluator": {"for": "param-server", "what": SILENT, "s": 900, "time": now - 60},
        },
        "updated": now,
    }
    assert pick(status["waits"], now) == "param-server: no answer for 35 s (actor-0, actor-1)"
    assert waiting_for(status, stale=False, now=now).startswith("param-server: no answer")
    assert waiting_for({"updated": now}, stale=False, now=now) is None
    quiet_sink = {"updated": now - 40}
    assert waiting_for(quiet_sink, stale=False, now=now) == ("metrics: no status written for 40 s")


def test_a_wait_report_passes_the_port_schema_and_the_sink_keeps_it_in_the_status(tmp_path):
    report = {
        "source": "actor",
        "index": 1,
        "step": 0,
        "process": "actor-1",
        "waiting": {"for": "param-server", "what": SILENT, "s": 25.0},
        "wait_only": True,
    }
    checked = schemas.report(report)
    sink = MetricsSink(tmp_path, 1000, tensorboard=False)
    sink.status["global_step"] = 500
    sink.handle(checked)
    assert sink.status["waits"]["actor-1"]["for"] == "param-server"
    assert sink.status["global_step"] == 500  # a wait is no step
    sink.handle(schemas.report({**report, "waiting": {}}))
    assert sink.status["waits"] == {}
    with pytest.raises(schemas.Invalid):
        schemas.report({**report, "waiting": {"for": "x" * 500, "what": SILENT}})
    sink.close()


def test_the_run_ends_with_the_wait_once_its_step_stood_still_for_the_stall_timeout(tmp_path):
    (tmp_path / "status.json").write_text(json.dumps({"global_step": 10, "total_steps": 1000}))
    out = io.StringIO()
    handle = SimpleNamespace(name="x", status=lambda: SimpleNamespace(processes=[]))
    watch = _Watch(handle, RunDir(tmp_path), None, 1000, PlainView(out), 0.0)
    watch.stall = Stall(30.0, now=0.0)
    status = {"global_step": 10, "total_steps": 1000}
    assert watch.stalled(status, 25.0, None) is None
    assert watch.stalled({**status, "global_step": 20}, 40.0, None) is None  # it moved
    assert watch.stalled({**status, "global_step": 20}, 69.0, None) is None
    waiting = "param-server: no answer for 65 s (actor-0)"
    assert watch.stalled({**status, "global_step": 20}, 71.0, waiting) == 1
    said = out.getvalue()
    assert "no progress for 31 s" in said and f"waiting for {waiting}" in said, said
    assert f"surreal launch --resume {tmp_path}" in said
    assert Stall(0.0, now=0.0).still(5, 10_000.0) is None  # 0: never
    done = {"global_step": 1000, "total_steps": 1000}
    assert watch.stalled(done, 10_000.0, None) is None  # the budget is used: it ends by itself


def test_the_stall_timeout_is_a_run_setting_checked_before_launch():
    from surreal.api.config import ConfigError
    from surreal.launch.config_check import check_values

    assert RunConfig().stall_timeout_s > 60  # a few minutes by default
    with pytest.raises(ConfigError, match=r"run.stall_timeout_s=-1.0 must be >= 0"):
        check_values(Config(algo=None, run=RunConfig(stall_timeout_s=-1.0)))


def _publication(version: int) -> dict:
    import numpy as np

    return {"version": version, "step": version * 10, "params": {"w": np.zeros(2, np.float32)}}


def test_a_stall_needs_a_learner_that_says_it_waits_not_one_that_is_gone():
    store = ParameterStore()
    woken = []
    store.on_new_version = lambda: woken.append(1)
    for version in (1, 2, 3):
        store.update(_publication(version))
    store.interval = 0.01  # versions came every 10 ms
    store.last_change -= 1.0  # and none for a second
    store.check_stall(waiting=True)
    assert store.stalls == 0  # a killed learner: the actors keep waiting
    store.update(_publication(3))  # the learner re-publishes its version: it waits for a batch
    store.check_stall(waiting=True)
    assert store.stalls == 1


def _plan(**run) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(run=RunConfig(**run)))


def test_the_learner_restarts_on_failure_under_run_max_restarts_unless_that_is_0():
    policy = learner_restart_policy(_plan())
    assert policy.mode == "on-failure" and policy.max_restarts == RunConfig.max_restarts
    assert not policy.should_restart(0, 0)  # its budget used: the run's end
    assert policy.should_restart(-9, 0) and policy.should_restart(1, 0)
    for final in (checkpoint.UNWRITABLE_EXIT, checkpoint.STALLED_EXIT, checkpoint.UNUSABLE_EXIT):
        assert not policy.should_restart(final, 0)  # a restart cannot mend these
    assert learner_restart_policy(_plan(max_restarts=0)).mode == "never"
    assert learner_restart_policy(_plan(learner_replicas=2)).mode == "never"


def test_a_restarted_learner_publishes_past_every_version_the_killed_one_could_have(monkeypatch):
    from surreal.runtime.processes import learner

    comp = SimpleNamespace(
        config=SimpleNamespace(run=RunConfig(checkpoint_every=5)), log=logging.getLogger("x")
    )
    monkeypatch.setattr(learner, "held_version", lambda comp: 40)
    assert learner.restarted_version(comp, 25) == 41  # the server's 40 came after the checkpoint
    monkeypatch.setattr(learner, "held_version", lambda comp: None)  # it did not answer
    assert learner.restarted_version(comp, 25) == 25 + 1 + 2 * 5
    monkeypatch.setattr(learner, "held_version", lambda comp: 3)  # it restarted too
    assert learner.restarted_version(comp, 25) == 25 + 1 + 2 * 5


def test_a_learner_crashing_past_its_restarts_ends_the_run_with_the_resume_hint(tmp_path):
    from surreal.launch.progress import monitor
    from surreal.monitoring import crash

    (tmp_path / "status.json").write_text(json.dumps({"global_step": 10, "total_steps": 1000}))
    for _ in range(RunConfig.max_restarts + 1):
        try:
            raise ValueError("boom in learn")
        except ValueError as err:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("SYMPH_PROCESS", "learner")
                crash.record(tmp_path, "learner", 0, err)
    learner = SimpleNamespace(name="learner", state="restarting", exit_code=None, restarts=3)
    handle = SimpleNamespace(status=lambda: SimpleNamespace(processes=[learner]))
    out = io.StringIO()
    assert monitor(handle, RunDir(tmp_path), out=out, live=False, crashes_since=0.0) == 1
    text = out.getvalue()
    assert "learner (role learner, index 0) crashed 4 times" in text
    assert text.rstrip().endswith(f"surreal launch --resume {tmp_path}"), text
