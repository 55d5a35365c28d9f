"""The rendered EKS terraform inits, validates and plans with no network (provider from a local mirror).

Each terraform command here starts the 700 MB AWS provider, so the tests keep to few commands.
"""

import os
import shutil
import subprocess
import sys

import pytest

from cloudwise import ClusterSpec, resolve
from cloudwise.render.eks import autoscaler_tags
from cloudwise.terraform import TerraformRunner
from cloudwise.testing import find_provider_mirror, free_port, write_aws_emulator_override
from symphony.testing import scaled
from tests.cloudwise.conftest import GOLDEN, REPO

pytestmark = pytest.mark.timeout(240)


def offline_copy(source, target):
    shutil.copytree(
        source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".terraform*")
    )
    # Fake credentials, no account lookup, every endpoint on a loopback port nobody listens on.
    write_aws_emulator_override(target, f"http://127.0.0.1:{free_port()}")


@pytest.mark.integration
def test_golden_eks_inits_validates_and_plans_offline(offline_terraform, tmp_path, capfd):
    offline_copy(GOLDEN / "eks", tmp_path)
    runner = TerraformRunner(tmp_path)
    runner.init()
    runner.validate()
    assert runner.plan() is True
    out = capfd.readouterr().out
    assert "hashicorp/aws v5.100" in out
    assert "Success! The configuration is valid." in out
    assert "aws_eks_node_group.learner_a100 will be created" in out
    assert "aws_eks_addon.vpc_cni will be created" in out
    # the cluster autoscaler and the NVIDIA device plugin come with the cluster
    for address in (
        "aws_iam_role.cluster_autoscaler",
        "aws_iam_role_policy.cluster_autoscaler",
        "aws_eks_addon.pod_identity",
        "aws_eks_pod_identity_association.cluster_autoscaler",
        "terraform_data.cluster_addons[0]",
        'aws_autoscaling_group_tag.learner_a100["k8s.io/cluster-autoscaler/node-template/'
        'resources/nvidia.com/gpu"]',
    ):
        assert f"{address} will be created" in out


@pytest.mark.integration
def test_cloudwise_plan_with_a_plugin_dir_and_no_registry(offline_terraform, tmp_path):
    """`cloudwise plan` where the registry cannot be reached: init fails and names --plugin-dir;
    with `--plugin-dir MIRROR` terraform installs the AWS provider from the mirror and plans."""
    offline_copy(REPO / "terraform" / "eks", tmp_path / "eks")
    # Providers come from a network mirror on a closed loopback port: every download fails, fast,
    # as on a machine with no route to registry.terraform.io (and no traffic leaves the machine).
    no_registry = tmp_path / "no-registry.tfrc"
    no_registry.write_text(
        offline_terraform.read_text().split("provider_installation")[0]
        + "provider_installation {\n  network_mirror {\n"
        + f'    url = "https://127.0.0.1:{free_port()}/"\n  }}\n}}\n'
    )
    env = dict(os.environ, TF_CLI_CONFIG_FILE=str(no_registry))
    command = [sys.executable, "-m", "cloudwise", "-C", str(tmp_path / "eks")]

    failed = subprocess.run(
        [*command, "plan"], capture_output=True, text=True, timeout=scaled(200), env=env
    )
    assert failed.returncode == 1
    assert "terraform init failed" in failed.stderr
    assert "cloudwise --plugin-dir DIR plan" in failed.stderr

    mirror = find_provider_mirror()
    result = subprocess.run(
        [*command, "--plugin-dir", str(mirror), "plan"],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Terraform has been successfully initialized" in result.stdout
    assert "hashicorp/aws v5.100" in result.stdout
    spec = ClusterSpec.load(tmp_path / "eks")
    tags = sum(len(autoscaler_tags(spec.name, p)) for p in resolve(spec).pools)
    assert f"Plan: {25 + tags} to add, 0 to change, 0 to destroy." in result.stdout
    assert 'instance_types         = [\n          + "p3.8xlarge",' in result.stdout
    assert "terraform_data.cluster_addons[0] will be created" in result.stdout
    assert "Run `cloudwise apply` to make these changes." in result.stdout
