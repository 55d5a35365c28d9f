"""What cloudwise installs inside a cluster: manifests valid for Kubernetes, applied by terraform."""

import base64
import os
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from cloudwise import addons, render, resolve
from cloudwise.errors import SpecError
from cloudwise.render import write
from cloudwise.render.kubectl import APPLY_SCRIPT
from cloudwise.spec import KUBERNETES_VERSION
from tests.cloudwise import kubectl_recorder
from tests.cloudwise.conftest import GOLDEN, cluster
from tests.cloudwise.test_render import _resources, golden_spec

pytestmark = pytest.mark.timeout(120)


def docs(text: str) -> list[dict]:
    return list(yaml.safe_load_all(text))


@pytest.mark.parametrize("version", ["1.32", "1.33", "1.34", KUBERNETES_VERSION])
def test_every_addon_manifest_is_strictly_valid(version):
    files = [
        addons.cluster_autoscaler("surreal", "us-west-2", version),
        addons.nvidia_device_plugin(),
        addons.load_balancer_policy(["203.0.113.0/24"]),
    ]
    for text in files:
        for doc in docs(text):
            kubernetes_validate.validate(doc, version, strict=True)


def test_autoscaler_matches_the_cluster_minor_and_finds_this_clusters_groups():
    objects = {d["kind"]: d for d in docs(addons.cluster_autoscaler("rl", "eu-west-1", "1.34"))}
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"].endswith("cluster-autoscaler:v1.34.2")
    assert (
        "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,"
        "k8s.io/cluster-autoscaler/rl" in container["command"]
    )
    assert {"name": "AWS_REGION", "value": "eu-west-1"} in container["env"]
    assert pod["serviceAccountName"] == addons.AUTOSCALER_SA
    # it may scale node groups (update nodes, evict pods) and nothing more cluster-wide
    rules = objects["ClusterRole"]["rules"]
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in rules)
    assert not any("secrets" in r["resources"] for r in rules)
    with pytest.raises(SpecError, match="knows the cluster autoscaler for"):
        addons.autoscaler_image("1.20")


def test_device_plugin_runs_only_on_gpu_nodes_and_tolerates_their_taint():
    (ds,) = docs(addons.nvidia_device_plugin())
    pod = ds["spec"]["template"]["spec"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "cloudwise.io/gpu-type", "operator": "NotIn", "values": ["none"]} in expressions


@pytest.mark.integration
def test_eks_renders_autoscaler_role_pod_identity_asg_tags_and_the_apply(tmp_path):
    spec = golden_spec("eks")
    write(spec, tmp_path)
    roles = _resources(tmp_path, "aws_iam_role")
    assert set(roles) == {"cluster", "node", "cluster_autoscaler"}
    assoc = _resources(tmp_path, "aws_eks_pod_identity_association")["cluster_autoscaler"]
    assert (assoc["namespace"], assoc["service_account"]) == ("kube-system", "cluster-autoscaler")
    assert _resources(tmp_path, "aws_eks_addon")["pod_identity"]["addon_name"] == (
        "eks-pod-identity-agent"
    )
    # the node-template tags reach each pool's Auto Scaling group, not only the node group
    resolved = {p.name.replace("-", "_"): p for p in resolve(spec).pools}
    tags = _resources(tmp_path, "aws_autoscaling_group_tag")
    assert set(tags) == set(resolved)
    groups = _resources(tmp_path, "aws_eks_node_group")
    for name, tag in tags.items():
        assert tag["for_each"] == groups[name]["tags"]
        assert "resources[0].autoscaling_groups[0].name" in tag["autoscaling_group_name"]
    gpu = tags["learner_a100"]["for_each"]
    assert gpu["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"
    applied = _resources(tmp_path, "terraform_data")["cluster_addons"]
    assert "addons/apply.sh" in applied["provisioner"][0]["local-exec"]["command"]
    assert sorted(p.name for p in (tmp_path / "addons").iterdir()) == [
        "apply.sh",
        "cluster-autoscaler.yaml",
        "load-balancer-source-ranges.yaml",
        "nvidia-device-plugin.yaml",
    ]


def test_gke_nodes_use_their_own_account_and_workload_identity(tmp_path):
    write(golden_spec("gke"), tmp_path)
    account = _resources(tmp_path, "google_service_account")["nodes"]
    assert account["account_id"] == "golden-gke-nodes"
    roles = {m["role"] for m in _resources(tmp_path, "google_project_iam_member").values()}
    assert roles == {"roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader"}
    cluster_block = _resources(tmp_path, "google_container_cluster")["this"]
    assert cluster_block["workload_identity_config"][0] == {
        "workload_pool": "golden-project.svc.id.goog"
    }
    for pool in _resources(tmp_path, "google_container_node_pool").values():
        config = pool["node_config"][0]
        assert "google_service_account.nodes.email" in config["service_account"]
        assert config["workload_metadata_config"][0] == {"mode": "GKE_METADATA"}


def test_load_balancer_ranges_are_checked_and_only_rendered_when_set():
    with pytest.raises(SpecError, match="not a CIDR"):
        resolve(cluster("gcp", load_balancer_source_ranges=["10.0.0.1/8"]))
    assert "addons.tf" not in render(cluster("gcp"))
    (policy, binding) = docs(addons.load_balancer_policy(["203.0.113.0/24", "198.51.100.7/32"]))
    rule = policy["spec"]["validations"][0]["expression"]
    assert "object.spec.type != 'LoadBalancer'" in rule
    assert "['203.0.113.0/24', '198.51.100.7/32']" in rule
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }


def test_apply_script_hands_kubectl_the_endpoint_ca_token_and_every_manifest(tmp_path):
    record = tmp_path / "kubectl.json"
    bin_dir = tmp_path / "bin"
    kubectl_recorder.install(bin_dir, record, "1.35")
    folder = GOLDEN / "eks" / "addons"
    env = dict(
        os.environ,
        PATH=kubectl_recorder.path_with(bin_dir),
        CLOUDWISE_SERVER="https://example.eks.amazonaws.com",
        CLOUDWISE_CA=base64.b64encode(b"-----BEGIN CERTIFICATE-----x").decode(),
        CLOUDWISE_TOKEN="k8s-aws-v1.abc",
        CLOUDWISE_ADDONS=str(folder),
    )
    result = subprocess.run(
        ["sh", str(GOLDEN / "eks" / APPLY_SCRIPT)], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    call = kubectl_recorder.read(record)
    assert call["server"] == "https://example.eks.amazonaws.com"
    assert call["token"] == "k8s-aws-v1.abc" and call["ca_file_bytes"] == 28
    assert call["args"][2:] == [
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=cloudwise",
        "-f",
        str(folder),
    ]
    kinds = {(kind, name) for kind, _, name in call["objects"]}
    assert ("Deployment", "cluster-autoscaler") in kinds
    assert ("DaemonSet", "nvidia-device-plugin") in kinds
    assert ("ValidatingAdmissionPolicy", "cloudwise-load-balancer-source-ranges") in kinds

    bare = tmp_path / "bare"  # the script's tools, but no kubectl: a clear message
    bare.mkdir()
    for tool in ("mktemp", "base64", "rm", "cat"):
        (bare / tool).symlink_to(shutil.which(tool))
    env["PATH"] = str(bare)
    result = subprocess.run(
        [shutil.which("sh"), str(GOLDEN / "eks" / APPLY_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "kubectl is not on PATH" in result.stderr
