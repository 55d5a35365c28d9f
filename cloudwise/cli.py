"""The `cloudwise` command line."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.core import ParameterSource

from cloudwise.cli_pool import pool
from cloudwise.clistyle import CONTEXT_SETTINGS, InputError, StyledGroup
from cloudwise.errors import CloudwiseError, SpecError
from cloudwise.presets import DEFAULT_REGION, DEFAULT_ZONE
from cloudwise.spec import GPU_TYPES, KUBERNETES_VERSION, PROVIDERS, ClusterSpec, NodePoolSpec


class Group(StyledGroup):
    """Clean one-line errors, never tracebacks: a bad spec or option exits 2, a failure 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SpecError as exc:
            raise InputError(str(exc)) from None
        except CloudwiseError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="surreal-stack")
@click.option(
    "-C",
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Folder holding cloudwise.yaml and its terraform.",
)
@click.option(
    "--plugin-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CLOUDWISE_PLUGIN_DIR",
    show_envvar=True,
    help="A terraform provider mirror (a folder holding registry.terraform.io/hashicorp/aws/...): "
    "`terraform init` installs providers from it alone, with no network.",
)
@click.pass_context
def main(ctx: click.Context, directory: Path, plugin_dir: Path | None) -> None:
    """cloudwise: make a cloud account Kubernetes-ready for distributed RL.

    Describe node pools in plain terms (cpu=48, gpu_type=v100, gpu=4); cloudwise picks the
    machine types, writes terraform for GKE or EKS, runs it, and edits pools later.
    """
    if plugin_dir is not None and not plugin_dir.is_dir():
        raise click.BadParameter(f"{plugin_dir} is not a folder", param_hint="--plugin-dir")
    ctx.obj = directory
    ctx.meta["cloudwise.plugin_dir"] = plugin_dir


@main.command()
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS),
    show_default="asked; required with --no-input",
    help="gcp (GKE) or aws (EKS).",
)
@click.option(
    "--project",
    show_default="gcp: asked, required with --no-input; aws: none",
    help="GCP project id; on aws the account id (optional).",
)
@click.option(
    "--region",
    show_default=", ".join(f"{r} on {p}" for p, r in DEFAULT_REGION.items()),
    help="Region, e.g. us-west1 (gcp) or us-west-2 (aws).",
)
@click.option(
    "--zone",
    show_default=f"{DEFAULT_ZONE['gcp']} in {DEFAULT_REGION['gcp']}, else REGION-b",
    help="gcp only: zone of a zonal cluster, or 'regional'.",
)
@click.option("--name", show_default="surreal", help="Cluster name.")
@click.option(
    "--kubernetes-version",
    show_default=KUBERNETES_VERSION,
    help="Kubernetes version of the control plane.",
)
@click.option(
    "--preset",
    type=click.Choice(["surreal", "minimal", "custom"]),
    show_default="surreal; with --pool, custom",
    help="Starting pools: surreal = the paper's cluster (CPU actors 8/32 cores, V100 learners 1/4 GPUs).",
)
@click.option(
    "--pool",
    "pools",
    multiple=True,
    metavar="SPEC",
    show_default="none",
    help="Extra pool, e.g. 'name=eval,cpu=4,gpu_type=t4,gpu=1,max_nodes=2' (repeatable); "
    f"gpu_type one of {', '.join(GPU_TYPES)}.",
)
@click.option(
    "--no-input",
    is_flag=True,
    show_default="off: ask",
    help="Never prompt: use defaults, fail on missing required values.",
)
@click.option(
    "--force", is_flag=True, show_default="off", help="Overwrite an existing cloudwise.yaml."
)
@click.option(
    "--dry-run",
    is_flag=True,
    show_default="off",
    help="Ask, check and show the cluster; write nothing.",
)
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    show_default="./cloudwise-NAME, or the DIR of `cloudwise -C DIR init`",
    help="Folder to write cloudwise.yaml and its terraform into (created); the other commands "
    "then take it as `cloudwise -C DIR ...`.",
)
@click.pass_context
def init(
    ctx: click.Context,
    no_input: bool,
    force: bool,
    dry_run: bool,
    pools: tuple[str, ...],
    folder: Path | None,
    **answers,
) -> None:
    """Create cloudwise.yaml and its terraform with a short wizard, in a folder of their own
    (--dir; ./cloudwise-NAME by default), and say where.

    Every prompt is also a flag, so `cloudwise init --provider aws --region us-west-2 --preset
    surreal --no-input` runs without questions. Nothing is created in the cloud until `apply`.
    """
    from cloudwise.wizard import Answers, collect, summary, write_cluster

    spec = collect(Answers(pools=list(pools), **answers), interactive=not no_input)
    directory = folder or _init_folder(ctx, spec.name)
    if dry_run:
        from cloudwise.resolve import resolve

        click.echo(summary(resolve(spec), directory, dry_run=True))
        return
    resolved = write_cluster(spec, directory, force)
    click.echo(summary(resolved, directory))


def _init_folder(ctx: click.Context, name: str) -> Path:
    """`cloudwise -C DIR init`: DIR; without -C, a new folder `cloudwise-NAME` here."""
    given = ctx.parent.get_parameter_source("directory") is not ParameterSource.DEFAULT
    return ctx.obj if given else Path(f"cloudwise-{name}")


