"""Resolve a ClusterSpec against its provider's catalog: a machine per pool, or a clear error."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cloudwise.catalog import Catalog, Choice, oversize_note
from cloudwise.labels import Taint, pool_labels, pool_taints
from cloudwise.spec import ClusterSpec, NodePoolSpec


@dataclass(frozen=True)
class ResolvedPool:
    """A pool with its chosen machine; `node` holds the machine's real capacity (for the labels).

    Attributes:
        request: the pool as the user wrote it.
        node: the same pool with cpu, memory_gb, gpu_type and gpu set to the chosen machine's.
        choice: the machine type (and attached GPUs).
        zones: GKE regional clusters: the zones whose machines have the pool's GPU; else empty.
        instance_types: EKS spot pools: `choice` and up to three alike types of other families
            (same vCPUs and GPUs, at least as much memory); else just `choice`.
    """

    request: NodePoolSpec
    node: NodePoolSpec
    choice: Choice
    zones: tuple[str, ...] = ()
    instance_types: tuple[Choice, ...] = ()

    @property
    def note(self) -> str | None:
        """A note when the machine is much larger than the request (see `catalog.oversize_note`)."""
        return oversize_note(self.request, self.choice)

    @property
    def name(self) -> str:
        """The pool name."""
        return self.request.name

    @property
    def labels(self) -> dict[str, str]:
        """The node labels (cloudwise placement labels + the user's)."""
        return pool_labels(self.node)

    @property
    def taints(self) -> list[Taint]:
        """The node taints (the GPU taint on GPU pools + the user's)."""
        return pool_taints(self.node)


@dataclass(frozen=True)
class ResolvedCluster:
    """A validated cluster whose pools all have machines; what the renderers take."""

    spec: ClusterSpec
    pools: tuple[ResolvedPool, ...]
    zones: tuple[str, ...]

    @property
    def location(self) -> str:
        """GKE cluster location: the zone of a zonal cluster, else the region."""
        return self.spec.zone or self.spec.region


def resolve_pool(pool: NodePoolSpec, cluster: ClusterSpec) -> ResolvedPool:
    """Choose the machine for one pool of `cluster` (the pool need not be in it yet)."""
    pool.validate()
    catalog = Catalog.load(cluster.provider)
    choice = catalog.choose(pool, cluster.region, cluster.zone)
    node = dataclasses.replace(
        pool,
        cpu=choice.machine.cpu,
        memory_gb=choice.machine.memory_gb,
        gpu_type=choice.gpu_type,
        gpu=choice.gpu,
        machine_type=choice.name,
    )
    zones: tuple[str, ...] = ()
    if cluster.provider == "gcp" and choice.gpu and not cluster.zone:
        zones = tuple(catalog.gpu_zones(cluster.region, choice.gpu_type or ""))
    types = tuple(catalog.spot_types(pool, choice, cluster.region))
    return ResolvedPool(pool, node, choice, zones, types)


def resolve(cluster: ClusterSpec) -> ResolvedCluster:
    """Validate `cluster` and choose every pool's machine, before any terraform runs.

    Raises:
        SpecError: the spec is invalid, a GPU or machine is not offered, or nothing fits.
    """
    cluster.validate()
    catalog = Catalog.load(cluster.provider)
    catalog.check_region(cluster.region, cluster.zone)
    pools = tuple(resolve_pool(pool, cluster) for pool in cluster.pools)
    zones = tuple(catalog.zones(cluster.region)) if cluster.provider == "aws" else ()
    return ResolvedCluster(cluster, pools, zones)
