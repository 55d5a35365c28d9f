"""`cloudwise init`: ask for what is missing (click prompts), build the spec, write it and the terraform."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

import click

from cloudwise.errors import SpecError
from cloudwise.presets import DEFAULT_REGION, DEFAULT_ZONE, PRESETS, parse_pool
from cloudwise.render import write
from cloudwise.resolve import ResolvedCluster, resolve
from cloudwise.spec import (
    DEFAULT_FILENAME,
    GPU_TYPES,
    KUBERNETES_VERSION,
    PROVIDERS,
    RETIRED_GPUS,
    ClusterSpec,
    NodePoolSpec,
)


@dataclass
class Answers:
    """Everything the wizard asks; None means "ask" (or fail with --no-input)."""

    provider: str | None = None
    project: str | None = None
    region: str | None = None
    zone: str | None = None
    name: str | None = None
    kubernetes_version: str | None = None
    preset: str | None = None
    pools: list[str] = field(default_factory=list)


def _ask(
    answer: str | None, flag: str, text: str, interactive: bool, default: str | None = None, **kw
):
    if answer is not None:
        return answer
    if not interactive:
        if default is not None:
            return default
        raise click.UsageError(f"{flag} is required with --no-input")
    return click.prompt(text, default=default, **kw)


def gpu_type(text: str) -> str:
    """A GPU type typed at the wizard's prompt, lower-cased; click.BadParameter (the prompt
    says it and asks again) unless cloudwise knows it."""
    value = text.strip().lower()
    if value in GPU_TYPES:
        return value
    known = ", ".join(GPU_TYPES)
    if value in RETIRED_GPUS:
        raise click.BadParameter(f"{RETIRED_GPUS[value]}; choose one of: {known}")
    near = difflib.get_close_matches(value, GPU_TYPES, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise click.BadParameter(f"{text!r} is not a GPU type{hint}; choose one of: {known}")


def _pools_from_flags(texts: list[str]) -> list[NodePoolSpec]:
    """The --pool flags as pools, each checked on its own: a bad one (e.g. gpu_type=banana)
    is a SpecError before any question is asked."""
    pools = [parse_pool(text) for text in texts]
    for pool in pools:
        pool.validate()
    return pools


def collect(a: Answers, interactive: bool) -> ClusterSpec:
    """Fill in missing answers (prompting when interactive) and build the cluster spec."""
    extra = _pools_from_flags(a.pools)
    provider = _ask(
        a.provider, "--provider", "Cloud provider", interactive, type=click.Choice(PROVIDERS)
    )
    if provider == "gcp":
        project = _ask(a.project, "--project", "GCP project id", interactive)
    else:
        project = (
            _ask(
                a.project,
                "--project",
                "AWS account id (optional, press Enter to skip)",
                interactive,
                default="",
            )
            or None
        )
    region = _ask(a.region, "--region", "Region", interactive, default=DEFAULT_REGION[provider])
    zone = None
    if provider == "gcp":
        default_zone = DEFAULT_ZONE["gcp"] if region == DEFAULT_REGION["gcp"] else f"{region}-b"
        zone = _ask(
            a.zone,
            "--zone",
            "Zone (Enter 'regional' for a regional cluster)",
            interactive,
            default=default_zone,
        )
        zone = None if zone in ("", "regional") else zone
    elif a.zone:
        raise click.UsageError("--zone applies to gcp only; EKS spans the zones of the region")
    name = _ask(a.name, "--name", "Cluster name", interactive, default="surreal")
    version = _ask(
        a.kubernetes_version,
        "--kubernetes-version",
        "Kubernetes version",
        interactive,
        default=KUBERNETES_VERSION,
    )
    preset = _ask(
        a.preset,
        "--preset",
        "Node pools (surreal = the paper's cluster)",
        interactive,
        default="surreal" if not a.pools else "custom",
        type=click.Choice(list(PRESETS)),
    )
    pools = PRESETS[preset]() + extra
    spec = ClusterSpec(
        provider=provider,
        name=name,
        region=region,
        project=project,
        zone=zone,
        kubernetes_version=version,
        pools=pools,
    )
    if preset == "custom" and interactive and not a.pools:
        _ask_pools(spec)
    return spec


def _ask_pools(spec: ClusterSpec) -> None:
    """Prompt for custom pools until an empty name; each is checked against the catalog at once."""
    click.echo("Add node pools (press Enter at the name to finish).")
    while True:
        name = click.prompt("Pool name", default="", show_default=False)
        if not name:
            if spec.pools:
                return
            click.echo("A cluster needs at least one pool.")
            continue
        gpu = click.prompt("  GPUs per node", default=0, type=int)
        pool = NodePoolSpec(
            name=name,
            cpu=click.prompt("  vCPUs per node", default=8, type=int),
            memory_gb=click.prompt("  Memory per node, GB (0 = any)", default=0.0, type=float)
            or None,
            gpu=gpu,
            gpu_type=click.prompt("  GPU type", default="v100", value_proc=gpu_type)
            if gpu
            else None,
            spot=click.confirm("  Spot/preemptible nodes?", default=False),
            min_nodes=click.prompt("  Minimum nodes (0 = scale to zero)", default=0, type=int),
            max_nodes=click.prompt("  Maximum nodes", default=4, type=int),
        )
        try:
            spec.pools.append(pool)
            resolve(spec)
        except SpecError as exc:
            spec.pools.pop()
            click.echo(f"  {exc}", err=True)


def write_cluster(spec: ClusterSpec, directory: Path, force: bool) -> ResolvedCluster:
    """Validate, then write `cloudwise.yaml` and the terraform into `directory`."""
    resolved = resolve(spec)
    target = directory / DEFAULT_FILENAME
    if target.exists() and not force:
        raise click.UsageError(
            f"{target} exists; edit it with `cloudwise pool ...`, or pass --force to overwrite it"
        )
    directory.mkdir(parents=True, exist_ok=True)
    spec.save(target)
    write(spec, directory)
    return resolved


def summary(resolved: ResolvedCluster, directory: Path, dry_run: bool = False) -> str:
    """What was (or would be) written, the pools and their machines, and the next steps."""
    spec = resolved.spec
    lines = [
        f"{'Would write' if dry_run else 'Wrote'} {directory / DEFAULT_FILENAME} and its terraform for {spec.provider} "
        f"cluster {spec.name!r} in {resolved.location}.",
        "",
        "Node pools:",
    ]
    for pool in resolved.pools:
        n = pool.node
        lines.append(
            f"  {pool.name:<14} {pool.choice.describe()}  nodes {n.min_nodes}-{n.max_nodes}"
            + ("  spot" if n.spot else "")
        )
        if len(pool.instance_types) > 1:
            others = ", ".join(c.name for c in pool.instance_types[1:])
            lines.append(f"  {'':<14} spot capacity also from: {others}")
        if pool.note:
            lines.append(f"  {'':<14} {pool.note}")
    where = "" if str(directory) == "." else f" -C {directory}"
    if spec.provider == "gcp":
        flag = "--zone" if spec.zone else "--region"
        creds = f"gcloud container clusters get-credentials {spec.name} {flag} {resolved.location} --project {spec.project}"
    else:
        creds = f"aws eks update-kubeconfig --name {spec.name} --region {spec.region}"
    lines += [
        "",
        "Next steps:",
        f"  cloudwise{where} plan     # see what terraform will create",
        f"  cloudwise{where} apply    # create the cluster",
        f"  {creds}    # point kubectl at it",
    ]
    return "\n".join(lines)
