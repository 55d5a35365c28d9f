"""The `symphony build` command: assemble a context from several folders, build, tag, push."""

from __future__ import annotations

import os
from pathlib import Path

import click

from symphony.build_config import BuildConfig, load_build_config
from symphony.build_context import DEFAULT_EXCLUDES, ContextEntry, ContextError

DEFAULT_CONFIG = "symphony-build.yaml"


@click.command("build")
@click.argument("name", required=False)
@click.option(
    "--config",
    "-c",
    "config_path",
    type=click.Path(dir_okay=False),
    help=f"YAML file of named builds (default: $SYMPHONY_BUILD_CONFIG or ./{DEFAULT_CONFIG}).",
)
@click.option("--tag", "-t", help="Image tag; overrides the named build's tag.")
@click.option(
    "--add",
    "-a",
    "adds",
    multiple=True,
    metavar="SRC[:DEST]",
    help="A folder or file to copy into the context (at DEST, default its name). Repeatable.",
)
@click.option(
    "--dockerfile",
    type=click.Path(exists=True, dir_okay=False),
    help="Dockerfile to put at the context root.",
)
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="PATTERN",
    help="Leave matching context paths out (e.g. '**/tests', 'data/*'). Repeatable.",
)
@click.option(
    "--build-arg",
    "build_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a Dockerfile ARG (e.g. BASE_IMAGE=my/base:1). Repeatable.",
)
@click.option("--push/--no-push", default=None, help="Push the tag to its registry after building.")
@click.option("--dry-run", is_flag=True, help="List the context files and settings; build nothing.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the image id.")
def build(
    name: str | None,
    config_path: str | None,
    tag: str | None,
    adds: tuple[str, ...],
    dockerfile: str | None,
    excludes: tuple[str, ...],
    build_args: tuple[str, ...],
    push: bool | None,
    dry_run: bool,
    quiet: bool,
) -> None:
    """Build a docker image from several local folders and files assembled into one context.

    Either name a build from a config file (`symphony build cpu -c docker/build.yaml`) or give
    everything on the command line (`symphony build -t me/exp:1 --add src --add configs:cfg
    --dockerfile Dockerfile`); flags override the named build. The image is built by the docker
    engine at DOCKER_HOST with the classic builder, tagged, and pushed with --push. Prints the
    image id and digests; experiments launched with this image record them.
    """
    try:
        config = _resolve(name, config_path, tag, adds, dockerfile, excludes, build_args, push)
    except (ContextError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    if dry_run:
        _show_plan(config)
        return
    from symphony.build import build_image  # the docker SDK only when building
    from symphony.errors import SymphonyError

    try:
        result = build_image(config, on_log=None if quiet else click.echo)
    except SymphonyError as exc:
        raise click.ClickException(str(exc)) from exc
    if quiet:
        click.echo(result.image_id)
        return
    click.echo(f"built {result.tag} {result.image_id} ({len(result.files)} context paths)")
    for digest in result.repo_digests:
        click.echo(f"digest {digest}")


def _resolve(
    name: str | None,
    config_path: str | None,
    tag: str | None,
    adds: tuple[str, ...],
    dockerfile: str | None,
    excludes: tuple[str, ...],
    build_args: tuple[str, ...],
    push: bool | None,
) -> BuildConfig:
    entries = tuple(ContextEntry.parse(a) for a in adds)
    args = {}
    for item in build_args:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--build-arg {item!r} is not KEY=VALUE")
        args[key] = value
    if name:
        path = config_path or os.environ.get("SYMPHONY_BUILD_CONFIG") or DEFAULT_CONFIG
        base = load_build_config(path, name)
    else:
        if config_path:
            raise ValueError("--config names a file of builds; also give the build NAME to use")
        if not tag or not entries:
            raise ValueError(
                "give a build NAME from a config file, or --tag and at least one --add"
            )
        base = BuildConfig(tag=tag, context=())
    return base.with_overrides(
        tag=tag,
        context=base.context + entries if entries else None,
        dockerfile=Path(dockerfile).resolve() if dockerfile else None,
        excludes=base.excludes + excludes if excludes else None,
        build_args={**base.build_args, **args} if args else None,
        push=push,
    )


def _show_plan(config: BuildConfig) -> None:
    from symphony.build_context import iter_context

    click.echo(f"tag: {config.tag}")
    click.echo(f"dockerfile: {config.dockerfile or '(from the context)'}")
    for key, value in sorted(config.build_args.items()):
        click.echo(f"build-arg: {key}={value}")
    click.echo(f"push: {'yes' if config.push else 'no'}")
    extra = [e for e in config.excludes if e not in DEFAULT_EXCLUDES]
    if extra:
        click.echo(f"exclude: {' '.join(extra)}")
    for local, rel in iter_context(config.context, config.excludes):
        if local.is_file():
            click.echo(f"  {rel}  <- {local}")
