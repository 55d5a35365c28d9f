"""The kube backend's API calls against a running endpoint on 127.0.0.1.

`symphony.kube.testing_kube.KubeEndpoint` serves kmock's Kubernetes emulator for namespaced
objects plus a small emulation of Namespaces and pod logs (which kmock lacks); no controllers or
kubelets run, so tests add the pods they would create. Websocket exec is not exercised here.
"""

import base64
import importlib.util
import threading
from pathlib import Path

import pytest

pytest.importorskip("kmock")
pytest.importorskip("kubernetes")

from symphony.errors import BackendError, LaunchRefused  # noqa: E402
from symphony.kube.backend import KubeBackend  # noqa: E402
from symphony.kube.naming import LABEL_EXPERIMENT, LABEL_GROUP, LABEL_OWNER
from symphony.kube.testing_kube import KubeEndpoint  # noqa: E402
from symphony.records import Records  # noqa: E402

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "03_kube"


def _example(name):
    spec = importlib.util.spec_from_file_location(f"kube_api_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def alice(monkeypatch):
    """This test process launches as alice (`symphony.ownership.OWNER_ENV`)."""
    monkeypatch.setenv("SYMPHONY_OWNER", "alice")


@pytest.fixture
def endpoint():
    with KubeEndpoint() as ep:
        yield ep


@pytest.fixture
def records(tmp_path):
    return Records(tmp_path / "state")


SERVER_SET = ("uid", "creationTimestamp")


def stored(endpoint, namespace):
    """kind/name -> object, for every namespaced object the endpoint holds in `namespace`, as
    it was sent (without what the API server adds: `SERVER_SET`)."""
    out = {}
    for key, obj in endpoint.kmock.objects.items():
        if key[1] == namespace and not obj.deleted:
            meta = {k: v for k, v in obj.raw["metadata"].items() if k not in SERVER_SET}
            out[f"{obj.raw['kind']}/{key[2]}"] = {**obj.raw, "metadata": meta}
    return out


def pod(ns, name, group, containers, node="node-1"):
    """A pod as its controller and kubelet would leave it: containers = {name: state dict}."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                LABEL_EXPERIMENT: ns,
                LABEL_GROUP: group,
                "app.kubernetes.io/managed-by": "symphony",
            },
        },
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [{"name": c, "image": "i"} for c in containers],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": c,
                    "ready": True,
                    "restartCount": restarts,
                    "image": "i",
                    "imageID": "",
                    "state": state,
                }
                for c, (state, restarts) in containers.items()
            ],
        },
    }


def launch(endpoint, records, module_name, owner="alice", **options):
    module = _example(module_name)
    backend = KubeBackend(
        records,
        host=endpoint.url,
        secrets=getattr(module, "SECRETS", {}),
        poll_s=0.05,
        **options,
    )
    exp = module.make_experiment()
    record = records.create(exp, "kube", owner=owner)
    backend.launch(exp, record)
    return backend, exp, record


def test_launch_creates_exactly_the_rendered_objects_and_copies_secrets_by_value(
    endpoint, records, tmp_path
):
    key = tmp_path / "key.json"
    key.write_text("top-secret-value")
    backend, exp, record = launch(
        endpoint,
        records,
        "ppo_gpu",
        cluster_spec=str(EXAMPLES / "cloudwise.yaml"),
        secret_files={"gcs-credentials": str(key)},
    )
    manifests = backend.manifests(exp)
    ns = manifests[0]["metadata"]["name"]
    assert endpoint.namespaces[ns]["metadata"]["labels"] == manifests[0]["metadata"]["labels"]
    objects = stored(endpoint, ns)
    secret = objects.pop("Secret/gcs-credentials")
    assert base64.b64decode(secret["data"]["key.json"]) == b"top-secret-value"
    assert objects == {f"{m['kind']}/{m['metadata']['name']}": m for m in manifests[1:]}
    assert record.data["namespace"] == ns and records.load(exp.name).status == "running"


def test_secrets_are_copied_from_the_secrets_namespace(endpoint, records):
    from symphony.kube.api import KubeApi

    api = KubeApi.connect(host=endpoint.url)
    api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "gcs-credentials", "namespace": "symphony-secrets"},
            "data": {"key.json": base64.b64encode(b"v").decode()},
        }
    )
    launch(endpoint, records, "ppo_gpu")
    assert stored(endpoint, "ppo-gpu")["Secret/gcs-credentials"]["data"] == {"key.json": "dg=="}


def test_a_missing_secret_fails_the_launch_and_removes_the_namespace(endpoint, records):
    with pytest.raises(BackendError, match="create it there"):
        launch(endpoint, records, "ppo_gpu")
    assert (
        "ppo-gpu" not in endpoint.namespaces
        or endpoint.namespaces["ppo-gpu"]["status"]["phase"] == "Terminating"
    )
    assert stored(endpoint, "ppo-gpu") == {}


def test_launching_into_an_existing_namespace_is_refused(endpoint, records, tmp_path):
    launch(endpoint, records, "echo")
    with pytest.raises(LaunchRefused, match="already exists.*of alice.*left as it is"):
        launch(endpoint, Records(tmp_path / "other"), "echo", owner="bob")


def test_describe_reports_container_state_restarts_pod_and_node(endpoint, records):
    backend, exp, record = launch(endpoint, records, "echo")
    assert {p.state for p in backend.describe(record).processes} == {"pending"}
    endpoint.add_pod(
        pod(
            "echo",
            "server-7f9",
            "server",
            {"server": ({"running": {"startedAt": "2026-01-01T00:00:00Z"}}, 2)},
        )
    )
    endpoint.add_pod(
        pod(
            "echo",
            "client-x2",
            "client",
            {"client": ({"terminated": {"exitCode": 0, "reason": "Completed"}}, 0)},
            node="node-2",
        )
    )
    status = backend.describe(record)
    server, client = status.process("server"), status.process("client")
    assert (server.state, server.restarts, server.location) == (
        "running",
        2,
        "pod server-7f9 on node-1",
    )
    assert (client.state, client.exit_code, client.location) == (
        "exited",
        0,
        "pod client-x2 on node-2",
    )
    assert status.details["pods"] == {"server-7f9": "Running", "client-x2": "Running"}


def test_list_shows_every_symphony_namespace_with_its_owner(endpoint, records, tmp_path):
    launch(endpoint, records, "echo")
    teammate = KubeBackend(Records(tmp_path / "bob"), host=endpoint.url, namespace="bob-echo")
    exp = _example("echo").make_experiment()
    teammate.launch(exp, Records(tmp_path / "bob").create(exp, "kube", owner="bob"))
    endpoint.add_pod(pod("echo", "server-1", "server", {"server": ({"running": {}}, 0)}))
    rows = {
        (r.name, r.owner): r for r in KubeBackend(records, host=endpoint.url, poll_s=0.05).list()
    }
    assert set(rows) == {("echo", "alice"), ("echo", "bob")}
    assert (rows["echo", "alice"].processes, rows["echo", "alice"].running) == (2, 1)


def test_a_teammates_experiment_is_found_without_a_record(endpoint, records, tmp_path):
    launch(endpoint, Records(tmp_path / "bob"), "echo")
    endpoint.add_pod(pod("echo", "server-1", "server", {"server": ({"running": {}}, 0)}))
    from symphony.records import ExperimentRecord

    bare = ExperimentRecord("echo", "kube", "bob", 0.0)
    status = KubeBackend(records, host=endpoint.url).describe(bare)
    assert status.process("server").state == "running" and status.details["namespace"] == "echo"


def test_logs_tail_and_follow_until_the_container_ends(endpoint, records):
    backend, exp, record = launch(endpoint, records, "echo")
    endpoint.add_pod(pod("echo", "server-1", "server", {"server": ({"running": {}}, 0)}))
    endpoint.write_log("echo", "server-1", "server", "one\ntwo\nthree\n")
    assert list(backend.logs(record, "server")) == ["one\n", "two\n", "three\n"]
    assert list(backend.logs(record, "server", tail=1)) == ["three\n"]
    got, started = [], threading.Event()

    def follow():
        for line in backend.logs(record, "server", follow=True, tail=1):
            got.append(line)
            started.set()

    reader = threading.Thread(target=follow)
    reader.start()
    assert started.wait(10)  # connected: the tail arrived; what follows streams in
    endpoint.write_log("echo", "server-1", "server", "four\nfive\n")
    endpoint.end_log("echo", "server-1", "server")
    reader.join(10)
    assert not reader.is_alive() and got == ["three\n", "four\n", "five\n"]


def test_logs_of_a_process_without_a_pod_say_what_to_do(endpoint, records):
    backend, _, record = launch(endpoint, records, "echo")
    with pytest.raises(BackendError, match="symphony describe echo"):
        list(backend.logs(record, "server"))


def test_delete_removes_the_namespace_and_waits_until_it_is_gone(endpoint, records):
    backend, _, record = launch(endpoint, records, "echo")
    endpoint.add_pod(pod("echo", "server-1", "server", {"server": ({"running": {}}, 0)}))
    backend.delete(record)
    assert "echo" not in endpoint.namespaces and stored(endpoint, "echo") == {}
    backend.delete(record, force=True)  # already gone: force does not fail
    (row,) = KubeBackend(records, host=endpoint.url, poll_s=0.05).list()  # the record stays
    assert (
        (row.name, row.status) == ("echo", backend.describe(record).status) == ("echo", "unknown")
    )
    records.remove("echo")  # what `symphony delete` does next
    assert KubeBackend(records, host=endpoint.url, poll_s=0.05).list() == []


def test_namespace_labels_carry_experiment_and_owner(endpoint, records):
    launch(endpoint, records, "echo")
    labels = endpoint.namespaces["echo"]["metadata"]["labels"]
    assert labels[LABEL_EXPERIMENT] == "echo" and labels[LABEL_OWNER] == "alice"


def test_exec_copies_output_and_returns_the_exit_code(endpoint, records):
    import io

    backend, _, record = launch(endpoint, records, "echo")
    endpoint.add_pod(pod("echo", "server-1", "server", {"server": ({"running": {}}, 0)}))
    seen = []

    def container(namespace, pod_name, container_name, argv):
        seen.append((namespace, pod_name, container_name, argv))
        return "hello from " + " ".join(argv) + "\n", "a warning\n", 3

    endpoint.exec_handler = container
    out, err = io.StringIO(), io.StringIO()
    code = backend.api.exec("echo", "server-1", "server", ["env", "-0"], out=out, err=err)
    assert (code, out.getvalue(), err.getvalue()) == (3, "hello from env -0\n", "a warning\n")
    assert seen == [("echo", "server-1", "server", ["env", "-0"])]
    endpoint.exec_handler = lambda *args: ("", "", 0)
    assert backend.exec(record, "server", ["true"]) == 0


def test_attached_launch_returns_when_every_process_ended(endpoint, records):
    module = _example("echo")
    backend = KubeBackend(records, host=endpoint.url, poll_s=0.05)
    exp = module.make_experiment()
    record = records.create(exp, "kube", owner="alice")
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (backend.launch(exp, record, detach=False), done.set())
    )
    thread.start()
    endpoint.add_pod(
        pod("echo", "client-1", "client", {"client": ({"terminated": {"exitCode": 0}}, 0)})
    )
    assert not done.wait(0.3)  # the server still runs (no pod yet: pending)
    endpoint.add_pod(
        pod("echo", "server-1", "server", {"server": ({"terminated": {"exitCode": 2}}, 0)})
    )
    thread.join(10)
    assert done.is_set()
    assert (record.status, record.data["exit_code"]) == ("failed", 1)


def test_describe_says_why_a_process_waits(endpoint, records):
    backend, _, record = launch(endpoint, records, "echo")
    waiting = pod(
        "echo", "server-1", "server", {"server": ({"waiting": {"reason": "ImagePullBackOff"}}, 0)}
    )
    endpoint.add_pod(waiting)
    unscheduled = pod("echo", "client-1", "client", {"client": ({}, 0)}, node=None)
    unscheduled["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    endpoint.add_pod(unscheduled)
    status = backend.describe(record)
    assert status.process("server").location == "pod server-1 on node-1 [ImagePullBackOff]"
    assert status.process("client").location == "pod client-1 [Unschedulable]"
    assert {p.state for p in status.processes} == {"pending"}


def test_later_commands_reach_the_cluster_the_record_was_launched_on(
    endpoint, records, monkeypatch
):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    launch(endpoint, records, "echo")
    status = KubeBackend(records).describe(records.load("echo"))  # no host given now
    assert status.details["namespace"] == "echo"


def test_without_credentials_the_error_says_how_to_get_them(records, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(BackendError, match="get-credentials.*-o context=NAME"):
        KubeBackend(records).list()
