"""What a run costs (`surreal.launch.cost`): per-pool $/h at the catalogs' list prices (checked against
the catalog entries themselves), a group that fits no pool, the `# cost:` lines of a kube dry
run through the real CLI, and `surreal status`'s cost line on a run folder launched on kube."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cloudwise.catalog import Catalog
from cloudwise.spec import ClusterSpec, NodePoolSpec
from surreal.launch import cluster_launch
from surreal.launch import experiment as launching
from surreal.launch.cost import RunCost, experiment_cost, status_line
from surreal.runtime.runfolder.rundir import write_json
from surreal.testing import surreal_cli
from symphony.errors import SpecError
from symphony.placement import allocatable
from symphony.spec import Experiment, Process, ProcessGroup, Resources
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "examples" / "03_kube" / "cloudwise.yaml"
IMAGE = "r/s:1"
CLUSTERS = {  # regions whose price_factor is not 1, so the regional scaling is exercised
    "gcp": {"region": "europe-west4", "zone": "europe-west4-a", "project": "p"},
    "aws": {"region": "eu-west-1"},
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "symphony-home"))
    monkeypatch.setenv("SYMPHONY_CONFIG", str(tmp_path / "no-config.yaml"))
    for key in ("HOST", "IMAGE", "CLUSTER_SPEC"):
        monkeypatch.delenv(f"SYMPHONY_KUBE_{key}", raising=False)


def two_pools(provider: str) -> ClusterSpec:
    pools = [
        NodePoolSpec("cpu", cpu=8, memory_gb=32, max_nodes=4),
        NodePoolSpec("gpu", cpu=4, memory_gb=16, gpu_type="t4", gpu=1, spot=True),
    ]
    return ClusterSpec(provider, "c", pools=pools, **CLUSTERS[provider])


def experiment() -> Experiment:
    actors = ProcessGroup(
        "actors",
        [
            Process(f"actor-{i}", "true", resources=Resources(1, 1.5, node_pool="cpu"))
            for i in range(3)
        ],
    )
    return Experiment(
        "e",
        components=[
            Process("buffer", "true", resources=Resources(cpu=2, memory_gb=6)),  # smallest fit: cpu
            actors,
            Process("learner", "true", resources=Resources(cpu=2, memory_gb=8, gpu=1)),  # gpu
        ],
    )


def catalog_node(cluster: ClusterSpec, pool: NodePoolSpec) -> tuple[float, NodePoolSpec]:
    """The catalog's choice for `pool`: its list price from the catalog entries (machine, plus
    attached GPUs, times the region's factor) and a node of its size."""
    catalog = Catalog.load(cluster.provider)
    choice = catalog.choose(pool, cluster.region, cluster.zone)
    price = catalog.machines[choice.name].hourly_usd
    if choice.attached:
        price += catalog.gpus[choice.gpu_type]["hourly_usd"] * choice.gpu
    price *= catalog.price_factor(cluster.region)
    machine = choice.machine
    size = {"cpu": machine.cpu, "memory_gb": machine.memory_gb, "gpu": choice.gpu}
    return price, dataclasses.replace(pool, **size, gpu_type=choice.gpu_type)


