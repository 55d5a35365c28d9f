"""Placement helpers: pools -> requests, node selectors and tolerations (cloudwise labels/taints)."""

import pytest

from cloudwise import labels
from cloudwise.spec import ClusterSpec, NodePoolSpec
from symphony import placement
from symphony.errors import SpecError
from symphony.spec import Resources

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def cluster() -> ClusterSpec:
    return ClusterSpec(
        "gcp",
        "c",
        "us-west1",
        project="p",
        pools=[
            NodePoolSpec("big", cpu=64, memory_gb=256),
            NodePoolSpec("cpu", cpu=8, memory_gb=32),
            NodePoolSpec("v100x4", cpu=32, memory_gb=200, gpu=4, gpu_type="v100"),
            NodePoolSpec(
                "t4", cpu=8, memory_gb=30, gpu=1, gpu_type="t4", taints=["team=rl:NoSchedule"]
            ),
        ],
    )


def test_allocatable_leaves_room_for_the_system_and_never_exceeds_the_node(cluster):
    for pool in cluster.pools:
        node = placement.node(cluster, pool.name)
        assert (
            node.cpu >= pool.cpu and node.memory_gb >= pool.memory_gb
        )  # the machine cloudwise picks
        cpu, memory = placement.allocatable(node)
        assert 0 < cpu < node.cpu and 0 < memory < node.memory_gb
    # GKE's published example: 4 GiB node -> 1 GiB reserved, plus eviction and DaemonSets.
    cpu, memory = placement.allocatable(NodePoolSpec("small", cpu=4, memory_gb=4))
    assert memory == pytest.approx(4 - 1 - 0.1 - 0.5, abs=0.05)


def test_whole_machine_takes_all_allocatable_and_every_gpu(cluster):
    res = placement.whole_machine(cluster, "v100x4")
    assert (res.cpu, res.memory_gb) == placement.allocatable(placement.node(cluster, "v100x4"))
    assert res.gpu == 4 and res.node_pool == "v100x4"


def test_share_of_machine_packs_n_per_node(cluster):
    cpu, memory = placement.allocatable(placement.node(cluster, "cpu"))
    res = placement.share_of_machine(cluster, "cpu", 4)
    assert 4 * res.cpu <= cpu < 5 * res.cpu and 4 * res.memory_gb <= memory
    assert res.node_pool == "cpu" and res.gpu == 0
    assert placement.share_of_machine(cluster, "v100x4", 2).gpu == 2
    with pytest.raises(SpecError, match="choose per_machine among"):
        placement.share_of_machine(cluster, "v100x4", 3)


def test_a_pool_given_by_machine_type_is_sized_by_that_machine():
    cluster = ClusterSpec(
        "gcp",
        "c",
        "us-west1",
        project="p",
        pools=[NodePoolSpec("m", machine_type="n2-standard-16")],
    )
    res = placement.whole_machine(cluster, "m")
    assert 15 < res.cpu < 16 and res.memory_gb > 50
    with pytest.raises(SpecError, match="no pool named 'x'"):
        placement.whole_machine(cluster, "x")


def test_gpu_picks_the_smallest_pool_with_the_gpus_asked(cluster):
    assert placement.gpu(cluster).node_pool == "t4"
    assert placement.gpu(cluster, count=2).node_pool == "v100x4"
    assert placement.gpu(cluster, gpu_type="v100").node_pool == "v100x4"
    with pytest.raises(SpecError, match="no pool of cluster 'c' fits"):
        placement.gpu(cluster, count=8)


def test_smallest_pool_prefers_cpu_pools_and_names_the_pools_when_nothing_fits(cluster):
    assert placement.smallest_pool(cluster, Resources(cpu=2, memory_gb=4)).node_pool == "cpu"
    assert placement.smallest_pool(cluster, Resources(cpu=16, memory_gb=64)).node_pool == "big"
    with pytest.raises(SpecError) as err:
        placement.smallest_pool(cluster, Resources(cpu=100))
    assert "big (n2-standard-64): 63.65 cpu" in str(err.value) and "cloudwise pool add" in str(
        err.value
    )


def test_pod_placement_uses_the_pool_label_and_exactly_the_pool_taints(cluster):
    plain = placement.pod_placement("cpu", 0, cluster)
    assert plain.node_selector == {labels.POOL: "cpu"} and plain.tolerations == []
    gpu = placement.pod_placement("t4", 1, cluster)
    assert gpu.node_selector == {labels.POOL: "t4"}
    assert gpu.tolerations == [t.toleration() for t in labels.pool_taints(cluster.pool("t4"))]
    assert labels.GPU_TAINT.toleration() in gpu.tolerations
    with pytest.raises(SpecError, match="asks for 2 GPUs"):
        placement.pod_placement("t4", 2, cluster)


def test_pod_placement_without_a_cluster_spec_still_tolerates_the_gpu_taint():
    assert placement.pod_placement(None, 0).tolerations == []
    assert placement.pod_placement(None, 2).tolerations == [labels.GPU_TAINT.toleration()]
    assert placement.pod_placement("gpu", 1).node_selector == {labels.POOL: "gpu"}
