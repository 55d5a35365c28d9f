"""Monitoring without a run: the `/metrics` exporter, the topology's scrape services and kube
annotations, crash records and the crash-loop stop, `surreal status`, run.wandb usage errors, the
W&B offline summary reader and the Grafana dashboard. The real run is in test_monitoring_run."""

from __future__ import annotations

import io
import json
import random
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from surreal.api.config import ConfigError
from surreal.launch import experiment as launching
from surreal.launch.progress import monitor
from surreal.monitoring import crash, wandb_sink
from surreal.monitoring.prometheus import METRICS, ProcessMetrics, service_name
from surreal.runtime.runfolder.rundir import RunDir
from tests.surreal.port_fuzz import http_junk

pytestmark = pytest.mark.timeout(120)
DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "surreal-run.json"
LABELS = {"experiment": "e", "trial": "t1", "role": "actor", "index": "0", "process": "actor-0"}


def scrape(port: int) -> dict[str, list]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def test_the_exporter_serves_labelled_series_and_survives_garbage():
    metrics = ProcessMetrics(LABELS)
    port = metrics.serve("127.0.0.1", 0)
    try:
        metrics.set("surreal_process_restarts", 0)
        metrics.count("surreal_env_steps_total", 64)
        metrics.port_traffic("experience", "out", {"obs": __import__("numpy").zeros(8)})
        assert http_junk("127.0.0.1", port, 60, random.Random(3)) == 60  # each answered
        samples = scrape(port)
    finally:
        metrics.close()
    [(labels, steps)] = samples["surreal_env_steps_total"]
    assert steps == 64 and labels == LABELS
    traffic = {s[0]["port"]: s[1] for s in samples["surreal_port_bytes_total"]}
    assert traffic == {"experience": 64.0}
    assert "surreal_env_steps_created" not in samples


def test_every_process_binds_its_metrics_service_and_kube_pods_are_annotated(tmp_path):
    from symphony.kube.manifests import render
    from symphony.kube.naming import RenderOptions

    plan = launching.plan("ppo", folder=str(tmp_path / "runs"), actors=3)
    exp = launching.build_experiment(plan)
    for proc in exp.processes():
        assert service_name(proc.name) in proc.bound
    objects = render(exp, RenderOptions(image="surreal:test"))
    pods = [o["spec"]["template"] for o in objects if o["kind"] in ("Job", "Deployment")]
    assert pods
    for pod in pods:
        notes = pod["metadata"]["annotations"]
        names = [p["name"] for c in pod["spec"]["containers"] for p in c["ports"] if "name" in p]
        assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"
        assert names == [f"prom-{k}" for k in range(len(pod["spec"]["containers"]))]
        first = next(p for p in pod["spec"]["containers"][0]["ports"] if "name" in p)
        assert notes["prometheus.io/port"] == str(first["containerPort"])
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for obj in objects:
        kubernetes_validate.validate(obj, "1.31", strict=True)
    off = launching.plan("ppo", folder=str(tmp_path / "runs"), overrides=("run.prometheus=false",))
    assert not any(
        s.startswith("prom-") for p in launching.build_experiment(off).processes() for s in p.bound
    )


def _crash(run: Path, process: str, message: str) -> dict:
    try:
        raise ValueError(message)
    except ValueError as err:
        role, _, index = process.rpartition("-")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SYMPH_PROCESS", process)
            return crash.record(run, role, int(index), err)


def test_crash_records_and_the_crash_loop_watch(tmp_path):
    watch = crash.CrashWatch(tmp_path, limit=1, since=0.0)
    assert watch.poll() == [] and watch.summary() == "none" and watch.looping() is None
    _crash(tmp_path, "actor-0", "first")
    _crash(tmp_path, "buffer-0", "other")
    watch.poll()
    assert watch.looping() is None  # one crash each: within run.max_restarts=1
    _crash(tmp_path, "actor-0", "act() is broken")
    watch.poll()
    assert watch.looping()["process"] == "actor-0"
    report = watch.loop_report()
    assert "actor-0 (role actor, index 0) crashed 2 times, more than run.max_restarts=1" in report
    assert report.splitlines()[-1].strip() == "ValueError: act() is broken"
    assert str(tmp_path / "logs" / "actor-0.log") in report
    assert watch.summary() == "actor-0 x2: ValueError: act() is broken"
    assert crash.CrashWatch(tmp_path, limit=1, since=float("inf")).poll() == []


def test_monitor_stops_a_crash_looping_run_with_the_traceback(tmp_path):
    (tmp_path / "status.json").write_text(json.dumps({"global_step": 10, "total_steps": 1000}))
    processes = [
        SimpleNamespace(name=n, state="running", exit_code=None, restarts=r)
        for n, r in (("learner", 0), ("actor-0", 4))
    ]
    handle = SimpleNamespace(status=lambda: SimpleNamespace(processes=processes))
    out = io.StringIO()
    for _ in range(4):  # the default run.max_restarts is 3: the fourth crash is one too many
        _crash(tmp_path, "actor-0", "boom in act")
    assert monitor(handle, RunDir(tmp_path), out=out, live=False, crashes_since=0.0) == 1
    text = out.getvalue()
    assert "stopping the run: actor-0 (role actor, index 0) crashed 4 times" in text
    assert text.rstrip().endswith("ValueError: boom in act")


