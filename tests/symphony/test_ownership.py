"""Ownership: who the owner is, reserved names, and two users on one kube cluster (emulated)."""

from __future__ import annotations

import pwd
from pathlib import Path

import pytest
from click.testing import CliRunner

from symphony.cli import main
from symphony.errors import NotOwner, SpecError
from symphony.launcher import launch
from symphony.ownership import check_experiment_name, check_owner, current_owner
from symphony.records import Records
from symphony.spec import Experiment, Process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "03_kube"


def test_the_owner_is_the_login_name_of_the_uid_not_the_user_variable(monkeypatch, records):
    monkeypatch.delenv("SYMPHONY_OWNER", raising=False)
    monkeypatch.setenv("USER", "mallory")
    monkeypatch.setenv("LOGNAME", "mallory")
    import os

    expected = pwd.getpwuid(os.getuid()).pw_name
    assert current_owner() == expected
    record = records.create(Experiment("x").add(Process("p", ["true"])), "local")
    assert (record.owner, record.owner_uid) == (expected, os.getuid())
    assert Records(records.home).load("x").owner_uid == os.getuid()
    monkeypatch.setenv("SYMPHONY_OWNER", "svc-team-a")
    assert current_owner() == "svc-team-a"


def test_another_owners_experiment_needs_force(monkeypatch):
    monkeypatch.setenv("SYMPHONY_OWNER", "bob")
    with pytest.raises(NotOwner, match="belongs to alice, not to bob.*--force"):
        check_owner("alice", "delete", "exp")
    check_owner("alice", "delete", "exp", force=True)
    check_owner("bob", "delete", "exp")


@pytest.mark.parametrize(
    "name", ["default", "kube-system", "kube-public", "kube-node-lease", "kube-x"]
)
def test_reserved_names_are_refused_before_anything_starts(name, records):
    with pytest.raises(SpecError, match="reserved name"):
        check_experiment_name(name)
    with pytest.raises(SpecError, match="reserved name"):
        launch(Experiment(name).add(Process("p", ["true"])), "local", records=records)
    assert records.all() == []
    spec = records.home.parent / "spec.yaml"
    spec.write_text(Experiment("fine").add(Process("p", ["true"])).to_yaml())
    result = CliRunner().invoke(main, ["launch", str(spec), "--name", name, "--dry-run"])
    assert result.exit_code == 2 and "reserved name" in result.output


def _as(monkeypatch, tmp_path: Path, user: str) -> Path:
    """Make this process look like `user`: own HOME, USER, state directory and owner."""
    home = tmp_path / user
    home.mkdir(exist_ok=True)
    for key, value in {
        "HOME": str(home),
        "USER": user,
        "LOGNAME": user,
        "SYMPHONY_HOME": str(home / ".symphony"),
        "SYMPHONY_CONFIG": str(home / "none.yaml"),
        "SYMPHONY_OWNER": user,
    }.items():
        monkeypatch.setenv(key, value)
    return home / ".symphony"


def test_two_users_one_name_on_kube(monkeypatch, tmp_path):
    pytest.importorskip("kmock")
    from symphony.kube.testing_kube import KubeEndpoint

    def run(*args):
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    with KubeEndpoint() as endpoint:
        monkeypatch.setenv("SYMPHONY_KUBE_HOST", endpoint.url)
        _as(monkeypatch, tmp_path, "alice")
        assert run("launch", str(EXAMPLES / "echo.py"), "-b", "kube", "-d").exit_code == 0
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "server-5d8",
                "namespace": "echo",
                "uid": "pod-uid-1",
                "labels": {"symphony.io/experiment": "echo", "symphony.io/group": "server"},
            },
            "spec": {"containers": [{"name": "server", "image": "i"}]},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "server",
                        "ready": True,
                        "restartCount": 0,
                        "image": "i",
                        "imageID": "",
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
            },
        }
        endpoint.add_pod(pod)

        def snapshot():
            objects = {
                key: obj.raw for key, obj in endpoint.kmock.objects.items() if not obj.deleted
            }
            return endpoint.namespaces.get("echo"), objects

        before = snapshot()
        assert before[0]["metadata"]["labels"]["symphony.io/owner"] == "alice"

        bob_home = _as(monkeypatch, tmp_path, "bob")
        refused = run("launch", str(EXAMPLES / "echo.py"), "-b", "kube", "-d")
        assert refused.exit_code == 1
        assert "namespace 'echo' already exists" in refused.output and "alice" in refused.output
        assert snapshot() == before  # same namespace, same objects, same pod: nothing touched
        assert before[0].get("status", {}).get("phase") != "Terminating"
        assert Records(bob_home).all() == []
        for args in (
            ["delete", "echo", "-b", "kube"],
            ["exec", "echo", "server", "-b", "kube", "--", "true"],
        ):
            denied = run(*args)
            assert denied.exit_code == 1
            assert "belongs to alice, not to bob" in denied.output and "--force" in denied.output
            assert snapshot() == before

        endpoint.exec_handler = lambda *args: ("bob was here\n", "", 0)
        forced = run("exec", "echo", "server", "-b", "kube", "--force", "--", "true")
        assert forced.exit_code == 0 and snapshot() == before  # --force overrides the check

        _as(monkeypatch, tmp_path, "alice")
        listed = run("list", "--all")
        described = run("describe", "echo")
        rows = [line.split()[:4] for line in listed.output.splitlines()]
        assert ["echo", "alice", "kube", "running"] in rows
        assert "status=running" in described.output and "server-5d8" in described.output
        assert run("delete", "echo").exit_code == 0
        assert "echo" not in endpoint.namespaces
