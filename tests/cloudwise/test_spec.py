"""cloudwise.yaml: round trips, and bad specs fail with errors that say what to fix."""

import pytest

from cloudwise import ClusterSpec, NodePoolSpec, SpecError, resolve
from cloudwise.labels import GPU_TAINT, LABEL_KEYS, Taint, pool_labels, pool_taints
from tests.cloudwise.conftest import cluster

pytestmark = pytest.mark.timeout(30)


def test_yaml_round_trip_keeps_every_field(tmp_path):
    spec = cluster(
        "gcp",
        zone="us-west1-b",
        pools=[
            NodePoolSpec(
                "gpu",
                cpu=8,
                memory_gb=30.5,
                gpu_type="v100",
                gpu=2,
                spot=True,
                min_nodes=1,
                max_nodes=3,
                disk_gb=200,
                labels={"a": "b"},
                taints=["x=y:NoExecute"],
            )
        ],
    )
    path = spec.save(tmp_path)
    assert path.name == "cloudwise.yaml"
    assert ClusterSpec.load(tmp_path) == spec


def test_gpu_type_is_case_insensitive_in_yaml():
    spec = ClusterSpec.from_yaml(
        "provider: aws\nname: c\nregion: us-west-2\npools:\n- {name: g, gpu_type: V100, gpu: 1}\n"
    )
    assert spec.pools[0].gpu_type == "v100"


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(pools=[NodePoolSpec("a", cpu=2, min_nodes=3, max_nodes=2)]),
            "min_nodes (3) > max_nodes (2)",
        ),
        (
            dict(pools=[NodePoolSpec("a", cpu=2), NodePoolSpec("a", cpu=4)]),
            "two pools are named 'a'",
        ),
        (
            dict(pools=[NodePoolSpec("a", gpu_type="v1000", gpu=1)]),
            "unknown gpu_type 'v1000' (did you mean 'v100'?)",
        ),
        (dict(pools=[NodePoolSpec("a", gpu=1)]), "gpu_type is not set"),
        (dict(pools=[NodePoolSpec("a", cpu=2, gpu_type="t4")]), "gpu is 0"),
        (dict(pools=[NodePoolSpec("A_b", cpu=2)]), "lowercase letters"),
        (dict(pools=[NodePoolSpec("a")]), "set cpu"),
        (dict(pools=[NodePoolSpec("a", cpu=2, taints=["bad"])]), "key=value:Effect"),
        (
            dict(pools=[NodePoolSpec("a", cpu=2, labels={"cloudwise.io/pool": "x"})]),
            "reserved prefix",
        ),
        (dict(pools=[]), "no node pools"),
        (dict(provider="azure"), "use one of gcp, aws"),
    ],
)
def test_bad_specs_fail_before_terraform_with_a_fix(change, message):
    spec = cluster(**{k: v for k, v in change.items() if k != "provider"})
    if "provider" in change:
        spec.provider = change["provider"]
    with pytest.raises(SpecError) as err:
        resolve(spec)
    assert message in str(err.value)


def test_unknown_yaml_key_suggests_the_right_one():
    with pytest.raises(SpecError, match="unknown key 'max_node'; did you mean 'max_nodes'"):
        ClusterSpec.from_yaml(
            "provider: aws\nname: c\nregion: us-west-2\npools:\n- {name: a, cpu: 2, max_node: 3}\n"
        )


def test_gcp_needs_a_project_and_zone_in_region():
    with pytest.raises(SpecError, match="project"):
        resolve(cluster("gcp", project=None))
    spec = cluster("gcp", zone="us-east1-b")
    with pytest.raises(SpecError, match="not in region 'us-west1'"):
        resolve(spec)


def test_labels_describe_the_chosen_machine_and_gpu_pools_are_tainted():
    spec = cluster(
        "aws", pools=[NodePoolSpec("learner", cpu=8, gpu_type="v100", gpu=1, labels={"team": "rl"})]
    )
    (pool,) = resolve(spec).pools
    labels = pool.labels
    assert set(LABEL_KEYS) <= set(labels)
    assert labels["cloudwise.io/pool"] == "learner"
    assert (labels["cloudwise.io/cpu"], labels["cloudwise.io/memory-gb"]) == (
        "8",
        "61",
    )  # p3.2xlarge
    assert (labels["cloudwise.io/gpu-type"], labels["cloudwise.io/gpu-count"]) == ("v100", "1")
    assert labels["team"] == "rl"
    assert pool.taints == [GPU_TAINT]
    assert str(GPU_TAINT) == "nvidia.com/gpu=present:NoSchedule"


def test_cpu_pools_have_no_gpu_taint_but_keep_user_taints():
    pool = NodePoolSpec("cpu", cpu=4, taints=["dedicated=es:NoSchedule"])
    assert pool_taints(pool) == [Taint("dedicated", "es", "NoSchedule")]
    assert pool_labels(pool)["cloudwise.io/gpu-type"] == "none"


def test_taint_parse_and_toleration():
    taint = Taint.parse("nvidia.com/gpu=present:NoSchedule")
    assert taint == GPU_TAINT
    assert taint.terraform_effect == "NO_SCHEDULE"
    assert taint.toleration() == {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    }
    with pytest.raises(ValueError, match="Effect one of"):
        Taint.parse("a=b:Never")
