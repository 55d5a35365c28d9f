"""The compose backend on a real docker engine (host network): the ring example, failures, cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from symphony.backends.compose import ComposeBackend
from symphony.backends.compose_schema import schema_errors
from symphony.build import build_image
from symphony.build_config import BuildConfig
from symphony.build_context import ContextEntry
from symphony.cli import main
from symphony.errors import BackendError
from symphony.launcher import launch
from symphony.records import Records, launcher_mark
from symphony.spec import Experiment, Process, ProcessGroup, RestartPolicy
from symphony.testing import scaled
from tests.symphony import docker_engine as engine
from tests.symphony.docker_engine import DockerEngine

docker_engine, busybox_image, python_image = (
    engine.docker_engine,
    engine.busybox_image,
    engine.python_image,
)
pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]
ROOT = Path(__file__).resolve().parents[2]
RING = ROOT / "examples" / "01_ring"


def _containers(engine: DockerEngine, experiment: str) -> list:
    return engine.client.containers.list(
        all=True, filters={"label": f"io.symphony.experiment={experiment}"}
    )


def _until(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)  # polling with a deadline
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def ring_image(docker_engine: DockerEngine, python_image: str, tmp_path: Path) -> str:
    """The local Python image plus the ring example at the path its spec names as cwd."""
    (tmp_path / "Dockerfile").write_text(f"FROM {python_image}\nCOPY . /\n")
    config = BuildConfig(
        tag="symphony-test/ring:latest",
        dockerfile=tmp_path / "Dockerfile",
        context=(ContextEntry.of(RING, str(RING).lstrip("/")),),
    )
    return build_image(config, docker_engine.client).tag


def _symphony(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env={**os.environ, **env},
        cwd=ROOT,
    )


def test_ring_example_runs_under_compose_and_is_managed_by_the_cli(
    tmp_path: Path, docker_engine: DockerEngine, ring_image: str
) -> None:
    env = {"SYMPHONY_HOME": str(tmp_path / "home"), "RING_ROUNDS": "0"}
    launched = _symphony(
        "launch",
        str(RING / "ring.py"),
        "--backend",
        "compose",
        "--detach",
        "-o",
        "network=host",
        "-o",
        f"image={ring_image}",
        env=env,
    )
    assert launched.returncode == 0, launched.stderr
    try:
        record = Records(tmp_path / "home").load("ring")
        image_id = docker_engine.client.images.get(ring_image).id
        assert record.data["images"][ring_image]["id"] == image_id
        assert Path(record.data["launch_files"][0]).read_text() == (RING / "ring.py").read_text()
        assert yaml.safe_load(Path(record.data["compose_file"]).read_text())["services"].keys() == {
            "node-0",
            "node-1",
            "node-2",
        }

        listing = _symphony("list", env=env)
        assert listing.returncode == 0 and "ring" in listing.stdout and "compose" in listing.stdout
        # The counter goes round: node 2 passes counts it got from node 1 back to node 0.
        _until(
            lambda: "node 0 got count" in _symphony("logs", "ring", "node-0", env=env).stdout,
            what="the counter to come round to node 0",
        )
        described = _symphony("describe", "ring", env=env)
        assert described.returncode == 0, described.stderr
        for node in ("node-0", "node-1", "node-2"):
            line = next(ln for ln in described.stdout.splitlines() if ln.split()[:1] == [node])
            assert "running" in line
        assert len(_containers(docker_engine, "ring")) == 3
        executed = _symphony(
            "exec", "ring", "node-1", "--", "sh", "-c", "echo $SYMPH_PROCESS; exit 3", env=env
        )
        assert executed.returncode == 3 and executed.stdout == "node-1\n"
    finally:
        deleted = _symphony("delete", "ring", env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert _containers(docker_engine, "ring") == []
    assert "ring" not in _symphony("list", "--all", env=env).stdout


def test_failed_process_shows_failed_with_logs_and_groups_share_ipc(
    tmp_path: Path, docker_engine: DockerEngine, busybox_image: str
) -> None:
    writer = Process("writer", "echo hello > /dev/shm/token && exec sleep 60")
    reader = Process(
        "reader",
        "for i in $(seq 200); do [ -f /dev/shm/token ] && cat /dev/shm/token "
        "&& exit 0; sleep 0.1; done; echo no token; exit 1",
    )
    bad = Process("bad", "echo going down; echo oops >&2; exit 3")
    flaky = Process(
        "flaky", "echo try; exit 1", restart=RestartPolicy("on-failure", max_restarts=2)
    )
    exp = Experiment("mixed", image=busybox_image).add(
        ProcessGroup("pair", [writer, reader]), bad, flaky
    )
    records = Records(tmp_path / "home")
    handle = launch(exp, "compose", records=records, network="host")
    try:
        ended = ("reader", "bad", "flaky")
        status = _until(
            lambda: (
                (s := handle.status())
                and all(
                    s.process(n).state in ("exited", "failed")
                    and s.process(n).restarts >= (2 if n == "flaky" else 0)
                    for n in ended
                )
                and s
            ),
            what="reader, bad and flaky to end",
        )
        assert status.process("bad").state == "failed" and status.process("bad").exit_code == 3
        assert status.process("reader").state == "exited"  # it read the writer's shared memory
        assert status.process("writer").state == "running"
        assert status.process("flaky").state == "failed" and status.process("flaky").restarts == 2
        assert status.status == "running"
        assert sorted(handle.logs("bad").splitlines()) == ["going down", "oops"]  # stdout + stderr
        assert handle.logs("reader") == "hello\n"
        assert handle.logs("flaky").count("try") == 3
        assert handle.backend.exec(handle.record, "writer", ["cat", "/dev/shm/token"]) == 0
        assert handle.backend.exec(handle.record, "writer", ["sh", "-c", "exit 5"]) == 5
        assert len(_containers(docker_engine, "mixed")) == 5  # four processes and the group sandbox
        # A teammate with another state directory on the same engine sees it through the labels.
        seen = ComposeBackend(records=Records(tmp_path / "elsewhere")).list()
        assert [(s.name, s.owner, s.processes) for s in seen] == [("mixed", handle.record.owner, 4)]
    finally:
        handle.stop()
    assert _containers(docker_engine, "mixed") == []
    # the containers are gone; what they printed stays (`symphony logs` of a stopped experiment)
    assert sorted(handle.logs("bad").splitlines()) == ["going down", "oops"]
    assert handle.logs("flaky").count("try") == 3 and handle.logs("reader", tail=1) == "hello\n"


def test_attached_ring_runs_to_the_end_and_leaves_its_record(
    tmp_path: Path, docker_engine: DockerEngine, ring_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RING_ROUNDS", "2")
    sys.path.insert(0, str(RING))
    try:
        from ring import make_experiment
    finally:
        sys.path.remove(str(RING))
    handle = launch(
        make_experiment(),
        "compose",
        detach=False,
        records=Records(tmp_path / "home"),
        network="host",
        image=ring_image,
    )
    try:
        status = handle.status()
        assert status.status == "finished" and handle.record.data["exit_code"] == 0
        assert [p.exit_code for p in status.processes] == [0, 0, 0]
        assert "got stop at count 6" in handle.logs("node-0")
    finally:
        handle.stop()
    assert _containers(docker_engine, "ring") == []


def test_dry_run_prints_a_valid_compose_file_and_starts_nothing(
    tmp_path: Path, docker_engine: DockerEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("backend_options:\n  compose: {network: host, image: none/such:1}\n")
    monkeypatch.setenv("SYMPHONY_CONFIG", str(config))
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(
        main, ["launch", str(RING / "ring.py"), "--backend", "compose", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    compose = yaml.safe_load(result.output)
    assert schema_errors(compose) == [] and set(compose["services"]) == {
        "node-0",
        "node-1",
        "node-2",
    }
    assert compose["services"]["node-0"]["network_mode"] == "host"
    assert _containers(docker_engine, "ring") == [] and Records(tmp_path / "home").all() == []
    assert ComposeBackend.name == "compose"


def test_engine_scripts_leave_no_process_or_folder_behind(
    tmp_path: Path, docker_engine: DockerEngine
) -> None:
    """A second engine (the session's holds the shared data-root, so this one gets a throwaway
    one) runs a container; dockerd-down.sh stops the container, the engine and its helpers."""
    import psutil

    up = subprocess.run(
        ["bash", str(engine.UP)],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env={**os.environ, "SYMPHONY_DOCKERD_DATA": str(tmp_path / "data")},
    )
    assert up.returncode == 0, up.stderr
    env = dict(line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines())
    run_dir = Path(env["SYMPHONY_DOCKERD_DIR"])
    pid = int((run_dir / "dockerd.pid").read_text())
    made = subprocess.run(
        ["bash", str(engine.MAKE_BASE), "busybox", "t/bb:1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert made.returncode == 0, made.stderr
    import docker

    client = docker.DockerClient(base_url=env["DOCKER_HOST"])
    client.containers.run("t/bb:1", ["sleep", "300"], network_mode="none", detach=True, init=True)
    family = [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    client.close()
    down = subprocess.run(
        ["bash", str(engine.DOWN), str(run_dir)], capture_output=True, text=True, timeout=90
    )
    assert down.returncode == 0, down.stderr
    assert not run_dir.exists()
    assert [
        p for p in family if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
    ] == []


def test_a_missing_image_fails_before_anything_starts(
    tmp_path: Path, docker_engine: DockerEngine
) -> None:
    records = Records(tmp_path / "home")
    exp = Experiment("no-image", image="symphony-test/never-built:1").add(Process("p", ["true"]))
    with pytest.raises(BackendError, match="symphony build"):
        launch(exp, "compose", records=records, network="host")
    assert records.all() == [] and _containers(docker_engine, "no-image") == []


def test_a_launch_whose_launcher_died_before_up_shows_stopped_not_pending(
    tmp_path: Path, docker_engine: DockerEngine
) -> None:
    """Before: `symphony list` showed it `launching`, 0/2 running, for good."""
    env = {"SYMPHONY_HOME": str(tmp_path / "home")}
    records = Records(tmp_path / "home")
    record = records.create(
        Experiment("cut").add(Process("p", ["true"]), Process("q", ["true"])), "compose"
    )
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    record.update(data={**record.data, "launcher": launcher_mark(gone.pid)})
    status = ComposeBackend(records=records).describe(records.load("cut"))
    assert status.status == "stopped" and {p.state for p in status.processes} == {"stopped"}
    assert "no experiments running" in _symphony("list", env=env).stdout
    described = _symphony("describe", "cut", env=env).stdout
    assert "interrupted: its launcher stopped" in described and "symphony delete cut" in described
    assert _symphony("delete", "cut", env=env).returncode == 0
    assert records.all() == []


LOOP = ["python", "-c", "import time\nwhile True: time.sleep(1)"]


@pytest.mark.parametrize("code", [0, 75], ids=["finished", "final-code"])
def test_the_others_stop_when_the_ends_with_process_ends_with_no_launcher_watching(
    tmp_path: Path, docker_engine: DockerEngine, python_image: str, code: int
) -> None:
    """Detached, nobody watching: the learner's end (0, or a final code) stops the rest, and a
    final code is never run again though docker's on-failure starts its container again."""
    learner = Process(
        "learner",
        ["python", "-c", f"print('learner ran', flush=True); raise SystemExit({code})"],
        restart=RestartPolicy("on-failure", max_restarts=2, final_codes=(75,)),
    )
    actor = Process("actor-0", LOOP, restart=RestartPolicy("always"))
    replay = Process("replay", LOOP, restart=RestartPolicy("on-failure", max_restarts=3))
    exp = Experiment("ends", image=python_image, ends_with=["learner"]).add(learner, actor, replay)
    handle = launch(exp, "compose", records=Records(tmp_path / "home"), network="host")
    try:
        try:
            status = _until(
                lambda: (
                    (s := handle.status())
                    and all(p.state in ("exited", "failed") for p in s.processes)
                    and s.process("learner").restarts >= (2 if code else 0)
                    and s
                ),
                timeout=scaled(60),
                what="every process to end",
            )
        except AssertionError as err:
            said = {n: handle.logs(n)[-2000:] for n in ("learner", "actor-0", "replay")}
            raise AssertionError(f"{err}: {handle.status()}; logs {said}") from None
        for name in ("actor-0", "replay"):
            assert status.process(name).exit_code == 0 and status.process(name).restarts == 0
            assert "says the experiment is over" in handle.logs(name)
        logs = handle.logs("learner")
        assert logs.count("learner ran") == 1, logs
        assert status.process("learner").exit_code == code
        if code:
            assert logs.count("not started again") == 2 and status.status == "failed"
        else:
            assert "the others were told" in logs and status.status == "finished"
    finally:
        handle.stop()
    assert _containers(docker_engine, "ends") == []
