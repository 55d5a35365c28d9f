"""The experiment spec as stored on a cluster: one compact annotation value, read back by anyone.

Kubernetes refuses an object whose annotations together exceed 256 KiB (262,144 bytes). A spec
as YAML grows with every process (a 450-actor surreal run's was 268,918 bytes), so the kube
backend stores it as `PREFIX` + base64 of its JSON compressed with xz (LZMA): the processes of a
large experiment differ only in their index, which LZMA's long window folds away (a 2,000-actor
surreal run's spec is a few KiB). `decode` also reads the plain YAML that older versions
stored, so experiments launched before keep working with `symphony list/describe/delete`.
"""

from __future__ import annotations

import base64
import json
import lzma

from symphony.errors import SpecError
from symphony.spec import Experiment

PREFIX = "xz+b64:"
"""Marks an encoded spec (plain YAML never starts with it)."""

ANNOTATIONS_LIMIT = 262_144
"""Kubernetes' limit on the total size of an object's annotations, in bytes."""

BUDGET = ANNOTATIONS_LIMIT - 16_384
"""What the spec may take: the limit less room for the annotations others add (kubectl, tools)."""


def encode(experiment: Experiment) -> str:
    """The spec as one annotation value.

    Raises:
        SpecError: even compressed it is over `BUDGET` bytes (the message gives both numbers).
    """
    raw = json.dumps(experiment.to_dict(), separators=(",", ":")).encode()
    text = PREFIX + base64.b64encode(lzma.compress(raw, preset=9)).decode()
    if len(text) > BUDGET:
        raise SpecError(
            f"experiment {experiment.name!r}: its spec is {len(text):,} bytes compressed "
            f"({len(raw):,} as JSON), over the {BUDGET:,} bytes symphony keeps under "
            f"Kubernetes' {ANNOTATIONS_LIMIT:,}-byte annotation limit; split it into "
            "several experiments or make its processes' env and commands shorter"
        )
    return text


def decode_text(text: str | None) -> str | None:
    """The spec's text from an annotation value: JSON (a subset of YAML) for an encoded one,
    plain YAML as older versions stored it; None stays None."""
    if not text or not text.startswith(PREFIX):
        return text
    try:
        return lzma.decompress(base64.b64decode(text[len(PREFIX) :], validate=True)).decode()
    except (ValueError, lzma.LZMAError) as err:
        raise SpecError(
            f"the stored spec is damaged ({err}); it was not written by symphony"
        ) from None


def decode(text: str | None) -> Experiment | None:
    """The Experiment of an annotation value (None when there is none)."""
    spec = decode_text(text)
    if not spec:
        return None
    if text.startswith(PREFIX):  # JSON: read fast (a YAML parser takes seconds on 2,000 processes)
        return Experiment.from_dict(json.loads(spec))
    return Experiment.from_yaml(spec)
