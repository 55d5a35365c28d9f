"""Machine-type catalogs (data files per provider) and the cheapest-fit choice for a node pool."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from cloudwise.errors import NoMachineFits, SpecError
from cloudwise.spec import NodePoolSpec


@dataclass(frozen=True)
class MachineType:
    """One machine type as the catalog lists it."""

    name: str
    family: str
    cpu: int
    memory_gb: float
    gpu_type: str | None = None
    gpu: int = 0
    hourly_usd: float | None = None


@dataclass(frozen=True)
class Choice:
    """A machine type, with the GPUs attached to it where the provider attaches them (GCE n1)."""

    machine: MachineType
    gpu_type: str | None = None
    gpu: int = 0
    accelerator: str | None = None
    attached: bool = False
    hourly_usd: float | None = None

    @property
    def name(self) -> str:
        """The machine type name."""
        return self.machine.name

    def describe(self) -> str:
        """`n1-standard-8 + 1 x v100 (8 vCPU, 30 GB, 1 x v100, $2.86/h)`."""
        gpus = f", {self.gpu} x {self.gpu_type}" if self.gpu else ""
        price = f", ${self.hourly_usd:.2f}/h" if self.hourly_usd is not None else ""
        extra = f" + {self.gpu} x {self.gpu_type}" if self.attached else ""
        mem = f"{self.machine.memory_gb:g}"
        return f"{self.machine.name}{extra} ({self.machine.cpu} vCPU, {mem} GB{gpus}{price})"


class Catalog:
    """A provider's machine types, GPUs and regions, read from `cloudwise/catalogs/<provider>.yaml`."""

    def __init__(self, data: dict[str, Any]):
        self.provider: str = data["provider"]
        self.gpus: dict[str, dict[str, Any]] = data["gpus"]
        self.regions: dict[str, Any] = data["regions"]
        sep = "." if self.provider == "aws" else "-"
        self.machines: dict[str, MachineType] = {
            name: MachineType(name=name, family=name.split(sep)[0], **fields)
            for name, fields in data["machine_types"].items()
        }

    @classmethod
    @functools.cache
    def load(cls, provider: str) -> Catalog:
        """The catalog shipped for `provider` (`gcp` or `aws`)."""
        path = resources.files("cloudwise") / "catalogs" / f"{provider}.yaml"
        if not path.is_file():
            raise SpecError(f"no catalog for provider {provider!r}; use gcp or aws")
        return cls(yaml.safe_load(path.read_text()))

    def check_region(self, region: str, zone: str | None = None) -> None:
        """Raise a SpecError when cloudwise does not know `region` (or `zone` in it)."""
        if region not in self.regions:
            raise SpecError(
                f"{self.provider} region {region!r} is not in cloudwise's catalog; use one of "
                f"{', '.join(self.regions)} or add it to cloudwise/catalogs/{self.provider}.yaml"
            )
        if zone is not None and zone not in self.zones(region):
            raise SpecError(
                f"zone {zone!r} is not in region {region}; zones: {', '.join(self.zones(region))}"
            )

    def zones(self, region: str) -> list[str]:
        """The zones cloudwise uses in a region."""
        entry = self.regions[region]
        return list(entry["zones"] if self.provider == "aws" else _gce_zones(entry))

    def gpu_zones(self, region: str, gpu_type: str) -> list[str]:
        """GCE zones of `region` that offer `gpu_type` (every zone on aws, where families decide)."""
        if self.provider == "aws":
            return self.zones(region)
        return [z for z, gpus in _gce_zones(self.regions[region]).items() if gpu_type in gpus]

    def price_factor(self, region: str) -> float:
        """A region's price relative to the catalog's base region (see the catalog file's header)."""
        return float(self.regions[region].get("price_factor", 1.0))

    def offered(self, machine: MachineType, region: str, zone: str | None = None) -> bool:
        """Whether `machine` (and its built-in GPU) can be had in the region (or zone)."""
        if self.provider == "aws":
            return machine.family in self.regions[region]["families"]
        if not machine.gpu_type:
            return True
        zones = self.gpu_zones(region, machine.gpu_type)
        return zone in zones if zone else bool(zones)

    def options(self, region: str, zone: str | None = None) -> Iterator[Choice]:
        """Every machine (with every allowed attached GPU count) offered in the region or zone."""
        factor = self.price_factor(region)
        for machine in self.machines.values():
            if not self.offered(machine, region, zone):
                continue
            yield Choice(
                machine,
                machine.gpu_type,
                machine.gpu,
                self._accelerator(machine.gpu_type),
                hourly_usd=_scale(machine.hourly_usd, factor),
            )
            for choice in self._attached(machine, region, zone):
                yield dataclasses.replace(choice, hourly_usd=_scale(choice.hourly_usd, factor))

    def _attached(self, machine: MachineType, region: str, zone: str | None) -> Iterator[Choice]:
        for gpu_type, gpu in self.gpus.items():
            limits = gpu.get("attach", {}).get(machine.family)
            if not limits or machine.gpu:
                continue
            zones = self.gpu_zones(region, gpu_type)
            if (zone and zone not in zones) or not zones:
                continue
            for count, max_cpu in limits.items():
                if machine.cpu <= max_cpu:
                    price = _add(machine.hourly_usd, gpu.get("hourly_usd"), count)
                    yield Choice(machine, gpu_type, count, gpu["accelerator"], True, price)

    def _accelerator(self, gpu_type: str | None) -> str | None:
        return self.gpus.get(gpu_type, {}).get("accelerator") if gpu_type else None

    def choose(self, pool: NodePoolSpec, region: str, zone: str | None = None) -> Choice:
        """The cheapest machine that fits `pool`'s request in the region (or zone).

        Raises:
            SpecError: the GPU type, region or explicit machine type cannot work, with a fix.
            NoMachineFits: nothing fits; the message names the closest types.
        """
        self.check_region(region, zone)
        self._check_gpu(pool, region, zone)
        options = list(self.options(region, zone))
        if pool.machine_type:
            options = self._explicit(pool, options)
        fits = [c for c in options if fits_request(c, pool)]
        if not fits:
            raise NoMachineFits(self._no_fit_message(pool, options, region))
        return min(
            fits, key=lambda c: (_price(c), c.machine.cpu, c.machine.memory_gb, c.gpu, c.name)
        )

    def spot_types(
        self, pool: NodePoolSpec, choice: Choice, region: str, limit: int = 4
    ) -> list[Choice]:
        """Instance types for a spot pool: `choice` first, then up to `limit - 1` others of other
        families that have the same vCPUs and GPUs, at least its memory, and cost at most 1.5x
        (AWS: several types let a spot node group draw on more capacity pools)."""
        if not pool.spot or pool.machine_type or self.provider != "aws":
            return [choice]
        same = [
            c
            for c in self.options(region)
            if c.machine.family != choice.machine.family
            and c.machine.cpu == choice.machine.cpu
            and (c.gpu_type, c.gpu) == (choice.gpu_type, choice.gpu)
            and c.machine.memory_gb >= choice.machine.memory_gb
            and fits_request(c, pool)
            and _price(c) <= 1.5 * _price(choice)
        ]
        same.sort(key=lambda c: (_price(c), c.name))
        return [choice, *same[: limit - 1]]

    def _check_gpu(self, pool: NodePoolSpec, region: str, zone: str | None) -> None:
        if not pool.gpu:
            return
        if pool.gpu_type not in self.gpus:
            raise SpecError(
                f"pool {pool.name!r}: {self.provider} has no {pool.gpu_type} GPUs in cloudwise's catalog; "
                f"pick one of {', '.join(self.gpus)}"
            )
        zones = self.gpu_zones(region, pool.gpu_type)
        if self.provider == "aws":
            families = {m.family for m in self.machines.values() if m.gpu_type == pool.gpu_type}
            if not families & set(self.regions[region]["families"]):
                elsewhere = [r for r, e in self.regions.items() if families & set(e["families"])]
                raise SpecError(
                    f"pool {pool.name!r}: region {region} offers no {pool.gpu_type} GPUs "
                    f"({'/'.join(sorted(families))}); regions that do: {', '.join(elsewhere)}"
                )
        elif not zones or (zone and zone not in zones):
            where = f"zone {zone}" if zone else f"region {region}"
            hint = (
                f"zones of {region} that do: {', '.join(zones)}"
                if zones
                else (
                    "regions that do: "
                    + ", ".join(r for r in self.regions if self.gpu_zones(r, pool.gpu_type))
                )
            )
            raise SpecError(f"pool {pool.name!r}: {where} offers no {pool.gpu_type} GPUs; {hint}")

    def _explicit(self, pool: NodePoolSpec, options: list[Choice]) -> list[Choice]:
        name = pool.machine_type
        if name not in self.machines:
            near = nearest_names(name, self.machines)
            raise SpecError(
                f"pool {pool.name!r}: unknown {self.provider} machine type {name!r}; similar: {', '.join(near)}"
            )
        mine = [c for c in options if c.name == name]
        if not mine:
            raise SpecError(
                f"pool {pool.name!r}: {name} is not offered in this region; see `cloudwise machine-type`"
            )
        machine = self.machines[name]
        if pool.gpu and not machine.gpu and not any(c.attached for c in mine):
            takers = sorted({f for g in self.gpus.values() for f in g.get("attach", {})})
            attach = f"; GPUs attach to {', '.join(takers)} machine types" if takers else ""
            raise SpecError(
                f"pool {pool.name!r}: {name} takes no GPUs{attach}; drop machine_type to let cloudwise choose"
            )
        return mine

    def _no_fit_message(self, pool: NodePoolSpec, options: list[Choice], region: str) -> str:
        want = describe_request(pool)
        closest = sorted(options, key=lambda c: (shortfall(c, pool), _price(c)))[:3]
        names = "; ".join(c.describe() for c in closest) or "none"
        return (
            f"pool {pool.name!r}: no {self.provider} machine type in {region} has {want}; "
            f"closest: {names}. Lower the request or pick one of these with machine_type."
        )


