"""The kube backend at scale and with run storage: the spec stored on the cluster stays compact
(and older plain-YAML specs still read), run storage mounts validate, and a pod that no node of
its pool can hold is refused before anything is created."""

import json
from pathlib import Path

import pytest

from cloudwise.spec import ClusterSpec
from symphony import Experiment, Process, ProcessGroup, Resources, spec_store
from symphony.backends.kube import KubeBackend, _groups_from_spec
from symphony.errors import BackendError, SpecError
from symphony.kube_manifests import ANNOTATION_SPEC, RenderOptions, render

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
    objects = KubeBackend(volume=volume, volume_path="/runs").manifests(many(10))
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
        KubeBackend(volume="runs-claim")


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
