"""`cloudwise pool add/remove/edit/list`: change the node pools in cloudwise.yaml and re-render."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from cloudwise.errors import SpecError
from cloudwise.spec import ClusterSpec, NodePoolSpec


def _pool_options(func):
    """The options describing a pool; every one is optional so `edit` changes only what is given."""
    options = [
        click.option("--cpu", type=int, help="vCPUs per node (at least)."),
        click.option("--memory-gb", type=float, help="Memory per node, GB (at least)."),
        click.option("--gpu-type", help="GPU model: p100 v100 t4 a10g l4 a100 a100-80gb h100."),
        click.option("--gpu", type=int, help="GPUs per node."),
        click.option(
            "--machine-type", help="Explicit machine type ('auto' lets cloudwise choose)."
        ),
        click.option(
            "--spot/--on-demand", default=None, help="Spot/preemptible or on-demand nodes."
        ),
        click.option("--min-nodes", type=int, help="Autoscaling floor (0 = scale to zero)."),
        click.option("--max-nodes", type=int, help="Autoscaling ceiling."),
        click.option("--disk-gb", type=int, help="Boot disk per node, GB."),
        click.option(
            "--label", "labels", multiple=True, metavar="KEY=VALUE", help="Node label (repeatable)."
        ),
        click.option(
            "--taint",
            "taints",
            multiple=True,
            metavar="KEY=VALUE:EFFECT",
            help="Node taint (repeatable).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _changes(labels: tuple[str, ...], taints: tuple[str, ...], **fields) -> dict:
    changes = {k: v for k, v in fields.items() if v is not None}
    if changes.get("machine_type") == "auto":
        changes["machine_type"] = None
    if changes.get("gpu_type"):
        changes["gpu_type"] = changes["gpu_type"].lower()
    if labels:
        pairs = [label.partition("=") for label in labels]
        bad = [k for k, sep, _ in pairs if not sep or not k]
        if bad:
            raise click.BadParameter("labels look like KEY=VALUE", param_hint="--label")
        changes["labels"] = {k: v for k, _, v in pairs}
    if taints:
        changes["taints"] = list(taints)
    return changes


DRY_RUN = click.option("--dry-run", is_flag=True, help="Check and show the change; write nothing.")


def _save(
    spec: ClusterSpec, directory: Path, message: str, dry_run: bool, pool: str | None = None
) -> None:
    """Check the whole cluster against the catalog, then save the spec and re-render the terraform."""
    from cloudwise.render import write
    from cloudwise.resolve import resolve

    resolved = resolve(spec)
    chosen = [p for p in resolved.pools if p.name == pool]
    if chosen:
        message += f" Nodes: {chosen[0].choice.describe()}."
        if chosen[0].note:
            message += f"\n{chosen[0].note}"
    if dry_run:
        click.echo(f"(dry run, nothing written) {message}")
        return
    spec.save(directory)
    write(spec, directory)
    click.echo(message)
    where = "" if str(directory) == "." else f" -C {directory}"
    click.echo(
        f"Run `cloudwise{where} plan` to see the change, `cloudwise{where} apply` to make it."
    )


@click.group()
def pool() -> None:
    """Add, remove, edit and list node pools (changes cloudwise.yaml and re-renders terraform)."""


@pool.command("list")
@click.pass_obj
def list_pools(directory: Path) -> None:
    """List the pools and their machines.

    One line per pool: the machine type it resolves to, node counts and hourly price per node.
    """
    from cloudwise.resolve import resolve

    resolved = resolve(ClusterSpec.load(directory))
    click.echo(
        f"{'POOL':<16}{'MACHINE':<30}{'CPU':>5}{'MEM GB':>8}{'GPU':>10}{'NODES':>8}  {'SPOT':<5}{'$/H':>8}"
    )
    for p in resolved.pools:
        n, c = p.node, p.choice
        machine = c.name + (f"+{c.gpu}x{c.gpu_type}" if c.attached else "")
        gpus = f"{c.gpu}x{c.gpu_type}" if c.gpu else "-"
        price = f"{c.hourly_usd:.2f}" if c.hourly_usd is not None else "?"
        click.echo(
            f"{p.name:<16}{machine:<30}{n.cpu:>5}{n.memory_gb:>8g}{gpus:>10}"
            f"{f'{n.min_nodes}-{n.max_nodes}':>8}  {('yes' if n.spot else 'no'):<5}{price:>8}"
        )


@pool.command()
@click.argument("name")
@_pool_options
@DRY_RUN
@click.pass_obj
def add(directory: Path, name: str, labels, taints, dry_run: bool, **fields) -> None:
    """Add a node pool called NAME.

    For example `cloudwise pool add eval --cpu 4 --gpu-type t4 --gpu 1 --max-nodes 2`. Options
    not given keep a new pool's defaults (no GPU, 0 to 1 nodes, on-demand, 100 GB disk).
    """
    spec = ClusterSpec.load(directory)
    if any(p.name == name for p in spec.pools):
        raise click.UsageError(f"pool {name!r} exists; change it with `cloudwise pool edit {name}`")
    changes = _changes(labels, taints, **fields)
    changes.setdefault("max_nodes", max(1, changes.get("min_nodes", 0)))
    new = NodePoolSpec.from_dict({"name": name, **changes})
    spec.pools.append(new)
    _save(spec, directory, f"Added pool {name!r}.", dry_run, name)


@pool.command()
@click.argument("name")
@DRY_RUN
@click.pass_obj
def remove(directory: Path, name: str, dry_run: bool) -> None:
    """Remove pool NAME (its nodes go away at the next apply)."""
    spec = ClusterSpec.load(directory)
    spec.pool(name)
    if len(spec.pools) == 1:
        raise SpecError(
            f"{name!r} is the only pool; add another first, or `cloudwise destroy` the cluster"
        )
    spec.pools = [p for p in spec.pools if p.name != name]
    _save(spec, directory, f"Removed pool {name!r}.", dry_run)


@pool.command()
@click.argument("name")
@_pool_options
@DRY_RUN
@click.pass_obj
def edit(directory: Path, name: str, labels, taints, dry_run: bool, **fields) -> None:
    """Change pool NAME.

    Only the options given change; --label and --taint replace the pool's labels and taints.
    """
    spec = ClusterSpec.load(directory)
    old = spec.pool(name)
    changes = _changes(labels, taints, **fields)
    if not changes:
        raise click.UsageError("nothing to change: pass at least one option (see --help)")
    if changes.get("gpu") == 0:
        changes.setdefault("gpu_type", None)
    new = dataclasses.replace(old, **changes)
    spec.pools = [new if p.name == name else p for p in spec.pools]
    what = ", ".join(f"{k}={v}" for k, v in changes.items())
    _save(spec, directory, f"Changed pool {name!r}: {what}.", dry_run, name)
