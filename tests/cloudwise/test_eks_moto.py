"""`cloudwise apply/destroy` on the reference EKS cluster, for real, against moto's AWS emulator."""

import os
import shutil
import subprocess
import sys

import boto3
import pytest

from cloudwise import ClusterSpec, resolve
from cloudwise.render.eks import autoscaler_tags
from cloudwise.testing import moto_server, write_aws_emulator_override
from symphony.testing import scaled
from tests.cloudwise import kubectl_recorder
from tests.cloudwise.conftest import REPO

# moto serves no EKS add-on or Pod Identity API: those three resources are planned offline only.
WITHOUT_ADDONS = ["vpc_cni", "pod_identity"]
WITHOUT = ["aws_eks_pod_identity_association.cluster_autoscaler"]

# Minutes: five applies/plans, each polling VPC and subnet state on a 10 s timer; under heavy load
# (load average 17 on 2 cores) one apply took ~6 min.
# It mostly waits, so it runs beside the heavy training runs (tests/conftest.py).
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow, pytest.mark.xdist_group("eks")]


def cloudwise(directory, *args, path: str | None = None):
    """Run the real CLI in a child process (its stdout is a pipe, so terraform streams into it)."""
    result = subprocess.run(
        [sys.executable, "-m", "cloudwise", "-C", str(directory), *args],
        capture_output=True,
        text=True,
        timeout=scaled(600),
        env=dict(os.environ, PATH=path or os.environ["PATH"]),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def check_node_groups(eks, spec: ClusterSpec) -> None:
    resolved = resolve(spec)
    assert sorted(eks.list_nodegroups(clusterName=spec.name)["nodegroups"]) == sorted(
        p.name for p in resolved.pools
    )
    for pool in resolved.pools:
        group = eks.describe_nodegroup(clusterName=spec.name, nodegroupName=pool.name)["nodegroup"]
        assert group["instanceTypes"] == [c.name for c in pool.instance_types]
        assert group["scalingConfig"] == {
            "minSize": pool.node.min_nodes,
            "maxSize": pool.node.max_nodes,
            "desiredSize": pool.node.min_nodes,
        }
        assert group["labels"] == pool.labels
        assert group.get("taints", []) == [
            {"key": t.key, "value": t.value, "effect": t.terraform_effect} for t in pool.taints
        ]
        assert group["capacityType"] == ("SPOT" if pool.node.spot else "ON_DEMAND")
        assert group["tags"]["k8s.io/cluster-autoscaler/enabled"] == "true"


def ec2_client(endpoint: str):
    return client("ec2", endpoint)


def ec2_vpcs(endpoint: str) -> list:
    return ec2_client(endpoint).describe_vpcs(
        Filters=[{"Name": "tag:Name", "Values": ["surreal"]}]
    )["Vpcs"]


def client(service: str, endpoint: str):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-west-2",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def make_node_group_asgs(endpoint: str, spec: ClusterSpec) -> dict[str, str]:
    """Create the Auto Scaling groups moto's node groups name but never create; pool -> group."""
    eks, autoscaling = client("eks", endpoint), client("autoscaling", endpoint)
    autoscaling.create_launch_configuration(
        LaunchConfigurationName="nodes", ImageId="ami-12c6146b", InstanceType="m5.large"
    )
    names = {}
    for pool in spec.pools:
        group = eks.describe_nodegroup(clusterName=spec.name, nodegroupName=pool.name)
        name = group["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            LaunchConfigurationName="nodes",
            MinSize=0,
            MaxSize=1,
            AvailabilityZones=["us-west-2a"],
        )
        names[pool.name] = name
    return names


def check_autoscaler_and_device_plugin(endpoint: str, record, spec: ClusterSpec) -> None:
    """The autoscaler's own IAM role exists, and terraform handed kubectl both add-ons."""
    iam = client("iam", endpoint)
    roles = [r for r in iam.list_roles()["Roles"] if "autoscaler" in r["RoleName"]]
    assert len(roles) == 1
    assert "pods.eks.amazonaws.com" in str(roles[0]["AssumeRolePolicyDocument"])
    policy = iam.get_role_policy(RoleName=roles[0]["RoleName"], PolicyName="cluster-autoscaler")
    assert f"aws:ResourceTag/k8s.io/cluster-autoscaler/{spec.name}" in str(policy["PolicyDocument"])
    call = kubectl_recorder.read(record)
    cluster = client("eks", endpoint).describe_cluster(name=spec.name)["cluster"]
    assert call["server"] == cluster["endpoint"] and call["token"].startswith("k8s-aws-v1.")
    kinds = {(kind, name) for kind, _, name in call["objects"]}
    assert {("Deployment", "cluster-autoscaler"), ("DaemonSet", "nvidia-device-plugin")} <= kinds


def test_apply_edit_and_destroy_the_reference_eks_cluster(offline_terraform, tmp_path):
    shutil.copytree(REPO / "terraform" / "eks", tmp_path, dirs_exist_ok=True)
    spec = ClusterSpec.load(tmp_path)
    record = tmp_path / "kubectl.json"
    path = kubectl_recorder.path_with(tmp_path / "bin")
    kubectl_recorder.install(tmp_path / "bin", record, spec.kubernetes_version)
    with moto_server() as endpoint:
        pools = [p.name for p in spec.pools]
        write_aws_emulator_override(
            tmp_path, endpoint, pools, WITHOUT_ADDONS, WITHOUT, without_asg_tags=pools
        )
        eks = client("eks", endpoint)

        out = cloudwise(tmp_path, "apply", "--yes", path=path)
        assert "Apply complete! Resources: 22 added" in out
        assert "aws eks update-kubeconfig --name surreal --region us-west-2" in out
        cluster = eks.describe_cluster(name="surreal")["cluster"]
        assert cluster["version"] == "1.35" and len(cluster["resourcesVpcConfig"]["subnetIds"]) == 2
        check_autoscaler_and_device_plugin(endpoint, record, spec)

        # The node-template tags reach each node group's Auto Scaling group (moto's node groups
        # only name theirs, so the test creates them, then applies the tags for real).
        groups = make_node_group_asgs(endpoint, spec)
        write_aws_emulator_override(tmp_path, endpoint, pools, WITHOUT_ADDONS, WITHOUT)
        expected = {p.name: autoscaler_tags(spec.name, p) for p in resolve(spec).pools}
        out = cloudwise(tmp_path, "apply", "--yes", path=path)
        assert f"Resources: {sum(map(len, expected.values()))} added, 0 changed" in out
        autoscaling = client("autoscaling", endpoint)
        for pool, group in groups.items():
            tags = autoscaling.describe_tags(
                Filters=[{"Name": "auto-scaling-group", "Values": [group]}]
            )["Tags"]
            assert {t["Key"]: t["Value"] for t in tags} == expected[pool]
        gpu = expected["learner-4gpu"]
        assert gpu["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "4"
        assert len(ec2_vpcs(endpoint)) == 1
        check_node_groups(eks, ClusterSpec.load(tmp_path))
        learner = eks.describe_nodegroup(clusterName="surreal", nodegroupName="learner-4gpu")[
            "nodegroup"
        ]
        assert (learner["instanceTypes"], learner["amiType"]) == (
            ["p3.8xlarge"],
            "AL2023_x86_64_NVIDIA",
        )
        assert learner["taints"] == [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
        ]

        cloudwise(tmp_path, "pool", "edit", "actors-8", "--max-nodes", "10")
        cloudwise(tmp_path, "pool", "remove", "actors-32")
        write_aws_emulator_override(
            tmp_path, endpoint, [p for p in pools if p != "actors-32"], WITHOUT_ADDONS, WITHOUT
        )
        removed = len(expected["actors-32"]) + 1  # its tags and its node group
        plan = cloudwise(tmp_path, "plan", path=path)
        assert f"Plan: 0 to add, 1 to change, {removed} to destroy." in plan
        assert "max_size     = 64 -> 10" in plan
        # moto does not serve DescribeUpdate, which terraform polls after an in-place node-group
        # update, so the scaling edit is checked in the plan only; removing a pool is applied.
        cloudwise(tmp_path, "pool", "edit", "actors-8", "--max-nodes", "64")
        out = cloudwise(tmp_path, "apply", "--yes", path=path)
        assert f"Plan: 0 to add, 0 to change, {removed} to destroy." in out
        assert f"Resources: 0 added, 0 changed, {removed} destroyed." in out
        check_node_groups(eks, ClusterSpec.load(tmp_path))
        assert "surreal" in cloudwise(tmp_path, "output", "cluster_name")

        left = 21 + sum(len(t) for pool, t in expected.items() if pool != "actors-32")
        out = cloudwise(tmp_path, "destroy", "--yes", path=path)
        assert f"Destroy complete! Resources: {left} destroyed." in out
        assert eks.list_clusters()["clusters"] == []
        assert ec2_vpcs(endpoint) == []
        subnets = set(cluster["resourcesVpcConfig"]["subnetIds"])
        assert [
            s
            for s in ec2_client(endpoint).describe_subnets()["Subnets"]
            if s["SubnetId"] in subnets
        ] == []