def oversize_note(pool: NodePoolSpec, choice: Choice) -> str | None:
    """A note when the machine is much larger than the request: more GPUs than asked, or at least
    twice the vCPUs or memory (e.g. AWS sells A100s only 8 to a machine); None otherwise."""
    parts = []
    if pool.gpu and choice.gpu > pool.gpu:
        parts.append(f"{choice.gpu} GPUs, asked for {pool.gpu}")
    if pool.cpu and choice.machine.cpu >= 2 * pool.cpu:
        parts.append(f"{choice.machine.cpu} vCPU, asked for {pool.cpu}")
    if pool.memory_gb and choice.machine.memory_gb >= 2 * pool.memory_gb:
        parts.append(f"{choice.machine.memory_gb:g} GB, asked for {pool.memory_gb:g}")
    if not parts:
        return None
    return (
        f"note: {choice.name} is larger than the request ({'; '.join(parts)}): no smaller "
        f"machine fits, and each node costs what the whole machine costs"
    )


def fits_request(choice: Choice, pool: NodePoolSpec) -> bool:
    """Whether a choice satisfies every part of the pool's request (no GPU when none is asked)."""
    m = choice.machine
    if pool.cpu and m.cpu < pool.cpu:
        return False
    if pool.memory_gb and m.memory_gb < pool.memory_gb:
        return False
    if not pool.gpu:
        return choice.gpu == 0
    return choice.gpu_type == pool.gpu_type and choice.gpu >= pool.gpu


