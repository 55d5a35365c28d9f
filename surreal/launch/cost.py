"""What a run's processes cost on a cloudwise cluster, at the catalog's on-demand list prices.

Each process costs the hourly price of a node of the pool its pod lands on (the group's
`node_pool`, else the smallest pool the group's summed request fits: `placement.smallest_pool`)
times its share of that node: the largest of its cpu / allocatable cpu, memory / allocatable
memory and gpus / the node's gpus (`placement.allocatable`). Network, disks, the control plane,
idle nodes (`min_nodes`) and spot discounts are not counted; a price missing from the catalog
is reported as unknown, never guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cloudwise.errors import CloudwiseError
from cloudwise.resolve import ResolvedPool, resolve_pool
from cloudwise.spec import ClusterSpec
from symphony.errors import SpecError
from symphony.placement import allocatable, smallest_pool
from symphony.spec import Experiment, Process, Resources


@dataclass(frozen=True)
class PoolCost:
    """One pool's part: its machine, a node's list price ($/h, None: not in the catalog), the
    processes placed on it and their summed share of a node (`nodes' worth`)."""

    pool: str
    machine_type: str
    node_usd_per_hour: float | None
    processes: int
    share: float
    spot: bool = False

    @property
    def usd_per_hour(self) -> float | None:
        """The pool's $/h: a node's price x the summed share (None when the price is unknown)."""
        return None if self.node_usd_per_hour is None else self.node_usd_per_hour * self.share

    def describe(self) -> str:
        """`cpu (n2-standard-8, $0.39/h a node): 9 processes, 3.46 nodes' worth = $1.35/h`."""
        spot = "spot, " if self.spot else ""
        each = (
            "price unknown"
            if self.node_usd_per_hour is None
            else f"${self.node_usd_per_hour:.2f}/h a node"
        )
        total = "price unknown" if self.usd_per_hour is None else f"${self.usd_per_hour:.2f}/h"
        many = "process" if self.processes == 1 else "processes"
        return (
            f"{self.pool} ({spot}{self.machine_type}, {each}): {self.processes} {many}, "
            f"{self.share:.2f} nodes' worth = {total}"
        )


@dataclass(frozen=True)
class RunCost:
    """The run's hourly cost per pool in one region (`lines`; `to_dict` for run.json)."""

    region: str
    pools: tuple[PoolCost, ...]

    @property
    def usd_per_hour(self) -> float:
        """The summed $/h of the pools whose price is known."""
        return sum(p.usd_per_hour or 0.0 for p in self.pools)

    @property
    def unknown(self) -> list[str]:
        """`pool (machine)` of each pool whose price the catalog does not list."""
        return [f"{p.pool} ({p.machine_type})" for p in self.pools if p.usd_per_hour is None]

    def rate(self) -> str:
        """`$1.23/h at on-demand list prices (us-west1)`, naming pools whose price is unknown."""
        if self.pools and len(self.unknown) == len(self.pools):
            return f"price unknown (no list price for {', '.join(self.unknown)})"
        missing = f", not counting {', '.join(self.unknown)}: price unknown" if self.unknown else ""
        return f"${self.usd_per_hour:.2f}/h at on-demand list prices ({self.region}){missing}"

    def lines(self) -> list[str]:
        """`cost: $X/h at on-demand list prices (REGION)`, then the pools (`breakdown`)."""
        return [f"cost: {self.rate()}", f"  {self.breakdown()}"]

    def breakdown(self) -> str:
        """Each pool's `PoolCost.describe`, `; `-separated."""
        return "; ".join(p.describe() for p in self.pools)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: region and pool rows."""
        return {"region": self.region, "pools": [asdict(p) for p in self.pools]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunCost:
        """The inverse of `to_dict`."""
        return cls(data["region"], tuple(PoolCost(**p) for p in data["pools"]))


def _share(proc: Process, pool: ResolvedPool) -> float:
    cpu, memory = allocatable(pool.node)
    res = proc.resources
    parts = [res.cpu / cpu, (res.memory_gb or 0) / memory]
    if pool.node.gpu:
        parts.append(res.gpu / pool.node.gpu)
    return max(parts)


def experiment_cost(experiment: Experiment, cluster: ClusterSpec) -> RunCost:
    """Every process's $/h on `cluster`, summed per pool (pools in the spec's order).

    Raises:
        symphony.errors.SpecError: a group fits no pool (the message says which and why), or a
            pool's machine cannot be chosen.
    """
    resolved: dict[str, ResolvedPool] = {}
    try:
        for spec in cluster.pools:
            resolved[spec.name] = resolve_pool(spec, cluster)
    except CloudwiseError as err:
        raise SpecError(f"cost: {err}") from None
    counts = {name: 0 for name in resolved}
    shares = {name: 0.0 for name in resolved}
    for group in experiment.groups():
        name = group.node_pool()
        if name is None:
            procs = group.processes
            memory = sum(p.resources.memory_gb or 0 for p in procs)
            want = Resources(
                cpu=sum(p.resources.cpu for p in procs),
                memory_gb=memory or None,
                gpu=sum(p.resources.gpu for p in procs),
            )
            try:
                name = smallest_pool(cluster, want).node_pool
            except SpecError as err:
                raise SpecError(f"cost: group {group.name!r} fits no pool: {err}") from None
        if name not in resolved:
            raise SpecError(f"cost: group {group.name!r} asks for pool {name!r}, not in the spec")
        counts[name] += len(group.processes)
        shares[name] += sum(_share(p, resolved[name]) for p in group.processes)
    rows = tuple(
        PoolCost(name, _machine(r), r.choice.hourly_usd, counts[name], shares[name], r.request.spot)
        for name, r in resolved.items()
        if counts[name]
    )
    return RunCost(cluster.region, rows)


def _machine(pool: ResolvedPool) -> str:
    """`n2-standard-8`, or `n1-standard-8 + 1 x v100` where GPUs attach to the machine."""
    choice = pool.choice
    return choice.name + (f" + {choice.gpu} x {choice.gpu_type}" if choice.attached else "")


def status_line(cost: RunCost, hours: float, status: dict[str, Any], ended: bool = False) -> str:
    """`$1.23/h at ...; so far $4.56 (3.7 h since start); remaining ~$7.89 (~6.4 h at 1,234
    steps/s)`: `hours` the run has run (`ended`: from its start to its last status); the rest
    of the budget from `status` (total_steps, global_step, charts/sps)."""
    if cost.pools and len(cost.unknown) == len(cost.pools):
        return cost.rate()
    rate, span = cost.usd_per_hour, "start to last status" if ended else "since start"
    text = f"{cost.rate()}; so far ${rate * hours:.2f} ({_hours(hours)} {span})"
    left = max(0, int(status.get("total_steps") or 0) - int(status.get("global_step") or 0))
    sps = float(status.get("charts/sps") or 0)
    if not left:
        return text + "; budget used"
    if sps <= 0:
        return text + f"; remaining {left:,} steps: unknown until steps/s is measured"
    rest = left / sps / 3600
    return text + f"; remaining ~${rate * rest:.2f} (~{_hours(rest)} at {sps:,.0f} steps/s)"


def _hours(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"
