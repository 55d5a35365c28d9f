"""The Secrets a kube launch puts into the experiment's namespace (values pass through memory
only, never through a manifest): from local files (`secret_files`), else copied from the secrets
namespace; in a team namespace only those from files, named `<experiment>-<name>`
(`naming.secret_object`), the others must be the admin's there already."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from symphony.errors import BackendError
from symphony.kube.naming import (
    LABEL_EXPERIMENT,
    LABEL_MANAGED,
    MANAGER,
    RenderOptions,
    secret_object,
    secrets_of,
)
from symphony.kube.options import KubeOptions
from symphony.spec import Experiment


def secret_objects(
    api: Any, config: KubeOptions, experiment: Experiment, ns: str, options: RenderOptions
) -> list[dict]:
    """Secret objects for the experiment's namespace, read from files or the secrets namespace.

    In a team namespace only those from files (named `<experiment>-<name>`); the others must
    be there already, created by its admin (BackendError naming the missing one)."""
    from symphony.kube.api import short_error

    names = sorted({s for p in experiment.processes() for s in secrets_of(p, options)})
    out = []
    for name in names:
        if name in config.secret_files:
            data = _files_data(Path(config.secret_files[name]).expanduser())
        elif options.team:
            _check_team_secret(api, ns, name)
            continue
        else:
            try:
                data = api.read_secret_data(config.secrets_namespace, name)
            except Exception as err:
                raise BackendError(
                    f"secret {name!r} is not in namespace {config.secrets_namespace!r} "
                    f"({short_error(err)}); "
                    f"create it there (`kubectl -n {config.secrets_namespace} create secret "
                    f"generic {name} --from-file=...`) or pass secret_files={{{name!r}: PATH}}"
                ) from None
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": secret_object(experiment, options, name),
                    "namespace": ns,
                    "labels": {LABEL_EXPERIMENT: experiment.name, LABEL_MANAGED: MANAGER},
                },
                "data": data,
            }
        )
    return out


def _check_team_secret(api: Any, ns: str, name: str) -> None:
    """A Secret a process mounts in a team namespace exists there (it is the admin's)."""
    from symphony.kube.api import short_error

    try:
        api.read_secret_data(ns, name)
    except Exception as err:
        raise BackendError(
            f"secret {name!r} is not in team namespace {ns!r} ({short_error(err)}); ask its "
            f"admin to create it there, or pass secret_files={{{name!r}: PATH}} to create "
            f"one for this experiment"
        ) from None


def _files_data(path: Path) -> dict[str, str]:
    """Base64 Secret data from a file (key: its name) or every file in a folder."""
    if not path.exists():
        raise BackendError(f"secret file {path} does not exist; check the secret_files option")
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    return {f.name: base64.b64encode(f.read_bytes()).decode() for f in files}
