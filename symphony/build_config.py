"""Named image build settings, read from a YAML file (for example docker/build.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from symphony.build_context import DEFAULT_EXCLUDES, ContextEntry, ContextError


@dataclass(frozen=True)
class BuildConfig:
    """Everything `symphony build` needs to produce one image.

    Attributes:
        tag: the image reference to tag, e.g. ``surreal/cpu:latest`` or ``registry/x/y:v1``.
        context: the folders and files assembled into one build context.
        dockerfile: a Dockerfile on disk, stored as ``Dockerfile`` at the context root; None
            when one of the context entries already puts a Dockerfile there.
        excludes: `.dockerignore`-like patterns left out of the context.
        build_args: ``ARG`` values, e.g. ``{"BASE_IMAGE": "python:3.11-slim"}``.
        labels: image labels.
        push: push the tag after building.
        network_mode: network for ``RUN`` steps; ``host`` by default because engines without a
            bridge (like the test engine) cannot give build containers a network otherwise.
    """

    tag: str
    context: tuple[ContextEntry, ...]
    dockerfile: Path | None = None
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    build_args: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    push: bool = False
    network_mode: str = "host"

    def with_overrides(self, **changes: Any) -> BuildConfig:
        """Returns a copy with the non-None `changes` applied (command-line flags over the file)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_build_configs(path: str | Path) -> dict[str, BuildConfig]:
    """Reads every named build from a YAML file; relative paths are relative to the file.

    The file looks like::

        builds:
          cpu:
            tag: surreal/cpu:latest
            dockerfile: Dockerfile.cpu
            context: [../symphony, ../caraml, {src: ../pyproject.toml, dest: pyproject.toml}]
            exclude: ["**/tests"]
            build_args: {BASE_IMAGE: python:3.11-slim}
            push: false

    Raises:
        ContextError: when the file or a build in it is malformed, saying which key to fix.
    """
    path = Path(path)
    if not path.is_file():
        raise ContextError(
            f"build config {path} not found; pass --config PATH to a YAML file "
            "with a `builds:` mapping"
        )
    data = yaml.safe_load(path.read_text()) or {}
    builds = data.get("builds")
    if not isinstance(builds, dict) or not builds:
        raise ContextError(f"{path} has no `builds:` mapping of NAME -> settings; add one")
    return {name: _parse_build(name, body or {}, path.parent) for name, body in builds.items()}


def load_build_config(path: str | Path, name: str) -> BuildConfig:
    """Returns the build called `name` from the YAML file at `path`."""
    configs = load_build_configs(path)
    if name not in configs:
        raise ContextError(
            f"no build named {name!r} in {path}; choose one of: {', '.join(sorted(configs))}"
        )
    return configs[name]


_KEYS = {"tag", "dockerfile", "context", "exclude", "build_args", "labels", "push", "network_mode"}


def _parse_build(name: str, body: dict[str, Any], base: Path) -> BuildConfig:
    unknown = set(body) - _KEYS
    if unknown:
        raise ContextError(
            f"build {name!r}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}"
        )
    if not body.get("tag"):
        raise ContextError(f"build {name!r} needs a `tag:` (e.g. surreal/{name}:latest)")
    entries = []
    for item in body.get("context") or []:
        if isinstance(item, dict):
            entries.append(ContextEntry.of(item["src"], item.get("dest"), base))
        else:
            entries.append(ContextEntry.parse(str(item), base))
    if not entries:
        raise ContextError(f"build {name!r} needs a `context:` list of folders/files to copy")
    dockerfile = body.get("dockerfile")
    return BuildConfig(
        tag=str(body["tag"]),
        context=tuple(entries),
        dockerfile=(base / dockerfile).resolve() if dockerfile else None,
        excludes=DEFAULT_EXCLUDES + tuple(body.get("exclude") or ()),
        build_args={str(k): str(v) for k, v in (body.get("build_args") or {}).items()},
        labels={str(k): str(v) for k, v in (body.get("labels") or {}).items()},
        push=bool(body.get("push", False)),
        network_mode=str(body.get("network_mode", "host")),
    )