def shortfall(choice: Choice, pool: NodePoolSpec) -> float:
    """How far a choice falls short of a request (0 = fits), for naming the closest types."""
    m = choice.machine
    miss = 0.0
    for want, have in ((pool.cpu, m.cpu), (pool.memory_gb, m.memory_gb), (pool.gpu, choice.gpu)):
        if want:
            miss += max(0.0, (want - have) / want)
    if bool(pool.gpu) != bool(choice.gpu) or (pool.gpu and choice.gpu_type != pool.gpu_type):
        miss += 1.0
    return miss


def describe_request(pool: NodePoolSpec) -> str:
    """`8 vCPU, 30 GB, 1 x v100` from a pool's request."""
    parts = []
    if pool.cpu:
        parts.append(f"{pool.cpu} vCPU")
    if pool.memory_gb:
        parts.append(f"{pool.memory_gb:g} GB")
    if pool.gpu:
        parts.append(f"{pool.gpu} x {pool.gpu_type}")
    return ", ".join(parts) or "any size"


def nearest_names(name: str, names: dict[str, Any] | list[str], n: int = 3) -> list[str]:
    """The `n` names that look most like `name`."""
    import difflib

    return difflib.get_close_matches(name, list(names), n=n, cutoff=0.0)


def _gce_zones(entry: dict[str, Any]) -> dict[str, list[str]]:
    return {k: v for k, v in entry.items() if k != "price_factor"}


def _scale(price: float | None, factor: float) -> float | None:
    return None if price is None else round(price * factor, 4)


def _price(choice: Choice) -> float:
    return choice.hourly_usd if choice.hourly_usd is not None else math.inf


def _add(base: float | None, unit: float | None, count: int) -> float | None:
    if base is None or unit is None:
        return None
    return round(base + unit * count, 4)
