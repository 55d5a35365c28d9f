"""The environment a container of rendered kube objects starts with, as the kubelet builds it.

`envFrom` ConfigMaps first (a later source wins), then `env` in order: a `valueFrom.fieldRef`
reads the pod (here: `status.podIP` is `POD_IP`), and `$(NAME)` in a value expands to a variable
defined before it (`$$` is a literal `$`; an unknown name stays as written).
"""

from __future__ import annotations

import re

POD_IP = "10.0.0.7"
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def config_maps(objects: list[dict]) -> dict[str, dict[str, str]]:
    """ConfigMap name -> data, of the rendered objects."""
    return {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}


def expand(value: str, defined: dict[str, str]) -> str:
    """`value` with `$(NAME)` references to `defined` expanded."""

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        return defined.get(match.group(1), match.group(0))

    return _REF.sub(one, value)


def container_env(container: dict, maps: dict[str, dict[str, str]]) -> dict[str, str]:
    """Name -> value of every variable the container starts with (`maps`: `config_maps`)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = expand(entry["value"], env)
            continue
        field = entry["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == "status.podIP", f"{entry['name']} reads {field}"
        env[entry["name"]] = POD_IP
    return env