@main.command("machine-type")
@click.option("--provider", type=click.Choice(PROVIDERS), required=True)
@click.option("--region", help="Region to look in (default: us-west1 on gcp, us-west-2 on aws).")
@click.option("--zone", help="gcp: a zone, to check GPU availability there.")
@click.option("--cpu", type=int, help="vCPUs needed.")
@click.option("--memory-gb", type=float, help="Memory needed, GB.")
@click.option("--gpu-type", help="GPU model: p100 v100 t4 a10g l4 a100 a100-80gb h100.")
@click.option("--gpu", type=int, default=0, help="GPUs needed.")
def machine_type(
    provider: str,
    region: str | None,
    zone: str | None,
    cpu: int | None,
    memory_gb: float | None,
    gpu_type: str | None,
    gpu: int,
) -> None:
    """Print the machine type cloudwise would choose for a request, and why."""
    from cloudwise.catalog import Catalog, describe_request, fits_request, oversize_note
    from cloudwise.presets import DEFAULT_REGION

    region = region or DEFAULT_REGION[provider]
    if gpu_type and not gpu:
        gpu = 1
    pool = NodePoolSpec(
        "request", cpu=cpu, memory_gb=memory_gb, gpu_type=gpu_type and gpu_type.lower(), gpu=gpu
    )
    catalog = Catalog.load(provider)
    try:
        pool.validate()
        choice = catalog.choose(pool, region, zone)
    except SpecError as err:  # the pool is this command's request: name the flags, not "request"
        message = str(err).replace("pool 'request': ", "")
        for field in ("gpu_type", "memory_gb", "machine_type"):
            message = message.replace(field, "--" + field.replace("_", "-"))
        raise InputError(message) from None
    fits = sorted(
        (c for c in catalog.options(region, zone) if fits_request(c, pool)),
        key=lambda c: c.hourly_usd if c.hourly_usd is not None else float("inf"),
    )
    click.echo(choice.describe())
    click.echo(
        f"  why: the cheapest of {len(fits)} {provider} options in {zone or region} "
        f"with at least {describe_request(pool)} (on-demand list prices)."
    )
    factor = catalog.price_factor(region)
    if factor != 1.0:
        click.echo(f"  prices: {region} list prices estimated as {factor:g} x the base region's.")
    note = oversize_note(pool, choice)
    if note:
        click.echo("  " + note)
    runners_up = [c for c in fits if c != choice][:3]
    if runners_up:
        click.echo("  next cheapest: " + "; ".join(c.describe() for c in runners_up))


@main.command()
@click.option(
    "--check", is_flag=True, help="Change nothing; exit 1 when the terraform is out of date."
)
@click.pass_obj
def render(directory: Path, check: bool) -> None:
    """Re-write the terraform from cloudwise.yaml (plan and apply do this first)."""
    from cloudwise.render import render as render_files
    from cloudwise.render import write

    spec = ClusterSpec.load(directory)
    if check:
        stale = [
            n
            for n, t in render_files(spec).items()
            if not (directory / n).exists() or (directory / n).read_text() != t
        ]
        if stale:
            raise click.ClickException(f"out of date: {', '.join(stale)}; run `cloudwise render`")
        click.echo("terraform is up to date with cloudwise.yaml")
        return
    for path in write(spec, directory):
        click.echo(f"wrote {path}")


def _runner(directory: Path):
    from cloudwise.render import write
    from cloudwise.terraform import TerraformRunner

    write(ClusterSpec.load(directory), directory)
    plugin_dir = click.get_current_context().meta.get("cloudwise.plugin_dir")
    runner = TerraformRunner(directory, plugin_dir=plugin_dir)
    # init until it has succeeded once (it writes the lock file last), and again for a new mirror
    if plugin_dir is not None or not (directory / ".terraform.lock.hcl").exists():
        runner.init()
    return runner


@main.command()
@click.pass_obj
def plan(directory: Path) -> None:
    """Re-render, then show what `apply` would change (terraform plan)."""
    changes = _runner(directory).plan()
    click.echo("Run `cloudwise apply` to make these changes." if changes else "Nothing to change.")


@main.command()
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def apply(directory: Path, yes: bool) -> None:
    """Re-render, then create or update the cluster (terraform apply). This costs money."""
    spec = ClusterSpec.load(directory)
    if not yes:
        click.confirm(
            f"Create/update {spec.provider} cluster {spec.name!r} in {spec.region}?", abort=True
        )
    runner = _runner(directory)
    runner.apply()
    command = runner.output().get("kubeconfig_command")
    if command:
        click.echo(f"\nCluster ready. Point kubectl at it:\n  {command}")


@main.command()
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def destroy(directory: Path, yes: bool) -> None:
    """Delete the cluster and everything cloudwise created for it (terraform destroy)."""
    spec = ClusterSpec.load(directory)
    if not yes:
        click.confirm(
            f"Destroy {spec.provider} cluster {spec.name!r} and all its node pools?", abort=True
        )
    _runner(directory).destroy()


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print all outputs as one JSON object.")
@click.argument("name", required=False)
@click.pass_obj
def output(directory: Path, as_json: bool, name: str | None) -> None:
    """Print terraform outputs of the applied cluster (endpoint, kubeconfig command)."""
    from cloudwise.terraform import TerraformRunner

    values = TerraformRunner(directory).output()
    if name:
        if name not in values:
            raise click.ClickException(
                f"no output {name!r}; outputs: {', '.join(values) or 'none (apply first)'}"
            )
        click.echo(values[name] if not as_json else json.dumps(values[name]))
    elif as_json:
        click.echo(json.dumps(values, indent=2, sort_keys=True))
    else:
        for key, value in sorted(values.items()):
            click.echo(f"{key} = {value}")


main.add_command(pool)
