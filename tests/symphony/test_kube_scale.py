"""The kube backend at scale and with run storage: the spec stored on the cluster stays compact
(and older plain-YAML specs still read), run storage mounts validate, a pod that no node of
its pool can hold is refused before anything is created, and a 1,024-process dry run writes
Services only for what processes reach, under 2 MB, with every container's env unchanged."""

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cloudwise.spec import ClusterSpec
from symphony import Experiment, Process, ProcessGroup, Resources, spec_store
from symphony.addresses import env_prefix
from symphony.cli import main as symphony_main
from symphony.errors import BackendError, SpecError
from symphony.kube.backend import KubeBackend, _groups_from_spec
from symphony.kube.manifests import render
from symphony.kube.naming import ANNOTATION_SPEC, RenderOptions
from symphony.kube.output import PRINT_LIMIT, file_names, plan_text
from symphony.kube.resources import SHARE_ENV_MIN
from symphony.kube.testing_kube import KubeEndpoint
from symphony.loader import load_experiment
from symphony.records import Records
from tests.symphony.kube_env import POD_IP, config_maps, container_env

kubernetes_validate = pytest.importorskip("kubernetes_validate")

CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "03_kube" / "cloudwise.yaml"


def many(n: int) -> Experiment:
    exp = Experiment("many", image="busybox").add(Process("server", ["serve"]).binds("data"))
    for g in range(0, n, 8):
        group = ProcessGroup(f"workers-{g // 8}")
        for i in range(g, min(g + 8, n)):
            group.add(Process(f"w-{i}", ["work", "--index", str(i)]).connects("data"))
        exp.add(group)
    return exp


def test_a_large_spec_is_stored_compact_and_reads_back():
    exp = many(2000)
    stored = render(exp, RenderOptions(owner="alice"))[0]["metadata"]["annotations"][
        ANNOTATION_SPEC
    ]
    assert stored.startswith(spec_store.PREFIX)
    assert len(stored) < len(json.dumps(exp.to_dict())) / 20 and len(stored) < spec_store.BUDGET
    assert spec_store.decode(stored).to_dict() == exp.to_dict()
    groups = _groups_from_spec(stored)
    assert len(groups) == 251 and groups["workers-249"][-1] == "w-1999"


def test_a_spec_stored_as_plain_yaml_by_an_older_version_still_reads():
    exp = many(3)
    assert spec_store.decode(exp.to_yaml()).to_dict() == exp.to_dict()
    assert spec_store.decode(None) is None and _groups_from_spec("") == {}


def test_a_damaged_or_too_large_spec_is_a_clear_error():
    with pytest.raises(SpecError, match="damaged"):
        spec_store.decode(spec_store.PREFIX + "not base64 at all!")
    import os

    noise = os.urandom(300_000).hex()  # incompressible: no encoding brings it under the limit
    exp = Experiment("big", image="busybox").add(Process("p", ["x"], env={"NOISE": noise}))
    with pytest.raises(SpecError, match=r"bytes compressed .* over the 245,760 bytes"):
        spec_store.encode(exp)


@pytest.mark.parametrize("volume", [None, "runs-claim"])
def test_run_storage_is_mounted_in_every_container_and_validates(volume):
    team = {"team_namespace": "team-a"} if volume else {}  # a claim lives in a namespace
    objects = KubeBackend(volume=volume, volume_path="/runs", **team).manifests(many(10))
    pods = [o["spec"]["template"]["spec"] for o in objects if "template" in o.get("spec", {})]
    for pod in pods:
        storage = next(v for v in pod["volumes"] if v["name"] == "run-storage")
        if volume:
            assert storage["persistentVolumeClaim"] == {"claimName": "runs-claim"}
        else:
            assert storage["emptyDir"] == {}
        for c in pod["containers"]:
            assert {"name": "run-storage", "mountPath": "/runs"} in c["volumeMounts"]
    for version in ("1.29", "1.33"):
        for obj in objects:
            kubernetes_validate.validate(obj, version, strict=True)
    plain = KubeBackend().manifests(many(2))  # no run storage unless asked for
    assert all("run-storage" not in str(o) for o in plain)
    with pytest.raises(BackendError, match="volume_path"):
        KubeBackend(volume="runs-claim", team_namespace="team-a")
    # in a namespace launch creates, no claim can be there first: refused, saying where it works
    with pytest.raises(BackendError, match=r"-o team_namespace=NAMESPACE -o volume=runs-claim"):
        KubeBackend(volume="runs-claim", volume_path="/runs")


