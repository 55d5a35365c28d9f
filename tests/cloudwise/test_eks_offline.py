"""The rendered EKS terraform inits, validates and plans with no network (provider from a local mirror)."""

import shutil

import pytest

from cloudwise.terraform import TerraformRunner
from cloudwise.testing import free_port, write_aws_emulator_override
from tests.cloudwise.conftest import GOLDEN, REPO

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("source", [REPO / "terraform" / "eks", GOLDEN / "eks"], ids=["reference", "golden"])
def test_eks_init_validate_plan_offline(offline_terraform, source, tmp_path, capfd):
    for path in source.glob("*.tf"):
        shutil.copy(path, tmp_path)
    # Fake credentials, no account lookup, every endpoint on a loopback port nobody listens on.
    write_aws_emulator_override(tmp_path, f"http://127.0.0.1:{free_port()}")
    runner = TerraformRunner(tmp_path)
    runner.init()
    runner.validate()
    assert runner.plan() is True
    out = capfd.readouterr().out
    assert "Installed hashicorp/aws v5.100" in out or "Using previously-installed hashicorp/aws" in out
    assert "Success! The configuration is valid." in out
    assert "aws_eks_cluster.this will be created" in out
    assert 'aws_eks_node_group.learner_4gpu will be created' in out or "learner_a100 will be created" in out
