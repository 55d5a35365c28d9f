"""The rendered EKS terraform inits, validates and plans with no network (provider from a local mirror).

Each terraform command here starts the 700 MB AWS provider, so the tests keep to few commands.
"""

import shutil
import subprocess
import sys

import pytest

from cloudwise.terraform import TerraformRunner
from cloudwise.testing import free_port, write_aws_emulator_override
from tests.cloudwise.conftest import GOLDEN, REPO

pytestmark = pytest.mark.timeout(240)


def offline_copy(source, target):
    for path in source.iterdir():
        if path.suffix in (".tf", ".yaml"):
            shutil.copy(path, target)
    # Fake credentials, no account lookup, every endpoint on a loopback port nobody listens on.
    write_aws_emulator_override(target, f"http://127.0.0.1:{free_port()}")


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


def test_cloudwise_plan_on_the_reference_eks_cluster_offline(offline_terraform, tmp_path):
    offline_copy(REPO / "terraform" / "eks", tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "cloudwise", "-C", str(tmp_path), "plan"],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Terraform has been successfully initialized" in result.stdout
    assert "Plan: 20 to add, 0 to change, 0 to destroy." in result.stdout
    assert 'instance_types         = [\n          + "p3.8xlarge",' in result.stdout
    assert "Run `cloudwise apply` to make these changes." in result.stdout
