"""What a cluster operator relies on in the kube manifests, checked over the example experiments.

The NetworkPolicy and toleration checks evaluate the objects with Kubernetes' own semantics
(written out below) rather than comparing them with expected dicts.
"""

import base64
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from cloudwise import labels as cw
from cloudwise.spec import ClusterSpec
from symphony import spec_store
from symphony.addresses import env_prefix
from symphony.kube.manifests import render
from symphony.kube.naming import LABEL_EXPERIMENT, LABEL_OWNER, RenderOptions
from symphony.spec import Experiment, Process

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "03_kube"
CLUSTER = ClusterSpec.load(EXAMPLES / "cloudwise.yaml")


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"kube_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_objects() -> dict[str, tuple[Experiment, list[dict]]]:
    """Every example experiment and the objects it renders to (with the example's options)."""
    out = {}
    for name in ("echo", "ppo_gpu"):
        module = load_example(name)
        exp = module.make_experiment()
        options = RenderOptions(
            owner="alice", cluster=CLUSTER, secrets=getattr(module, "SECRETS", {})
        )
        out[name] = (exp, render(exp, options))
    return out


EXAMPLE_OBJECTS = example_objects()


@pytest.fixture(params=sorted(EXAMPLE_OBJECTS))
def example(request):
    return EXAMPLE_OBJECTS[request.param]


