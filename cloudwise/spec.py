"""Cluster and node-pool specs in provider-neutral terms, saved as `cloudwise.yaml`."""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cloudwise.errors import SpecError
from cloudwise.labels import PREFIX, Taint

PROVIDERS = ("gcp", "aws")
GPU_TYPES = ("p100", "v100", "t4", "a10g", "l4", "a100", "a100-80gb", "h100")
"""Every GPU type cloudwise knows; which provider/family/region offers which is in the catalogs."""
RETIRED_GPUS = {
    "k80": "K80 GPUs are retired (GCE removed them on 2024-05-01; EC2 no longer offers P2)",
}

DEFAULT_FILENAME = "cloudwise.yaml"
KUBERNETES_VERSION = "1.35"
"""The default control-plane version: the newest minor both EKS and GKE run (EKS standard support
until 2027-03-27, AWS's calendar); 1.31 left EKS standard support on 2025-11-26, 1.34 leaves it on
2026-12-02. cloudwise installs the cluster autoscaler of the same minor (`cloudwise.addons`)."""
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass
class NodePoolSpec:
    """One node pool, described by what it needs rather than by a machine type.

    Attributes:
        name: pool name (lowercase letters, digits, `-`; at most 40 characters).
        cpu: vCPUs each node needs at least.
        memory_gb: memory each node needs at least, in GB.
        gpu_type: GPU model (`v100`, `t4`, `a100`, ...); needs `gpu` >= 1.
        gpu: GPUs each node needs.
        machine_type: an explicit machine type; skips the catalog search (still validated).
        spot: use spot / preemptible capacity (cheaper, can be reclaimed).
        min_nodes: autoscaling floor; 0 lets the pool scale to zero when idle.
        max_nodes: autoscaling ceiling.
        disk_gb: boot disk size per node.
        labels: extra Kubernetes node labels (the `cloudwise.io/` prefix is reserved).
        taints: extra taints, `key=value:Effect`; GPU pools always get `nvidia.com/gpu=present:NoSchedule`.
    """

    name: str
    cpu: int | None = None
    memory_gb: float | None = None
    gpu_type: str | None = None
    gpu: int = 0
    machine_type: str | None = None
    spot: bool = False
    min_nodes: int = 0
    max_nodes: int = 1
    disk_gb: int = 100
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodePoolSpec:
        """Build a pool from its YAML mapping; unknown keys are a SpecError with a suggestion."""
        _check_keys(data, cls, f"pool {data.get('name', '?')!r}")
        pool = cls(**data)
        pool.labels = {str(k): str(v) for k, v in (pool.labels or {}).items()}
        pool.taints = [str(t) for t in (pool.taints or [])]
        if pool.gpu_type is not None:
            pool.gpu_type = str(pool.gpu_type).lower()
        return pool

    def to_dict(self) -> dict[str, Any]:
        """The YAML mapping: fields left at their defaults are omitted, except the node counts."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            default = (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            )
            if value != default or f.name in ("name", "min_nodes", "max_nodes"):
                out[f.name] = value
        return out

    def validate(self) -> None:
        """Check the pool on its own (the catalog checks machine types, GPUs and regions)."""
        where = f"pool {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise SpecError(
                f"{where}: names use lowercase letters, digits and '-', start with a letter, "
                "and have at most 40 characters (e.g. 'actors-8')"
            )
        _check_int(where, "min_nodes", self.min_nodes, 0)
        _check_int(where, "max_nodes", self.max_nodes, 1)
        if self.min_nodes > self.max_nodes:
            raise SpecError(
                f"{where}: min_nodes ({self.min_nodes}) > max_nodes ({self.max_nodes}); "
                "lower min_nodes or raise max_nodes"
            )
        _check_int(where, "gpu", self.gpu, 0)
        _check_int(where, "disk_gb", self.disk_gb, 10)
        if self.cpu is not None:
            _check_int(where, "cpu", self.cpu, 1)
        if self.memory_gb is not None and not (
            isinstance(self.memory_gb, int | float) and self.memory_gb > 0
        ):
            raise SpecError(
                f"{where}: memory_gb must be a positive number of GB, got {self.memory_gb!r}"
            )
        self._validate_gpu(where)
        if self.cpu is None and self.machine_type is None and not self.gpu:
            raise SpecError(
                f"{where}: say what a node needs: set cpu (and memory_gb, gpu) or machine_type"
            )
        self._validate_labels(where)

    def _validate_gpu(self, where: str) -> None:
        if self.gpu and not self.gpu_type:
            raise SpecError(
                f"{where}: gpu is {self.gpu} but gpu_type is not set; set gpu_type (one of {', '.join(GPU_TYPES)})"
            )
        if self.gpu_type in RETIRED_GPUS:
            raise SpecError(
                f"{where}: {RETIRED_GPUS[self.gpu_type]}; pick one of {', '.join(GPU_TYPES)} "
                "(t4 or l4 for small jobs)"
            )
        if self.gpu_type and self.gpu_type not in GPU_TYPES:
            near = difflib.get_close_matches(self.gpu_type, GPU_TYPES, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise SpecError(
                f"{where}: unknown gpu_type {self.gpu_type!r}{hint}; known: {', '.join(GPU_TYPES)}"
            )
        if self.gpu_type and not self.gpu:
            raise SpecError(
                f"{where}: gpu_type is {self.gpu_type} but gpu is 0; set gpu: 1 or more, or drop gpu_type"
            )

    def _validate_labels(self, where: str) -> None:
        for key, value in self.labels.items():
            if key.startswith(PREFIX):
                raise SpecError(
                    f"{where}: label {key!r} uses the reserved prefix {PREFIX}; pick another key"
                )
            if not _LABEL_VALUE.match(value):
                raise SpecError(
                    f"{where}: label {key}={value!r}: values are at most 63 letters, digits, '-', '_', '.'"
                )
        for text in self.taints:
            try:
                Taint.parse(text)
            except ValueError as exc:
                raise SpecError(f"{where}: {exc}") from None


@dataclass
class ClusterSpec:
    """A Kubernetes cluster and its node pools on one provider.

    Attributes:
        provider: `gcp` (GKE) or `aws` (EKS).
        name: cluster name.
        region: provider region (`us-west1`, `us-west-2`).
        project: GCP project id (required on gcp); on aws, the account id (optional, informative).
        zone: GKE only: a zonal cluster in this zone; unset means a regional cluster.
        kubernetes_version: control-plane version (default `KUBERNETES_VERSION`).
        load_balancer_source_ranges: CIDRs allowed to reach LoadBalancer Services; when set, the
            cluster refuses a LoadBalancer Service whose `loadBalancerSourceRanges` is missing or
            names a range outside this list (an admission policy). Empty: not restricted.
        pools: the node pools.
    """

    provider: str
    name: str
    region: str
    project: str | None = None
    zone: str | None = None
    kubernetes_version: str = KUBERNETES_VERSION
    load_balancer_source_ranges: list[str] = field(default_factory=list)
    pools: list[NodePoolSpec] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterSpec:
        """Build a cluster from its YAML mapping (pools as a list of mappings)."""
        if not isinstance(data, dict):
            raise SpecError(
                "a cloudwise spec is a YAML mapping with provider, name, region and pools"
            )
        _check_keys(data, cls, "cluster")
        data = dict(data)
        pools = data.pop("pools", None) or []
        if not isinstance(pools, list) or not all(isinstance(p, dict) for p in pools):
            raise SpecError("'pools' must be a list of mappings, each with at least a name")
        cluster = cls(**data, pools=[NodePoolSpec.from_dict(p) for p in pools])
        for attr in ("project", "kubernetes_version"):
            if getattr(cluster, attr) is not None:
                setattr(cluster, attr, str(getattr(cluster, attr)))
        return cluster

    def to_dict(self) -> dict[str, Any]:
        """The YAML mapping."""
        out: dict[str, Any] = {"provider": self.provider, "name": self.name, "region": self.region}
        for attr in ("project", "zone"):
            if getattr(self, attr) is not None:
                out[attr] = getattr(self, attr)
        out["kubernetes_version"] = self.kubernetes_version
        if self.load_balancer_source_ranges:
            out["load_balancer_source_ranges"] = list(self.load_balancer_source_ranges)
        out["pools"] = [p.to_dict() for p in self.pools]
        return out

    @classmethod
    def from_yaml(cls, text: str) -> ClusterSpec:
        """Parse a `cloudwise.yaml` text."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SpecError(f"cloudwise.yaml is not valid YAML: {exc}") from None
        return cls.from_dict(data)

    def to_yaml(self) -> str:
        """The `cloudwise.yaml` text."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    @classmethod
    def load(cls, path: str | Path) -> ClusterSpec:
        """Read a spec from a file (or from `cloudwise.yaml` inside a directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / DEFAULT_FILENAME
        if not path.exists():
            raise SpecError(f"{path} does not exist; create it with `cloudwise init`")
        return cls.from_yaml(path.read_text())

    def save(self, path: str | Path) -> Path:
        """Write the spec (to `cloudwise.yaml` inside `path` when it is a directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / DEFAULT_FILENAME
        path.write_text(self.to_yaml())
        return path

    def pool(self, name: str) -> NodePoolSpec:
        """The pool called `name`; a SpecError lists the pools there are."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        have = ", ".join(p.name for p in self.pools) or "none"
        raise SpecError(f"no pool named {name!r} in cluster {self.name!r} (pools: {have})")

    def validate(self) -> None:
        """Check the cluster and each pool on their own (see `cloudwise.catalog.resolve` for the rest)."""
        if self.provider not in PROVIDERS:
            raise SpecError(
                f"provider {self.provider!r} is not supported; use one of {', '.join(PROVIDERS)}"
            )
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise SpecError(
                f"cluster name {self.name!r}: use lowercase letters, digits and '-', starting with a letter"
            )
        if not self.region:
            raise SpecError("region is not set; set it (e.g. us-west1 on gcp, us-west-2 on aws)")
        if self.provider == "gcp" and not self.project:
            raise SpecError("gcp clusters need a project id; set project: my-gcp-project")
        if self.zone and self.provider == "aws":
            raise SpecError(
                "zone applies to GKE only; EKS clusters span zones of the region: remove zone"
            )
        if self.zone and not self.zone.startswith(self.region + "-"):
            raise SpecError(
                f"zone {self.zone!r} is not in region {self.region!r}; pick a zone like {self.region}-b"
            )
        if not re.fullmatch(r"1\.\d+(\.[0-9A-Za-z.+-]+)?", str(self.kubernetes_version)):
            raise SpecError(
                f"kubernetes_version {self.kubernetes_version!r}: give a version such as "
                f"{KUBERNETES_VERSION!r}"
            )
        _check_cidrs(self.load_balancer_source_ranges)
        if not self.pools:
            raise SpecError("the cluster has no node pools; add one with `cloudwise pool add`")
        seen: set[str] = set()
        for pool in self.pools:
            pool.validate()
            if pool.name in seen:
                raise SpecError(f"two pools are named {pool.name!r}; pool names must be unique")
            seen.add(pool.name)


def _check_keys(data: dict[str, Any], cls: type, where: str) -> None:
    known = [f.name for f in dataclasses.fields(cls)]
    for key in data:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; known keys: {', '.join(known)}"
            raise SpecError(f"{where}: unknown key {key!r}{hint}")
    if "name" not in data and cls is NodePoolSpec:
        raise SpecError(f"{where}: every pool needs a name")
    if cls is ClusterSpec:
        missing = [k for k in ("provider", "name", "region") if k not in data]
        if missing:
            raise SpecError(f"cluster: missing {', '.join(missing)}; see `cloudwise init --help`")


def _check_cidrs(ranges: Any) -> None:
    import ipaddress

    if not isinstance(ranges, list):
        raise SpecError(
            "load_balancer_source_ranges must be a list of CIDRs, e.g. [203.0.113.0/24]"
        )
    for text in ranges:
        try:
            ipaddress.ip_network(str(text), strict=True)
        except ValueError:
            raise SpecError(
                f"load_balancer_source_ranges: {text!r} is not a CIDR such as 203.0.113.0/24 "
                "(host bits must be zero)"
            ) from None


def _check_int(where: str, attr: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{where}: {attr} must be a whole number >= {minimum}, got {value!r}")
