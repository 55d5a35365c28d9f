"""terraform/ holds exactly what cloudwise generates for the paper's cluster on GKE and EKS."""

import os
import subprocess
import sys

import pytest

from cloudwise import ClusterSpec, resolve
from symphony.testing import scaled
from tests.cloudwise.conftest import REPO

pytestmark = pytest.mark.timeout(120)


def test_regenerating_the_reference_clusters_changes_nothing(tmp_path):
    env = dict(os.environ, CLOUDWISE=f"{sys.executable} -m cloudwise")
    result = subprocess.run(
        [str(REPO / "scripts" / "cloudwise-reference.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(100),
    )
    assert result.returncode == 0, result.stderr
    for provider in ("gke", "eks"):
        fresh = {
            p.relative_to(tmp_path / provider).as_posix(): p.read_text()
            for p in (tmp_path / provider).rglob("*")
            if p.is_file()
        }
        committed = {
            p.relative_to(REPO / "terraform" / provider).as_posix(): p.read_text()
            for p in (REPO / "terraform" / provider).rglob("*")
            if p.is_file() and p.suffix in (".tf", ".yaml", ".sh")
        }
        assert fresh == committed, (
            f"terraform/{provider} is stale: run scripts/cloudwise-reference.sh"
        )


@pytest.mark.parametrize("provider", ["gke", "eks"])
def test_reference_cluster_is_the_papers(provider):
    resolved = resolve(ClusterSpec.load(REPO / "terraform" / provider))
    pools = {p.name: p.node for p in resolved.pools}
    assert pools["actors-8"].cpu == 8 and pools["actors-32"].cpu == 32
    assert pools["actors-8"].gpu == 0 and pools["actors-8"].spot
    assert (pools["learner-1gpu"].gpu_type, pools["learner-1gpu"].gpu) == ("v100", 1)
    assert (pools["learner-4gpu"].gpu_type, pools["learner-4gpu"].gpu) == ("v100", 4)
    assert all(p.min_nodes == 0 for name, p in pools.items() if name != "system")
