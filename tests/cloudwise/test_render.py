"""Rendering is pure and matches golden files; the HCL is `terraform fmt` clean and parses."""

import os
import re
import subprocess
from pathlib import Path

import hcl2
import pytest

from cloudwise import ClusterSpec, render, resolve
from cloudwise.render import write
from cloudwise.render.eks import AUTOSCALER
from tests.cloudwise.conftest import GOLDEN, REPO

pytestmark = pytest.mark.timeout(60)
UPDATE = os.environ.get("CLOUDWISE_UPDATE_GOLDEN") == "1"


def golden_spec(name: str) -> ClusterSpec:
    return ClusterSpec.load(GOLDEN / name / "cloudwise.yaml")


def rendered_files(folder: Path) -> list[Path]:
    """Everything cloudwise wrote in a folder: the .tf files and addons/."""
    return [*folder.glob("*.tf"), *folder.glob("addons/*")]


@pytest.mark.parametrize("name", ["gke", "eks"])
def test_rendering_matches_golden_files(name):
    files = render(golden_spec(name))
    folder = GOLDEN / name
    if UPDATE:
        for old in rendered_files(folder):
            old.unlink()
        for file, text in files.items():
            (folder / file).parent.mkdir(exist_ok=True)
            (folder / file).write_text(text)
    expected = {p.relative_to(folder).as_posix(): p.read_text() for p in rendered_files(folder)}
    assert files == expected, (
        "run CLOUDWISE_UPDATE_GOLDEN=1 pytest tests/cloudwise/test_render.py and review the diff"
    )


@pytest.mark.parametrize("name", ["gke", "eks"])
def test_rendering_is_pure(name):
    spec = golden_spec(name)
    before = spec.to_yaml()
    assert render(spec) == render(golden_spec(name))
    assert spec.to_yaml() == before


def all_rendered_dirs() -> list[Path]:
    return [GOLDEN / "gke", GOLDEN / "eks", REPO / "terraform" / "gke", REPO / "terraform" / "eks"]


def test_every_rendered_file_is_terraform_fmt_clean(terraform_bin, tmp_path):
    for folder in all_rendered_dirs():
        files = list(folder.glob("*.tf"))
        assert files, f"{folder} has no .tf files"
        result = subprocess.run(
            [terraform_bin, "fmt", "-check", "-diff", "-no-color", str(folder)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_rendered_file_parses():
    for folder in all_rendered_dirs():
        for path in folder.glob("*.tf"):
            with path.open() as fh:
                parsed = hcl2.load(fh)
            assert parsed, path


def _plain(obj):
    """python-hcl2 >= 7 keeps string quotes and marks blocks; strip both so any version compares."""
    if isinstance(obj, dict):
        return {_plain(k): _plain(v) for k, v in obj.items() if k != "__is_block__"}
    if isinstance(obj, list):
        return [_plain(x) for x in obj]
    if isinstance(obj, str) and len(obj) >= 2 and obj[0] == obj[-1] == '"':
        return obj[1:-1]
    return obj


def _resources(folder: Path, kind: str) -> dict[str, dict]:
    out = {}
    for path in folder.glob("*.tf"):
        with path.open() as fh:
            for entry in _plain(hcl2.load(fh)).get("resource", []):
                for rtype, named in entry.items():
                    if rtype == kind:
                        out.update(named)
    return out


def test_gke_pools_carry_autoscaling_accelerators_taints_labels_and_spot(tmp_path):
    spec = golden_spec("gke")
    write(spec, tmp_path)
    pools = _resources(tmp_path, "google_container_node_pool")
    resolved = {p.name: p for p in resolve(spec).pools}
    assert set(pools) == {name.replace("-", "_") for name in resolved}
    render_pool = pools["render"]
    config = render_pool["node_config"][0]
    assert config["machine_type"] == resolved["render"].choice.name
    assert config["guest_accelerator"][0]["type"] == "nvidia-tesla-t4"
    assert [t["key"] for t in config["taint"]] == ["nvidia.com/gpu", "workload"]
    assert config["labels"]["cloudwise.io/gpu-type"] == "t4"
    assert render_pool["node_locations"] == [
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-central1-f",
    ]
    assert render_pool["autoscaling"][0] == {"total_min_node_count": 0, "total_max_node_count": 8}
    assert pools["actors"]["node_config"][0]["spot"] is True
    assert "taint" not in pools["actors"]["node_config"][0]
    cluster = _resources(tmp_path, "google_container_cluster")["this"]
    assert cluster["remove_default_node_pool"] is True


def test_eks_node_groups_carry_scaling_ami_labels_taints_and_autoscaler_tags(tmp_path):
    spec = golden_spec("eks")
    write(spec, tmp_path)
    groups = _resources(tmp_path, "aws_eks_node_group")
    learner = groups["learner_a100"]
    assert learner["instance_types"] == ["p4d.24xlarge"]
    assert learner["ami_type"] == "AL2023_x86_64_NVIDIA"
    assert learner["scaling_config"][0] == {"min_size": 0, "max_size": 1, "desired_size": 0}
    assert learner["taint"][0] == {
        "key": "nvidia.com/gpu",
        "value": "present",
        "effect": "NO_SCHEDULE",
    }
    assert learner["labels"]["cloudwise.io/gpu-count"] == "8"
    tags = learner["tags"]
    assert tags[f"{AUTOSCALER}/enabled"] == "true"
    assert tags[f"{AUTOSCALER}/golden-eks"] == "owned"
    assert tags[f"{AUTOSCALER}/node-template/label/cloudwise.io/pool"] == "learner-a100"
    assert tags[f"{AUTOSCALER}/node-template/taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert groups["actors"]["capacity_type"] == "SPOT"
    assert groups["system"]["ami_type"] == "AL2023_x86_64_STANDARD"
    assert set(_resources(tmp_path, "aws_iam_role")) == {"cluster", "node", "cluster_autoscaler"}


def test_write_removes_stale_generated_files_only(tmp_path):
    write(golden_spec("eks"), tmp_path)
    (tmp_path / "mine.tf").write_text("# user file\n")
    write(golden_spec("gke"), tmp_path)
    assert not (tmp_path / "network.tf").exists() and not (tmp_path / "iam.tf").exists()
    assert (tmp_path / "mine.tf").exists()


def _jsonencode_argument(expression: str) -> dict:
    """The object inside a rendered `jsonencode({...})`, parsed back as HCL."""
    match = re.search(r"jsonencode\((\{.*\})\)", expression, re.DOTALL)
    assert match, expression
    return _plain(hcl2.loads(f"v = {match.group(1)}\n"))["v"]


def test_rendered_clusters_enforce_network_policies(tmp_path):
    """symphony's kube backend creates a NetworkPolicy per experiment; both clusters must enforce it."""
    write(golden_spec("gke"), tmp_path / "gke")
    gke = _resources(tmp_path / "gke", "google_container_cluster")["this"]
    assert gke["datapath_provider"] == "ADVANCED_DATAPATH"  # Dataplane V2

    write(golden_spec("eks"), tmp_path / "eks")
    addons = _resources(tmp_path / "eks", "aws_eks_addon")
    assert addons["vpc_cni"]["addon_name"] == "vpc-cni"
    assert _jsonencode_argument(addons["vpc_cni"]["configuration_values"]) == {
        "enableNetworkPolicy": "true"
    }
    groups = _resources(tmp_path / "eks", "aws_eks_node_group")
    assert groups and all("aws_eks_addon.vpc_cni" in str(g["depends_on"]) for g in groups.values())