def kinds(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def workloads(objects):
    return [o for o in objects if o["kind"] in ("Deployment", "Job")]


def containers(objects):
    """(pod template, container) for every container."""
    return [
        (w["spec"]["template"], c)
        for w in workloads(objects)
        for c in w["spec"]["template"]["spec"]["containers"]
    ]


def env_of(container):
    return {e["name"]: e["value"] for e in container["env"]}


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --- Kubernetes NetworkPolicy ingress semantics (networking.k8s.io/v1) ---------------------------


def peer_matches(peer, policy_ns, src) -> bool:
    if "ipBlock" in peer:
        return src["ns"] is None  # only traffic from outside the cluster is addressed by IP here
    if src["ns"] is None:
        return False
    ns_ok = (
        src["ns"] == policy_ns
        if "namespaceSelector" not in peer
        else selects(peer["namespaceSelector"].get("matchLabels", {}), src["ns_labels"])
    )
    pod_ok = selects(peer.get("podSelector", {}).get("matchLabels", {}), src["labels"])
    return ns_ok and pod_ok


def admits(policies, dst_labels, dst_ns, port, src) -> bool:
    """Whether ingress from `src` to a pod (labels, namespace) on `port` is allowed."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == dst_ns
        and selects(p["spec"]["podSelector"].get("matchLabels", {}), dst_labels)
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            port_ok = "ports" not in rule or any(p["port"] == port for p in rule["ports"])
            peers = rule.get("from")
            src_ok = peers is None or any(peer_matches(p, dst_ns, src) for p in peers)
            if port_ok and src_ok:
                return True
    return False


def tolerates(tolerations, taint: cw.Taint) -> bool:
    for tol in tolerations:
        if tol.get("effect") not in (None, taint.effect) or tol.get("key") not in (None, taint.key):
            continue
        if tol.get("operator", "Equal") == "Exists" or tol.get("value") == taint.value:
            return True
    return False


# --- the properties -------------------------------------------------------------------------------


def test_every_connected_service_has_a_service_selecting_its_binder_on_its_port(example):
    exp, objects = example
    ns = objects[0]["metadata"]["name"]
    services = {s["metadata"]["name"]: s for s in kinds(objects, "Service")}
    pods = {w["metadata"]["name"]: w["spec"]["template"] for w in workloads(objects)}
    assert any(p.connected for p in exp.processes())
    for proc in exp.processes():
        for name in proc.services():
            binder = exp.process(exp.services()[name])
            template = pods[exp.group_of(binder.name)]
            env = env_of(next(c for _, c in containers(objects) if c["name"] == proc.name))
            host, port = env[f"{env_prefix(name)}_HOST"], int(env[f"{env_prefix(name)}_PORT"])
            svc_name, svc_ns, _ = host.split(".", 2)
            assert svc_ns == ns and host == f"{svc_name}.{ns}.svc"
            svc = services[svc_name]
            assert svc["spec"]["ports"][0]["port"] == port == svc["spec"]["ports"][0]["targetPort"]
            # the selector picks exactly the binder's pod, and that container listens on the port
            for other in pods.values():
                assert selects(svc["spec"]["selector"], other["metadata"]["labels"]) == (
                    other is template
                )
            binder_container = next(
                c for c in template["spec"]["containers"] if c["name"] == binder.name
            )
            assert port in [p["containerPort"] for p in binder_container["ports"]]
            expected = "LoadBalancer" if name in binder.exposed else "ClusterIP"
            assert svc["spec"]["type"] == expected


def test_every_process_gets_the_symph_env_it_needs(example):
    exp, objects = example
    by_name = {c["name"]: env_of(c) for _, c in containers(objects)}
    assert sorted(by_name) == sorted(exp.process_names())
    for proc in exp.processes():
        env = by_name[proc.name]
        assert env["SYMPH_PROCESS"] == proc.name and env["SYMPH_EXPERIMENT"] == exp.name
        assert env["SYMPH_GROUP"] == exp.group_of(proc.name) and env["SYMPH_BIND_HOST"] == "*"
        assert env["SYMPH_SERVICES"].split(",") == proc.services()
        for name in proc.services():
            prefix = env_prefix(name)
            assert env[f"{prefix}_ADDR"] == f"{env[prefix + '_HOST']}:{env[prefix + '_PORT']}"
        for key, value in proc.env.items():
            assert env[key] == value


def test_gpu_requests_become_gpu_limits_tolerations_and_a_gpu_pool():
    exp, objects = EXAMPLE_OBJECTS["ppo_gpu"]
    gpu_groups = set()
    for template, c in containers(objects):
        proc = exp.process(c["name"])
        spec = template["spec"]
        gpu_limit = c["resources"].get("limits", {}).get("nvidia.com/gpu")
        assert gpu_limit == (str(proc.resources.gpu) if proc.resources.gpu else None)
        if proc.resources.gpu:
            gpu_groups.add(exp.group_of(proc.name))
            pool = CLUSTER.pool(spec["nodeSelector"][cw.POOL])
            assert pool.gpu >= proc.resources.gpu
            assert tolerates(spec["tolerations"], cw.GPU_TAINT)
        else:
            pool_gpus = sum(exp.process(x["name"]).resources.gpu for x in spec["containers"])
            assert tolerates(spec.get("tolerations", []), cw.GPU_TAINT) == bool(pool_gpus)
    assert gpu_groups == {"learning"}


def test_resources_and_node_pools_reach_the_pod(example):
    exp, objects = example
    for template, c in containers(objects):
        res = exp.process(c["name"]).resources
        assert float(c["resources"]["requests"]["cpu"].rstrip("m")) / (
            1000 if "m" in c["resources"]["requests"]["cpu"] else 1
        ) == pytest.approx(res.cpu)
        if res.memory_gb:
            assert c["resources"]["limits"]["memory"] == c["resources"]["requests"]["memory"]
        selector = template["spec"].get("nodeSelector", {})
        assert selector.get(cw.POOL) == res.node_pool


def test_network_policy_admits_the_experiments_own_pods_and_nothing_else(example):
    exp, objects = example
    ns = objects[0]["metadata"]["name"]
    policies = kinds(objects, "NetworkPolicy")
    pods = [w["spec"]["template"]["metadata"]["labels"] for w in workloads(objects)]
    ports = [p["port"] for s in kinds(objects, "Service") for p in s["spec"]["ports"]] + [22, 8080]
    exposed = {
        (s["spec"]["ports"][0]["port"], tuple(sorted(s["spec"]["selector"].items())))
        for s in kinds(objects, "Service")
        if s["spec"]["type"] == "LoadBalancer"
    }
    stranger_ns = {"ns": "other", "ns_labels": {}, "labels": dict(pods[0])}  # same labels, other ns
    stranger_pod = {"ns": ns, "ns_labels": {}, "labels": {"app": "debug"}}  # same ns, not ours
    outside = {"ns": None, "ns_labels": {}, "labels": {}}
    for dst in pods:
        for port in ports:
            for src in pods:
                assert admits(policies, dst, ns, port, {"ns": ns, "ns_labels": {}, "labels": src})
            # an exposed port of the exposing pod is open to any source; nothing else is
            is_exposed = any(port == p and selects(dict(sel), dst) for p, sel in exposed)
            for stranger in (stranger_ns, stranger_pod, outside):
                assert admits(policies, dst, ns, port, stranger) == is_exposed
    assert bool(exposed) == any(p.exposed for p in exp.processes())


def test_namespace_is_labelled_with_experiment_and_owner(example):
    exp, objects = example
    ns = objects[0]
    assert ns["kind"] == "Namespace"
    assert ns["metadata"]["labels"][LABEL_EXPERIMENT] == exp.name
    assert ns["metadata"]["labels"][LABEL_OWNER] == "alice"
    assert (
        spec_store.decode(ns["metadata"]["annotations"]["symphony.io/spec"]).to_dict()
        == exp.to_dict()
    )
    assert all(o["metadata"]["namespace"] == ns["metadata"]["name"] for o in objects[1:])


def test_pods_run_non_root_without_privilege_escalation_and_with_memory_shm(example):
    _, objects = example
    for w in workloads(objects):
        spec = w["spec"]["template"]["spec"]
        assert (
            spec["securityContext"]["runAsNonRoot"] is True
            and spec["securityContext"]["runAsUser"] != 0
        )
        shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]


def test_servers_run_under_deployments_and_ending_processes_under_jobs():
    exp, objects = EXAMPLE_OBJECTS["echo"]
    kind = {w["metadata"]["name"]: w["kind"] for w in workloads(objects)}
    assert kind == {"server": "Deployment", "client": "Job"}
    deployment = kinds(objects, "Deployment")[0]
    assert (
        deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    )
    job = kinds(objects, "Job")[0]
    assert exp.process("client").restart.mode == "on-failure"
    assert job["spec"]["backoffLimit"] == exp.process("client").restart.max_restarts
    # the kubelet restarts the failed container in place; a clean exit completes the Job
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert "podFailurePolicy" not in job["spec"]  # the API allows it only with Never


def test_secrets_are_mounted_by_reference_and_no_value_reaches_a_manifest(tmp_path):
    from symphony.kube.backend import KubeBackend

    value = "s3cr3t-" + base64.b16encode(__import__("os").urandom(8)).decode()
    key = tmp_path / "key.json"
    key.write_text(value)
    module = load_example("ppo_gpu")
    backend = KubeBackend(
        cluster_spec=str(EXAMPLES / "cloudwise.yaml"),
        secrets=module.SECRETS,
        secret_files={"gcs-credentials": str(key)},
        output=str(tmp_path / "out"),
    )
    text = backend.plan(module.make_experiment())
    written = "".join(p.read_text() for p in (tmp_path / "out").iterdir())
    for form in (value, base64.b64encode(value.encode()).decode()):
        assert form not in text and form not in written
    objects = list(yaml.safe_load_all(text))
    assert not kinds(objects, "Secret")
    learner = next(c for _, c in containers(objects) if c["name"] == "learner")
    mount = next(m for m in learner["volumeMounts"] if m["name"] == "secret-gcs-credentials")
    assert mount["readOnly"] is True
    assert env_of(learner)["SYMPH_SECRET_GCS_CREDENTIALS_DIR"] == mount["mountPath"]
    volume = next(
        v
        for w in workloads(objects)
        for v in w["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "secret-gcs-credentials"
    )
    assert volume["secret"]["secretName"] == "gcs-credentials"


def test_secrets_named_in_the_spec_are_mounted_and_the_option_adds_more():
    exp = Experiment("sec", image="busybox").add(
        Process("learner", ["true"], secrets=["gcs-credentials", "wandb"]),
        Process("actor", ["true"]),
    )
    objects = render(
        exp, RenderOptions(secrets={"learner": ["wandb", "extra"], "actor": ["extra"]})
    )
    mounted = {
        c["name"]: [m["name"] for m in c.get("volumeMounts", []) if m["name"].startswith("secret-")]
        for _, c in containers(objects)
    }
    assert mounted == {
        "learner": ["secret-gcs-credentials", "secret-wandb", "secret-extra"],
        "actor": ["secret-extra"],
    }


def test_a_process_without_an_image_is_an_error_with_the_fix():
    exp = Experiment("noimage").add(Process("a", ["true"]))
    with pytest.raises(Exception, match="--image"):
        render(exp, RenderOptions())
    assert (
        render(exp, RenderOptions(image="busybox"))[-1]["spec"]["template"]["spec"]["containers"][
            0
        ]["image"]
        == "busybox"
    )


LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_names_and_labels_pass_the_api_servers_own_checks():
    """What the OpenAPI schemas leave to the API server: name and label formats."""
    from tests.symphony.test_kube_validate import every_field

    odd = Experiment.from_dict(every_field().to_dict())
    cases = list(EXAMPLE_OBJECTS.values()) + [
        (odd, render(odd, RenderOptions(owner="a@b.c", image="i")))
    ]
    for _, objects in cases:
        for obj in objects:
            meta = obj["metadata"]
            pattern = DNS_1035_LABEL if obj["kind"] == "Service" else DNS_1123_LABEL
            assert pattern.match(meta["name"]) and len(meta["name"]) <= 63, meta["name"]
            for value in meta["labels"].values():
                assert LABEL_VALUE.match(value) and len(value) <= 63, value
        for _, c in containers(objects):
            assert DNS_1123_LABEL.match(c["name"])
    services = [s["metadata"]["name"] for s in kinds(cases[-1][1], "Service")]
    assert services == ["s-0data"]
    assert cases[-1][1][0]["metadata"]["labels"][LABEL_OWNER] == "a-b.c"