def test_a_group_larger_than_a_node_of_its_pool_is_refused_naming_the_numbers():
    cluster = ClusterSpec.load(CLUSTER)

    def pair(cpu: float, memory_gb: float) -> Experiment:
        res = Resources(cpu=cpu, memory_gb=memory_gb, node_pool="cpu")
        group = ProcessGroup("pair", [Process("a", ["a"], resources=res)])
        group.add(Process("b", ["b"], resources=Resources(cpu, memory_gb, node_pool="cpu")))
        return Experiment("fit", image="busybox").add(group)

    render(pair(3.5, 12), RenderOptions(cluster=cluster))  # 7 cpu, 24 GiB: fits
    with pytest.raises(SpecError) as err:
        render(pair(4, 12), RenderOptions(cluster=cluster))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("group 'pair' (2 processes, one pod) asks for 8 cpu, 24 GiB memory")
    assert "largest node of pool 'cpu'" in message and "leaves 7.8 cpu" in message
    render(pair(4, 12), RenderOptions())  # without a cluster spec there is nothing to check


WIDE = """
from symphony import Experiment, Process, ProcessGroup


def make_experiment():
    \"\"\"A server and 1,023 workers in pods of 8; every process serves /metrics.\"\"\"
    exp = Experiment("wide", image="r/s:1")
    exp.add(Process("server", ["serve"]).binds("data").binds("prom-server").exposes("board"))
    for g in range(0, 1023, 8):
        group = ProcessGroup(f"workers-{g // 8}")
        for i in range(g, min(g + 8, 1023)):
            work = Process(f"w-{i}", ["work", str(i)], env={"TOKEN": "t" * 300, "ME": f"w{i}"})
            group.add(work.connects("data").binds(f"prom-w-{i}"))
        exp.add(group)
    return exp
"""


def read_back(folder: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.iterdir())]


def pods(objects: list[dict]) -> list[dict]:
    return [o["spec"]["template"] for o in objects if "template" in o.get("spec", {})]


