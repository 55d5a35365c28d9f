"""A 1,024-actor surreal run on the cluster backends, without a cluster to run it on.

kube: `surreal launch ... --backend kube --dry-run -o DIR` writes Services only for what
processes connect to (each process's `/metrics` is found through its pod's annotations), stays
under 2 MB and 2 objects per group and reached service, and prints a summary instead of the
YAML. slurm: the batch script of every group that `surreal launch ... --backend slurm
--dry-run` prints is accepted by `sbatch --test-only` on the test cluster (nodes of 8 CPUs,
one actor group each), and nothing is submitted.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from surreal.cli import main as surreal_main
from symphony.addresses import env_prefix
from tests.symphony.kube_env import POD_IP, config_maps, container_env
from tests.symphony.slurm_cluster import SlurmCluster, require_slurm

pytestmark = pytest.mark.timeout(600)

ACTORS = 1024
IMAGE = "registry.example.com/surreal/cpu:1"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "symphony-home"))
    monkeypatch.setenv("SYMPHONY_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.setenv("SYMPHONY_OWNER", "alice")
    monkeypatch.delenv("SYMPHONY_KUBE_HOST", raising=False)
    monkeypatch.delenv("SYMPHONY_KUBE_IMAGE", raising=False)


def dry_run(tmp_path: Path, *args: str):
    result = CliRunner().invoke(
        surreal_main,
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", str(ACTORS)]
        + ["--folder", str(tmp_path / "runs"), "--dry-run", *args],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "runs").exists()
    return result.output


@pytest.mark.integration
def test_a_1024_actor_kube_dry_run_is_small_and_has_services_only_for_what_processes_reach(
    tmp_path,
):
    out = tmp_path / "manifests"
    printed = dry_run(tmp_path, "--backend", "kube", "--image", IMAGE, "-o", str(out))
    files = sorted(out.iterdir())
    objects = [yaml.safe_load(p.read_text()) for p in files]
    assert sum(p.stat().st_size for p in files) <= 2_000_000
    summary = printed.split("\n}\n", 1)[1]  # after the config's JSON
    assert f"{len(objects)} objects" in summary and str(out) in summary and len(summary) < 1000

    workloads = [o for o in objects if o["kind"] in ("Job", "Deployment")]
    groups = {o["metadata"]["labels"]["symphony.io/group"] for o in workloads}
    assert len(groups) == 5 + ACTORS // 8
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    assert not [s for s in services if s.startswith("prom-")]  # no Service per actor
    assert len(objects) <= 2 * (len(groups) + len(services))

    ns, maps = objects[0]["metadata"]["name"], config_maps(objects)
    connected: set[str] = set()
    for workload in workloads:
        template = workload["spec"]["template"]
        notes = template["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"
        scraped = [p for c in template["spec"]["containers"] for p in c["ports"] if "name" in p]
        assert [p["name"] for p in scraped] == [f"prom-{k}" for k in range(len(scraped))]
        assert notes["prometheus.io/port"] == str(scraped[0]["containerPort"])
        for container in template["spec"]["containers"]:
            env = container_env(container, maps)
            check_hosts(env, ns, services, container["name"])
            connected |= set(env["SYMPH_SERVICES"].split(",")) - {f"prom-{container['name']}"}
    assert connected == set(services)  # every service a process binds for others has its Service


def check_hosts(env: dict[str, str], ns: str, services: dict, process: str) -> None:
    """A process's /metrics is on its pod's IP; every other service it declares behind its
    Service, on the Service's port."""
    for svc in env["SYMPH_SERVICES"].split(","):
        prefix = env_prefix(svc)
        host, port = env[f"{prefix}_HOST"], int(env[f"{prefix}_PORT"])
        if svc == f"prom-{process}":
            assert host == POD_IP
            continue
        assert host == f"{svc}.{ns}.svc" and services[svc]["spec"]["ports"][0]["port"] == port


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """The test cluster with nodes of 8 CPUs: a node holds one group of 8 one-CPU actors."""
    require_slurm()
    monkeypatch.setenv("SLURM_NODE_CPUS", "8")
    cluster = SlurmCluster(tmp_path / "cluster").start()
    try:
        yield cluster
    finally:
        cluster.stop()


def scripts_of(printed: str) -> dict[str, str]:
    """Group -> batch script, from the dry run's `# --- job for group G ---` sections."""
    parts = re.split(r"^# --- job for group (\S+) ---\n", printed, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.slurm
def test_every_batch_script_of_a_1024_actor_run_is_accepted_by_sbatch_test_only(cluster, tmp_path):
    scripts = scripts_of(dry_run(tmp_path, "--backend", "slurm"))
    assert len(scripts) == 5 + ACTORS // 8
    assert scripts["actors-127"].count("#SBATCH --cpus-per-task=8\n") == 1
    env = {**os.environ, **cluster.env}
    refused = {}
    for group, script in scripts.items():
        path = tmp_path / f"{group}.sbatch"
        path.write_text(script)
        proc = subprocess.run(
            ["sbatch", "--test-only", str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode != 0:
            refused[group] = proc.stderr.strip()
    assert refused == {}
    assert cluster.squeue_ids() == []  # --test-only submits nothing
