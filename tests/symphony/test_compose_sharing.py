"""Two users, one docker engine: a second launch of a taken name is refused and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.records import Records
from symphony.spec import Experiment, Process
from symphony.testing import scaled
from tests.symphony import docker_engine as engine
from tests.symphony.docker_engine import DockerEngine

docker_engine, busybox_image = engine.docker_engine, engine.busybox_image
pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]
ROOT = Path(__file__).resolve().parents[2]


def _user(tmp_path: Path, name: str) -> dict[str, str]:
    """The environment of another user: own HOME, USER, state directory and owner name."""
    home = tmp_path / name
    home.mkdir()
    return {
        "HOME": str(home),
        "USER": name,
        "LOGNAME": name,
        "SYMPHONY_HOME": str(home / ".symphony"),
        "SYMPHONY_CONFIG": str(home / "none.yaml"),
        "SYMPHONY_OWNER": name,
    }


def _symphony(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env={**os.environ, **env},
        cwd=ROOT,
    )


def _state(engine: DockerEngine) -> dict[str, tuple[str, str, str]]:
    """container id -> (owner label, status, start time) of the experiment's containers."""
    found = engine.client.containers.list(
        all=True, filters={"label": "io.symphony.experiment=shared"}
    )
    return {
        c.id: (c.labels["io.symphony.owner"], c.status, c.attrs["State"]["StartedAt"])
        for c in found
    }


def test_a_second_users_launch_and_delete_of_a_taken_name_are_refused(
    tmp_path: Path, docker_engine: DockerEngine, busybox_image: str
) -> None:
    exp = Experiment("shared", image=busybox_image).add(
        Process("a", ["sleep", "300"]), Process("b", ["sleep", "300"])
    )
    spec = tmp_path / "shared.yaml"
    spec.write_text(exp.to_yaml())
    alice, bob = _user(tmp_path, "alice"), _user(tmp_path, "bob")
    opts = ["-b", "compose", "-d", "-o", "network=host", "-o", "stop_grace_s=1"]
    launched = _symphony("launch", str(spec), *opts, env=alice)
    assert launched.returncode == 0, launched.stderr
    try:
        before = _state(docker_engine)
        assert len(before) == 2
        assert {(o, s) for o, s, _ in before.values()} == {("alice", "running")}

        refused = _symphony("launch", str(spec), *opts, env=bob)
        assert refused.returncode == 1
        assert "already has 2 container(s)" in refused.stderr and "alice" in refused.stderr
        assert _state(docker_engine) == before  # same ids, still running, not restarted
        assert Records(bob["SYMPHONY_HOME"]).all() == []  # bob's refused launch left no record

        for command in (
            ["delete", "shared", "-b", "compose"],
            ["exec", "shared", "a", "-b", "compose", "--", "true"],
        ):
            denied = _symphony(*command, env=bob)
            assert denied.returncode == 1, denied.stdout
            assert "belongs to alice, not to bob" in denied.stderr and "--force" in denied.stderr
            assert _state(docker_engine) == before

        for who, args in ((alice, ["list"]), (bob, ["list", "-b", "compose"])):
            rows = [line.split()[:4] for line in _symphony(*args, env=who).stdout.splitlines()]
            assert ["shared", "alice", "compose", "running"] in rows
    finally:
        deleted = _symphony("delete", "shared", env=alice)
    assert deleted.returncode == 0, deleted.stderr
    assert _state(docker_engine) == {}