@pytest.mark.integration
def test_a_1024_process_dry_run_has_services_only_for_what_processes_reach(tmp_path, symphony_home):
    spec, out = tmp_path / "wide.py", tmp_path / "manifests"
    spec.write_text(WIDE)
    result = CliRunner().invoke(
        symphony_main, ["launch", str(spec), "-b", "kube", "--dry-run", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    exp = load_experiment(str(spec))
    objects = read_back(out)
    size = sum(p.stat().st_size for p in out.iterdir())

    # the printed output is a summary of what was written, not 1 MB of YAML
    assert len(result.output) < 1000 and f"{len(objects)} objects" in result.output
    assert str(out) in result.output and "Job" in result.output
    assert [p.name for p in sorted(out.iterdir())] == file_names(objects)  # apply order

    reached = {s for p in exp.processes() for s in (*p.connected, *p.exposed)}
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    assert set(services) == reached == {"data", "board"}  # no prom-* Service
    assert len(objects) <= 2 * (len(list(exp.groups())) + len(reached))
    assert size <= 2_000_000, f"{size:,} bytes"

    ns = objects[0]["metadata"]["name"]
    maps = config_maps(objects)
    by_name = {c["name"]: (t, c) for t in pods(objects) for c in t["spec"]["containers"]}
    assert sorted(by_name) == sorted(exp.process_names())
    for proc in exp.processes():
        template, container = by_name[proc.name]
        env = container_env(container, maps)
        assert_env(env, proc, exp, ns, services)
        ports = {p["containerPort"]: p.get("name") for p in container.get("ports", [])}
        prom = int(env[f"{env_prefix(f'prom-{proc.name}')}_PORT"])
        assert ports[prom].startswith("prom-")  # what a `role: pod` scrape job keeps
        notes = template["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"
    for shape in shapes(objects):
        for version in ("1.29", "1.33"):
            kubernetes_validate.validate(shape, version, strict=True)


def assert_env(env: dict, proc: Process, exp: Experiment, ns: str, services: dict) -> None:
    """Exactly the variables of the address contract and the process's own, with the hosts a
    process reaches: a Service for a connected service, the pod's IP for its /metrics."""
    expected = {"SYMPH_EXPERIMENT", "SYMPH_PROCESS", "SYMPH_GROUP", "SYMPH_SERVICES"}
    expected |= {"SYMPH_BIND_HOST", *proc.env}
    for svc in proc.services():
        prefix = env_prefix(svc)
        expected |= {f"{prefix}_HOST", f"{prefix}_PORT", f"{prefix}_ADDR"}
        host, port = env[f"{prefix}_HOST"], env[f"{prefix}_PORT"]
        if svc in services:
            assert host == f"{svc}.{ns}.svc"
            assert services[svc]["spec"]["ports"][0]["port"] == int(port)
        else:
            assert host == POD_IP
        assert env[f"{prefix}_ADDR"] == f"{host}:{port}"
    assert set(env) - {"SYMPH_POD_IP"} == expected
    assert env["SYMPH_PROCESS"] == proc.name and env["SYMPH_GROUP"] == exp.group_of(proc.name)
    assert env["SYMPH_SERVICES"] == ",".join(proc.services())
    assert all(env[k] == v for k, v in proc.env.items())


def shapes(objects: list[dict]) -> list[dict]:
    """One object per shape (objects equal but for their digits are one shape)."""
    return list(
        {re.sub(r"[0-9]+", "0", json.dumps(o, sort_keys=True)): o for o in objects}.values()
    )


def test_shared_env_keeps_each_containers_variables_and_small_plans_stay_inline():
    exp = Experiment("mix", image="busybox").add(Process("server", ["serve"]).binds("data"))
    group = ProcessGroup("workers")
    for i in range(SHARE_ENV_MIN):
        env = {"SAME": "1", "REF": "$(SYMPH_PROCESS)-x", "HALF": "a" if i % 2 else "b"}
        group.add(Process(f"w-{i}", ["work"], env=env).connects("data"))
    exp.add(group)
    objects = render(exp, RenderOptions())
    maps = config_maps(objects)
    # what all 17 share (the server binds `data`, the workers reach it), then the workers' own
    assert maps["symphony-env"]["SYMPH_DATA_HOST"] == "data.mix.svc"
    assert maps["symphony-env-1"] == {"SYMPH_GROUP": "workers", "SAME": "1"}
    assert len(maps) == 2
    for template in pods(objects):
        for c in template["spec"]["containers"]:
            env = container_env(c, maps)
            assert env["SYMPH_DATA_ADDR"] == "data.mix.svc:7000"
            if c["name"] == "server":
                assert c["envFrom"] == [{"configMapRef": {"name": "symphony-env"}}]
                assert env["SYMPH_PROCESS"] == "server" and "SAME" not in env
                continue
            assert [s["configMapRef"]["name"] for s in c["envFrom"]] == [
                "symphony-env",
                "symphony-env-1",
            ]
            # a $(VAR) reference is only expanded in `env`; 8 containers share each HALF value
            assert {e["name"] for e in c["env"]} == {"SYMPH_PROCESS", "REF", "HALF"}
            assert env["REF"] == f"{c['name']}-x" and env["SAME"] == "1"
            assert env["HALF"] == ("a" if int(c["name"][2:]) % 2 else "b")
    small = render(many(3), RenderOptions())
    assert not config_maps(small)  # under 16 containers every env stays inline
    assert len(plan_text(small, None)) < PRINT_LIMIT
    assert list(yaml.safe_load_all(plan_text(small, None))) == small


def test_team_mode_prefixes_the_shared_env_and_lists_one_experiment(tmp_path):
    exp = many(SHARE_ENV_MIN)
    objects = render(exp, RenderOptions(namespace="team-a", team=True, owner="alice"))
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap"] == [
        "symphony-many",
        "many-symphony-env",
    ]
    with KubeEndpoint() as endpoint:
        endpoint.add_namespace("team-a")  # the admin's
        backend = KubeBackend(Records(tmp_path), host=endpoint.url, team_namespace="team-a")
        backend.launch(exp, backend.records.create(exp, "kube"))
        stored = {c["metadata"]["name"] for c in endpoint.stored("ConfigMap")}
        assert "many-symphony-env" in stored
        rows = KubeBackend(
            Records(tmp_path / "other"), host=endpoint.url, team_namespace="team-a"
        ).list()
        assert [r.name for r in rows] == ["many"]  # the env map is no second experiment
