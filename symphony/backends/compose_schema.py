"""Validate compose files against the Compose Specification's JSON schema (vendored, offline)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from symphony.errors import BackendError


@lru_cache(maxsize=1)
def compose_schema() -> dict[str, Any]:
    """The vendored compose-spec JSON schema (see symphony/schemas/README.md)."""
    text = resources.files("symphony").joinpath("schemas/compose-spec.json").read_text()
    return json.loads(text)


def schema_errors(compose: dict[str, Any]) -> list[str]:
    """Every violation of the compose-spec schema in `compose`, as "path: message" lines."""
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - jsonschema is in the dev extra
        raise BackendError(
            "validating compose files needs jsonschema; pip install jsonschema"
        ) from exc
    schema = compose_schema()
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema)
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}"
        for err in sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path))
    ]


def validate_compose(compose: dict[str, Any]) -> None:
    """Raise BackendError listing the schema violations of `compose`, if any."""
    errors = schema_errors(compose)
    if errors:
        raise BackendError(
            "the generated compose file breaks the compose specification:\n  "
            + "\n  ".join(errors)
            + "\nplease report this as a symphony bug"
        )