def test_a_failed_policy_learner_of_a_multiagent_run_is_shown_with_its_traceback(tmp_path):
    # a policy's processes run on RUN/policies/<P>/ and record their crashes there
    policy = tmp_path / "policies" / "r"
    policy.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYMPH_PROCESS", "learner-r")
        try:
            raise RuntimeError("batches never came")
        except RuntimeError as err:
            crash.record(policy, "policy-learner", 0, err)
    processes = [
        SimpleNamespace(name="learner", state="running", exit_code=None, restarts=0),
        SimpleNamespace(name="learner-r", state="failed", exit_code=1, restarts=0),
    ]
    handle = SimpleNamespace(status=lambda: SimpleNamespace(processes=processes))
    out = io.StringIO()
    assert monitor(handle, RunDir(tmp_path), out=out, live=False, crashes_since=0.0) == 1
    text = out.getvalue()
    assert "process(es) learner-r failed" in text
    assert "learner-r (role policy-learner, index 0) crashed" in text
    assert str(tmp_path / "logs" / "learner-r.log") in text  # where symphony writes its output
    assert text.rstrip().endswith("RuntimeError: batches never came")


def test_the_progress_line_counts_restarts_and_shows_the_latest_crash(tmp_path):
    (tmp_path / "status.json").write_text(json.dumps({"global_step": 10, "total_steps": 1000}))
    _crash(tmp_path, "actor-1", "once")
    states = iter(["running", "exited"])
    processes = [
        SimpleNamespace(name="actor-1", state="running", exit_code=None, restarts=1, last_end=None)
    ]

    def status():
        learner = SimpleNamespace(name="learner", state=next(states), exit_code=0, restarts=0)
        return SimpleNamespace(processes=[learner, *processes])

    out = io.StringIO()
    # the crash is older than the watch: restarts count it, the crash loop check does not
    assert monitor(SimpleNamespace(status=status), RunDir(tmp_path), out=out, live=False) == 0
    assert "restarts actor 1 | crashes none" in out.getvalue()


@pytest.mark.integration
def test_surreal_status_shows_crashes_per_role_and_the_last_traceback(tmp_path):
    plan = launching.plan("ppo", folder=str(tmp_path / "runs"))
    launching.create_run(plan)
    _crash(plan.run_dir.path, "actor-1", "the cause")
    out = subprocess.run(
        [sys.executable, "-m", "surreal", "status", str(plan.run_dir.path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "crashes    actor 1" in out.stdout
    assert "actor-1 (role actor, index 1) crashed 1 time;" in out.stdout
    assert out.stdout.rstrip().endswith("ValueError: the cause")


def test_run_wandb_usage_errors(monkeypatch):
    with pytest.raises(ConfigError, match="run.wandb must be one of online, offline, disabled"):
        wandb_sink.check("sometimes")
    monkeypatch.setattr(wandb_sink.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"run.wandb=offline needs wandb: pip install"):
        wandb_sink.check("offline")
    wandb_sink.check("disabled")  # never needs wandb


@pytest.mark.integration
def test_launch_with_an_unknown_wandb_mode_is_a_one_line_usage_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "surreal", "launch", "ppo", "--env", "gym:CartPole-v1"]
        + ["--set", "run.wandb=sometimes"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 2
    assert "run.wandb must be one of online, offline, disabled" in out.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.integration
def test_the_wandb_sink_writes_an_offline_run_whose_summary_reader_sees_it(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "runs" / "exp" / "t1"
    run.mkdir(parents=True)
    sink = wandb_sink.WandbSink(run, {"run": {"steps": 10}}, "offline", "surreal-test")
    sink.log("charts/eval_return", 10.0, 200)
    sink.log("charts/eval_return", 5.0, 100)  # reported late for an earlier step: kept
    sink.log("charts/episodic_return", 7.0, 300)
    sink.commit()
    sink.log("charts/eval_return", 42.5, 400)
    sink.commit()
    sink.log("charts/eval_return", 9.0, 350)  # a late one after the newest: not the final value
    sink.close(timeout_s=120)
    assert not sink.thread.is_alive() and sink.error is None, sink.error
    summary = wandb_sink.read_summary(tmp_path / "wb")
    assert {"charts/eval_return", "charts/episodic_return"} <= set(summary), summary
    assert summary["charts/eval_return"] == 42.5 and summary["charts/episodic_return"] == 7.0
    assert summary["global_step"] == 400
    assert [p.name for p in (tmp_path / "wb" / "wandb").glob("offline-run-*-exp-t1")]


def dashboard_metrics() -> set[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return set(re.findall(r"\bsurreal_[a-z_]+", " ".join(exprs)))


def test_the_dashboard_queries_only_series_the_processes_define():
    used = dashboard_metrics()
    assert len(used) >= 10
    assert used <= set(METRICS), used - set(METRICS)


@pytest.mark.integration
def test_plot_draws_a_runs_scalars_to_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from surreal.monitoring.plot import plot_run

    lines = [
        {"step": s, "name": n, "value": v, "time": 0}
        for s in (0, 100, 200)
        for n, v in (("charts/episodic_return", s / 10), ("charts/sps", 50.0))
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n{bad")
    drawn = plot_run(tmp_path, tmp_path / "run.png")
    assert drawn == ["charts/episodic_return", "charts/sps"]
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
