"""Fixtures for cloudwise tests: a spec factory, terraform with the offline provider mirror."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cloudwise.spec import ClusterSpec, NodePoolSpec
from cloudwise.testing import find_provider_mirror, write_mirror_cli_config

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[2]


def cluster(provider: str = "aws", region: str | None = None, **kw) -> ClusterSpec:
    """A small valid cluster; keyword arguments override its fields."""
    region = region or {"aws": "us-west-2", "gcp": "us-west1"}[provider]
    kw.setdefault("project", "test-project" if provider == "gcp" else None)
    kw.setdefault("pools", [NodePoolSpec("cpu", cpu=4, max_nodes=2)])
    return ClusterSpec(provider=provider, name="test", region=region, **kw)


@pytest.fixture
def terraform_bin() -> str:
    path = shutil.which("terraform")
    if not path:
        pytest.skip("terraform is not on PATH (install terraform >= 1.5 to run this test)")
    return path


@pytest.fixture(scope="session")
def mirror_cli_config(tmp_path_factory) -> Path:
    """A terraform CLI config: providers from the local mirror, through one cache for the session."""
    mirror = find_provider_mirror()
    if mirror is None:
        pytest.skip("no terraform filesystem mirror with hashicorp/aws (set CLOUDWISE_TF_MIRROR)")
    folder = tmp_path_factory.mktemp("tfrc")
    (folder / "cache").mkdir()
    return write_mirror_cli_config(folder / "terraformrc", mirror, folder / "cache")


@pytest.fixture
def offline_terraform(terraform_bin, mirror_cli_config, monkeypatch) -> Path:
    """terraform set up to install the AWS provider from the local filesystem mirror only."""
    config = mirror_cli_config
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(config))
    monkeypatch.setenv("TF_IN_AUTOMATION", "1")
    monkeypatch.setenv("CHECKPOINT_DISABLE", "1")
    return config