@pytest.mark.parametrize("provider", ["gcp", "aws"])
def test_the_hourly_cost_is_the_catalog_price_times_each_process_share_of_its_node(provider):
    cluster = two_pools(provider)
    assert Catalog.load(provider).price_factor(cluster.region) > 1
    (cpu_price, cpu_node), (gpu_price, gpu_node) = (catalog_node(cluster, p) for p in cluster.pools)
    (cpu_cores, cpu_mem), (gpu_cores, gpu_mem) = allocatable(cpu_node), allocatable(gpu_node)
    cpu_share = max(2 / cpu_cores, 6 / cpu_mem) + 3 * max(1 / cpu_cores, 1.5 / cpu_mem)
    gpu_share = max(2 / gpu_cores, 8 / gpu_mem, 1 / gpu_node.gpu)

    cost = experiment_cost(experiment(), cluster)
    assert [(p.pool, p.processes, p.spot) for p in cost.pools] == [
        ("cpu", 4, False),
        ("gpu", 1, True),
    ]
    cpu, gpu = cost.pools
    assert cpu.node_usd_per_hour == pytest.approx(cpu_price, abs=1e-4)
    assert gpu.node_usd_per_hour == pytest.approx(gpu_price, abs=1e-4)
    assert cpu.share == pytest.approx(cpu_share) and gpu.share == pytest.approx(gpu_share)
    total = cpu_price * cpu_share + gpu_price * gpu_share
    assert cost.usd_per_hour == pytest.approx(total, abs=1e-3)

    head, pools = cost.lines()
    assert head == f"cost: ${total:.2f}/h at on-demand list prices ({cluster.region})"
    assert pools.startswith(f"  cpu ({cpu_node_name(cluster)}, ${cpu_price:.2f}/h a node): ")
    assert f"4 processes, {cpu_share:.2f} nodes' worth = ${cpu_price * cpu_share:.2f}/h" in pools
    assert "; gpu (spot, " in pools and f"1 process, {gpu_share:.2f} nodes' worth" in pools
    assert RunCost.from_dict(json.loads(json.dumps(cost.to_dict()))) == cost  # run.json


def cpu_node_name(cluster: ClusterSpec) -> str:
    return Catalog.load(cluster.provider).choose(cluster.pools[0], cluster.region).name


def test_a_group_that_fits_no_pool_is_an_error_naming_it():
    too_big = Process("learner", "true", resources=Resources(cpu=64, memory_gb=8))
    with pytest.raises(SpecError, match=r"^cost: group 'learner' fits no pool: no pool of cluster"):
        experiment_cost(Experiment("e", components=[too_big]), two_pools("gcp"))
    elsewhere = Process("learner", "true", resources=Resources(node_pool="tpu"))
    with pytest.raises(SpecError, match="asks for pool 'tpu', not in the spec"):
        experiment_cost(Experiment("e", components=[elsewhere]), two_pools("gcp"))


def test_a_price_the_catalog_lacks_is_said_unknown_never_guessed(monkeypatch):
    real = Catalog.load("gcp")
    data = {"provider": "gcp", "gpus": real.gpus, "regions": real.regions, "machine_types": {}}
    for name, m in real.machines.items():
        fields = {k: v for k, v in m.__dict__.items() if k not in ("name", "family")}
        unpriced = name == "n2-standard-8"  # a machine the catalog would list without a price
        data["machine_types"][name] = {**fields, "hourly_usd": None if unpriced else m.hourly_usd}
    monkeypatch.setattr(Catalog, "load", classmethod(lambda cls, provider: Catalog(data)))
    cluster = two_pools("gcp")
    cluster.pools[0] = NodePoolSpec("cpu", machine_type="n2-standard-8")
    cost = experiment_cost(experiment(), cluster)
    assert cost.pools[0].usd_per_hour is None and cost.pools[1].usd_per_hour > 0
    assert cost.usd_per_hour == pytest.approx(cost.pools[1].usd_per_hour)
    head, pools = cost.lines()
    assert head.endswith(", not counting cpu (n2-standard-8): price unknown")
    assert pools.startswith("  cpu (n2-standard-8, price unknown): 4 processes, ")
    assert "= price unknown; gpu (spot, " in pools
    cluster.pools.pop()
    alone = Process("buffer", "true", resources=Resources(cpu=2, memory_gb=6))
    unknown = experiment_cost(Experiment("e", components=[alone]), cluster)
    assert unknown.lines()[0] == "cost: price unknown (no list price for cpu (n2-standard-8))"
    assert status_line(unknown, 2.0, {}) == unknown.rate()  # no made-up figures


def kube_plan(runs: Path):
    plan = launching.plan("ppo", env="gym:CartPole-v1", folder=str(runs), backend="kube")
    plan.backend, plan.config.run.image = "kube", IMAGE
    return plan


