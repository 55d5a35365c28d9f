"""The kube backend's `--dry-run` output: the manifests as YAML, serialized once.

Each object is dumped once, with libyaml's C emitter when PyYAML has it (`yaml.CSafeDumper`;
the pure-Python emitter, several times slower, otherwise), in block style with the innermost
lists and maps on one line (`env: - {name: X, value: Y}`), which keeps a 1,024-actor run under
2 MB. The same texts are written to the `output` folder, one file per object, and printed. A
large plan written to a folder is printed as a summary instead (`PRINT_LIMIT`): its counts, size
and folder.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

_BASE = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Dumper(_BASE):  # type: ignore[misc, valid-type]
    """The fastest safe dumper PyYAML has here; never writes anchors and aliases."""

    def ignore_aliases(self, data: object) -> bool:  # noqa: ARG002 - PyYAML's signature
        return True


PRINT_LIMIT = 256 * 1024
"""Bytes of YAML above which a plan that was written to a folder is printed as a summary."""
WIDTH = 120


def dump(obj: dict) -> str:
    """One object as a YAML document."""
    return yaml.dump(obj, Dumper=Dumper, sort_keys=False, default_flow_style=None, width=WIDTH)


def to_yaml(objects: list[dict]) -> str:
    """Objects as one multi-document YAML text (`kubectl apply -f -` reads it)."""
    return join([dump(o) for o in objects])


def join(texts: list[str]) -> str:
    """Documents as one multi-document YAML text."""
    return "---\n".join(texts)


def file_names(objects: list[dict]) -> list[str]:
    """`NN-kind-name.yaml` per object, numbered in apply order with as many digits as the
    last number needs (at least two), so the names sort in apply order."""
    digits = max(2, len(str(len(objects) - 1)))
    return [
        f"{i:0{digits}d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        for i, obj in enumerate(objects)
    ]


def write_manifests(
    objects: list[dict], folder: str | Path, texts: list[str] | None = None
) -> list[Path]:
    """One file per object, numbered in apply order (`kubectl apply -f DIR` keeps that order);
    `texts`: the objects already dumped (`dump`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    texts = texts if texts is not None else [dump(o) for o in objects]
    paths = []
    for name, text in zip(file_names(objects), texts, strict=True):
        path = folder / name
        path.write_text(text)
        paths.append(path)
    return paths


def summary(objects: list[dict], texts: list[str], folder: str | Path) -> str:
    """What a large dry run wrote, as YAML comments: object counts by kind, size, the folder."""
    kinds = Counter(o["kind"] for o in objects)
    size = sum(len(t.encode()) for t in texts)
    counts = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    return (
        f"# {len(objects)} objects ({counts}), {size / 1e6:.2f} MB of YAML, written to "
        f"{folder}/ (one file per object, in apply order)\n"
        f"# review them there; apply with `kubectl apply -f {folder}`\n"
    )


def plan_text(objects: list[dict], folder: str | Path | None) -> str:
    """The objects as YAML, also written to `folder` when given; a large plan written to a
    folder comes back as its `summary`."""
    texts = [dump(o) for o in objects]
    if folder is None:
        return join(texts)
    write_manifests(objects, folder, texts)
    if sum(len(t) for t in texts) > PRINT_LIMIT:
        return summary(objects, texts, folder)
    return join(texts)
