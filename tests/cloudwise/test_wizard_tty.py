"""`cloudwise init` answered through a real terminal (pexpect), custom pools included."""

import sys

import pexpect
import pytest

from cloudwise import ClusterSpec

pytestmark = pytest.mark.timeout(120)


def spawn(directory) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "cloudwise", "-C", str(directory), "init"],
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )


def answer(child: pexpect.spawn, prompt: str, reply: str) -> None:
    child.expect_exact(prompt)
    child.sendline(reply)


def add_pool(
    child, name, gpu="", cpu="", memory="", gpu_type=None, spot="", min_nodes="", max_nodes=""
):
    answer(child, "Pool name", name)
    answer(child, "GPUs per node [0]:", gpu)
    answer(child, "vCPUs per node [8]:", cpu)
    answer(child, "Memory per node, GB (0 = any) [0.0]:", memory)
    if gpu_type is not None:
        answer(child, "GPU type [v100]:", gpu_type)
    answer(child, "Spot/preemptible nodes? [y/N]:", spot)
    answer(child, "Minimum nodes (0 = scale to zero) [0]:", min_nodes)
    answer(child, "Maximum nodes [4]:", max_nodes)


def test_wizard_builds_custom_pools_and_rejects_bad_ones_in_a_terminal(tmp_path):
    child = spawn(tmp_path)
    answer(child, "Cloud provider (gcp, aws):", "azure")
    child.expect_exact("is not one of")
    answer(child, "Cloud provider (gcp, aws):", "aws")
    answer(child, "AWS account id (optional, press Enter to skip) []:", "")
    answer(child, "Region [us-west-2]:", "")
    answer(child, "Cluster name [surreal]:", "rl")
    answer(child, "Kubernetes version [1.35]:", "")
    answer(child, "[surreal]:", "custom")
    # A GPU AWS does not have: the wizard explains and asks for the pool again.
    add_pool(child, "learner", gpu="1", cpu="8", gpu_type="p100", spot="n", max_nodes="2")
    child.expect_exact("aws has no p100 GPUs")
    add_pool(child, "learner", gpu="1", memory="30", gpu_type="", spot="n", max_nodes="2")
    add_pool(child, "actors", cpu="32", spot="y", max_nodes="16")
    answer(child, "Pool name", "")
    child.expect_exact("Next steps:")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before

    spec = ClusterSpec.load(tmp_path)
    assert (spec.provider, spec.region, spec.name, spec.project) == ("aws", "us-west-2", "rl", None)
    learner, actors = spec.pools
    assert (learner.name, learner.gpu_type, learner.gpu, learner.memory_gb, learner.max_nodes) == (
        "learner",
        "v100",
        1,
        30,
        2,
    )
    assert (actors.name, actors.cpu, actors.gpu, actors.spot, actors.max_nodes) == (
        "actors",
        32,
        0,
        True,
        16,
    )
    assert '"p3.2xlarge"' in (tmp_path / "pools.tf").read_text()


def test_wizard_defaults_give_the_papers_cluster_on_gke(tmp_path):
    child = spawn(tmp_path)
    answer(child, "Cloud provider (gcp, aws):", "gcp")
    answer(child, "GCP project id:", "my-project")
    for _ in range(4):  # region, zone, name, version: defaults
        child.expect(r"\]: ?$")
        child.sendline("")
    answer(child, "[surreal]:", "")
    child.expect_exact(
        "gcloud container clusters get-credentials surreal --zone us-west1-b --project my-project"
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    spec = ClusterSpec.load(tmp_path)
    assert spec.zone == "us-west1-b"
    assert [p.name for p in spec.pools] == [
        "system",
        "actors-8",
        "actors-32",
        "learner-1gpu",
        "learner-4gpu",
    ]