@pytest.mark.integration
def test_the_kube_dry_run_prints_the_cost_of_its_processes(tmp_path):
    done = surreal_cli(
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--backend", "kube", "--image", IMAGE]
        + ["-o", f"cluster_spec={CLUSTER}", "--folder", str(tmp_path / "runs"), "--dry-run"],
        tmp_path,
        tmp_path / "symphony-home",
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("# cost: ")]
    assert len(printed) == 1, done.stdout
    cost = experiment_cost(
        launching.build_experiment(kube_plan(tmp_path / "runs")), ClusterSpec.load(CLUSTER)
    )
    head, pools = cost.lines()
    assert printed[0] == f"# {head}"
    assert f"# {pools}\n" in done.stdout
    assert float(re.match(r"# cost: \$([0-9.]+)/h", printed[0])[1]) == round(cost.usd_per_hour, 2)
    assert cost.usd_per_hour > 0 and not (tmp_path / "runs").exists()


def test_status_shows_the_cost_so_far_and_of_the_rest_of_the_budget(tmp_path):
    plan = kube_plan(tmp_path / "runs")
    launching.create_run(plan)  # the run folder as `launch_detached` writes it
    cost = experiment_cost(launching.build_experiment(plan), ClusterSpec.load(CLUSTER))
    cluster_launch.record_cost(plan, cost)
    run = plan.run_dir
    info = json.loads(run.run_file.read_text())
    assert RunCost.from_dict(info["cost"]) == cost
    now = time.time()
    write_json(run.run_file, {**info, "created": now - 3 * 3600})  # started 3 h ago
    status = {"global_step": 40_000, "total_steps": 112_000, "charts/sps": 10.0, "updated": now}
    write_json(run.status_file, status)

    from surreal.launch.evaluate import run_status

    shown = run_status(run.path)
    line = next(x for x in shown.splitlines() if x.startswith("  cost       "))
    rate = cost.usd_per_hour
    so_far, hours = re.search(
        r"so far \$([0-9.]+) \(([0-9.]+) h start to last status\)", line
    ).groups()
    assert float(hours) == 3.0 and float(so_far) == pytest.approx(3 * rate, abs=0.011)
    rest, rest_h = re.search(
        r"remaining ~\$([0-9.]+) \(~([0-9.]+) h at 10 steps/s\)", line
    ).groups()
    assert float(rest_h) == 2.0 and float(rest) == pytest.approx(
        2 * rate, abs=0.011
    )  # 72,000 steps
    assert line.startswith(f"  cost       ${rate:.2f}/h at on-demand list prices (us-west1); ")

    assert status_line(cost, 0.5, {"total_steps": 10, "global_step": 10}).endswith(
        "(30 min since start); budget used"
    )
    assert "remaining 10 steps: unknown until steps/s is measured" in status_line(
        cost, 0.5, {"total_steps": 10}
    )


@pytest.mark.integration
def test_a_kube_launch_records_the_cost_that_surreal_status_shows(tmp_path, monkeypatch):
    pytest.importorskip("kmock")
    from surreal.cli import main as surreal_main
    from symphony.kube.testing_kube import KubeEndpoint

    runs = tmp_path / "runs"
    with KubeEndpoint() as endpoint:
        monkeypatch.setenv("SYMPHONY_KUBE_HOST", endpoint.url)
        launched = CliRunner().invoke(
            surreal_main,
            [
                "launch",
                "ppo",
                "--env",
                "gym:CartPole-v1",
                "--actors",
                "2",
                "--backend",
                "kube",
                "--image",
                IMAGE,
            ]
            + ["--folder", str(runs), "--name", "cart", "-o", f"cluster_spec={CLUSTER}"],
            catch_exceptions=False,
        )
        assert launched.exit_code == 0, launched.output
        run = runs / "cart" / "t1"
        cost = RunCost.from_dict(json.loads((run / "run.json").read_text())["cost"])
        assert f"\n{cost.lines()[0]} (`surreal status` tracks it)" in launched.output
        shown = CliRunner().invoke(surreal_main, ["status", str(run)], catch_exceptions=False)
        assert shown.exit_code == 0, shown.output
        line = next(x for x in shown.output.splitlines() if x.startswith("  cost       "))
        assert line.startswith(f"  cost       ${cost.usd_per_hour:.2f}/h at on-demand list prices")
        assert "so far $0.00 (0 min " in line  # just launched
        steps = json.loads((run / "config.json").read_text())["run"]["steps"]
        assert f"remaining {steps:,} steps: unknown until steps/s is measured" in line
