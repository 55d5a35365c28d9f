"""Team namespace mode: experiments of several users inside one existing namespace, namespaced
RBAC only (the shipped Role grants every call the mode makes, and nothing cluster-wide)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import yaml

pytest.importorskip("kmock")

from symphony import Experiment, Process, RestartPolicy  # noqa: E402
from symphony.errors import BackendError, LaunchRefused  # noqa: E402
from symphony.kube.backend import KubeBackend  # noqa: E402
from symphony.kube.testing_kube import KubeEndpoint  # noqa: E402
from symphony.kube.testing_kube_controllers import Controllers  # noqa: E402
from symphony.records import Records  # noqa: E402

pytestmark = pytest.mark.timeout(120)
RBAC = Path(__file__).resolve().parents[2] / "symphony" / "schemas" / "team-namespace-rbac.yaml"
VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]


def experiment(name: str) -> Experiment:
    server = Process("server", ["serve"], restart=RestartPolicy("always")).binds("echo")
    client = Process("client", ["ask"], restart=RestartPolicy("on-failure")).connects("echo")
    return Experiment(name, image="busybox").add(server, client)


def rbac() -> list[dict]:
    return list(yaml.safe_load_all(RBAC.read_text()))


def test_the_rbac_yaml_is_namespaced_and_strictly_valid():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objects = rbac()
    assert [o["kind"] for o in objects] == ["Role", "RoleBinding"]
    for version in VERSIONS:
        for obj in objects:
            assert kubernetes_validate.validate(obj, version, strict=True) == version


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<res>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)


def _allowed(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


def test_two_users_share_a_team_namespace_apart_and_the_role_allows_every_call(
    tmp_path, monkeypatch
):
    with KubeEndpoint() as endpoint:
        endpoint.add_namespace("team-a")  # the admin's
        endpoint.requests.clear()

        def user(name):
            monkeypatch.setenv("SYMPHONY_OWNER", name)
            records = Records(tmp_path / name)
            return records, KubeBackend(
                records, host=endpoint.url, team_namespace="team-a", poll_s=0.05, delete_wait_s=5
            )

        alice_records, alice = user("alice")
        exp_a = experiment("exp-a")
        alice.launch(exp_a, alice_records.create(exp_a, "kube"))
        bob_records, bob = user("bob")
        exp_b = experiment("exp-b")
        bob.launch(exp_b, bob_records.create(exp_b, "kube"))

        def objects():
            return {
                (o.raw["kind"], key[2]): o.raw["metadata"]
                .get("labels", {})
                .get("symphony.io/owner")
                for key, o in endpoint.kmock.objects.items()
                if not o.deleted and key[1] == "team-a"
            }

        before = objects()
        assert ("ConfigMap", "symphony-exp-a") in before and ("Service", "exp-a-echo") in before
        assert before["Deployment", "exp-a-server"] == "alice"
        assert before["Deployment", "exp-b-server"] == "bob"
        assert set(endpoint.namespaces) == {"team-a"}  # no namespace was made

        again = experiment("exp-a")
        with pytest.raises(LaunchRefused, match="already runs in namespace 'team-a' .owner alice"):
            bob.launch(again, bob_records.create(again, "kube"))
        assert objects() == before

        Controllers(endpoint).reconcile()
        status = alice.describe(alice_records.load("exp-a"))
        assert [(p.name, p.state) for p in status.processes] == [
            ("server", "running"),
            ("client", "running"),
        ]
        assert all("exp-a-" in p.location for p in status.processes)
        env = {
            e["name"]: e["value"]
            for e in next(
                o.raw
                for k, o in endpoint.kmock.objects.items()
                if k[2] == "exp-a-client" and not o.deleted
            )["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["SYMPH_ECHO_HOST"] == "exp-a-echo.team-a.svc"

        rows = {
            (r.name, r.owner, r.status)
            for r in KubeBackend(
                Records(tmp_path / "carol"), host=endpoint.url, team_namespace="team-a"
            ).list()
        }
        assert rows == {("exp-a", "alice", "running"), ("exp-b", "bob", "running")}

        bob.delete(bob_records.load("exp-b"))
        after = objects()
        assert {k for k in after if "exp-b" in k[1]} == set()
        assert after == {k: v for k, v in before.items() if "exp-b" not in k[1]} | {
            k: v for k, v in after.items() if k[0] == "Pod"
        }
        assert alice.describe(alice_records.load("exp-a")).status == "running"

        assert_the_role_allows(endpoint.requests)


def assert_the_role_allows(requests: list[tuple[str, str]]) -> None:
    """Every API request served was namespaced in team-a and allowed by the shipped Role."""
    rules = rbac()[0]["rules"]
    for method, path in requests:
        match = _PATH.match(path)
        assert match and match["ns"] == "team-a", f"{method} {path} is not namespaced"
        resource = match["res"] + (f"/{match['sub']}" if match["sub"] else "")
        verb = {"POST": "create", "DELETE": "delete"}.get(
            method, "get" if match["name"] else "list"
        )
        assert _allowed(rules, match["group"] or "", resource, verb), (method, path)


def test_secrets_from_files_are_the_experiments_own_and_an_admins_missing_one_is_refused(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("SYMPHONY_OWNER", "alice")
    with KubeEndpoint() as endpoint:
        endpoint.add_namespace("team-a")  # the admin's
        endpoint.requests.clear()
        records = Records(tmp_path / "alice")

        def launch(name: str, secret: str, shared: bool = False):
            key = tmp_path / name / "key.txt"
            key.parent.mkdir()
            key.write_text(secret)
            exp = experiment(name)
            exp.processes()[1].secrets = ["keys"] + (["shared"] if shared else [])
            backend = KubeBackend(
                records,
                host=endpoint.url,
                team_namespace="team-a",
                secret_files={"keys": str(key.parent)},
            )
            backend.launch(exp, records.create(exp, "kube"))
            return backend

        def secrets():
            return {
                s["metadata"]["name"]: base64.b64decode(s["data"]["key.txt"]).decode()
                for s in endpoint.stored("Secret")
            }

        alice = launch("exp-a", "a-secret")
        launch("exp-b", "b-secret")
        assert secrets() == {"exp-a-keys": "a-secret", "exp-b-keys": "b-secret"}
        client = next(j for j in endpoint.stored("Job") if j["metadata"]["name"] == "exp-a-client")[
            "spec"
        ]["template"]["spec"]
        assert {
            "name": "secret-keys",
            "secret": {"secretName": "exp-a-keys", "defaultMode": 0o440},
        } in (client["volumes"])
        mount = {
            "name": "secret-keys",
            "mountPath": "/var/run/secrets/symphony/keys",
            "readOnly": True,
        }
        assert mount in client["containers"][0]["volumeMounts"]

        # a Secret the admin was to create, and did not: refused, nothing of exp-c made
        before = len(endpoint.kmock.objects)
        with pytest.raises(BackendError, match="secret 'shared' is not in team namespace 'team-a'"):
            launch("exp-c", "c-secret", shared=True)
        assert len(endpoint.kmock.objects) == before

        alice.delete(records.load("exp-a"))
        assert secrets() == {"exp-b-keys": "b-secret"}
        assert_the_role_allows(endpoint.requests)
