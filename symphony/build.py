"""Build (and push) docker images from an assembled context with the docker SDK's classic builder."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from symphony.build_config import BuildConfig
from symphony.build_context import write_context
from symphony.errors import SymphonyError


class BuildError(SymphonyError):
    """The engine refused the build or the push; the message carries the engine's last lines."""


@dataclass(frozen=True)
class BuildResult:
    """What a build produced: the tag, the image id, its registry digests and the context files."""

    tag: str
    image_id: str
    repo_digests: tuple[str, ...]
    files: tuple[str, ...]


def build_image(
    config: BuildConfig, client: Any = None, on_log: Callable[[str], None] | None = None
) -> BuildResult:
    """Assembles the context of `config`, builds it, tags it, and pushes it when asked.

    Args:
        config: the build settings (see `symphony.build_config.BuildConfig`).
        client: a docker SDK client; by default one from the environment.
        on_log: called with each line the builder prints.

    Raises:
        BuildError: with the builder's last lines when a step fails.
    """
    if client is None:
        from symphony.backends.compose_engine import docker_client

        client = docker_client()
    with tempfile.TemporaryFile() as context:
        files = write_context(config.context, context, config.excludes, config.dockerfile)
        if "Dockerfile" not in files:
            raise BuildError(
                "the context has no Dockerfile at its root; set `dockerfile:` in the "
                "build config or pass --dockerfile"
            )
        context.seek(0)
        stream = client.api.build(
            fileobj=context,
            custom_context=True,
            tag=config.tag,
            buildargs=config.build_args,
            labels=config.labels or None,
            network_mode=config.network_mode,
            rm=True,
            forcerm=True,
            decode=True,
        )
        image_id = _follow(stream, on_log, f"build of {config.tag}")
    if not image_id:
        image_id = client.images.get(config.tag).id
    if config.push:
        push_image(client, config.tag, on_log)
    return BuildResult(config.tag, image_id, image_digests(client, config.tag), tuple(files))


def push_image(client: Any, tag: str, on_log: Callable[[str], None] | None = None) -> str:
    """Pushes `tag` to its registry and returns the pushed digest."""
    repo, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    digest = ""
    try:
        for chunk in client.api.push(repo, tag=version, stream=True, decode=True):
            if "error" in chunk:
                raise BuildError(
                    f"push of {tag} failed: {chunk['error']}; check the registry "
                    "address and `docker login`"
                )
            digest = chunk.get("aux", {}).get("Digest", digest)
            if on_log and chunk.get("status"):
                on_log(chunk["status"])
    except BuildError:
        raise
    except Exception as exc:
        raise BuildError(
            f"push of {tag} failed: {exc}; check the registry address and `docker login`"
        ) from exc
    return digest


def image_digests(client: Any, image: str) -> tuple[str, ...]:
    """Returns the registry digests (``repo@sha256:...``) known for `image`; empty if never pushed."""
    return tuple(client.images.get(image).attrs.get("RepoDigests") or ())


def _follow(stream: Any, on_log: Callable[[str], None] | None, what: str) -> str:
    """Consumes a build stream; returns the image id it reports, raising on an error chunk."""
    image_id, tail = "", []
    for chunk in stream:
        if "error" in chunk:
            tail.append(chunk["error"].strip())
            raise BuildError(f"{what} failed:\n" + "\n".join(tail[-15:]))
        line = chunk.get("stream", "").rstrip("\n")
        if line:
            tail.append(line)
            if on_log:
                on_log(line)
        image_id = chunk.get("aux", {}).get("ID", image_id)
    return image_id
