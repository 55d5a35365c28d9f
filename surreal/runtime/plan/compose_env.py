"""What a run's containers get from the launching machine through a private env file, on a
backend that takes one (compose: symphony's `Capabilities.env_file_option`): the run's Curve keys
and its object-store settings.

Compose containers share no disk with the launching machine, so `surreal launch` writes
`RUN/keys/compose.env` (mode 600, in the mode-700 `keys/` folder that is never uploaded) and the
backend hands it to every process container (compose's `env_file` option: compose reads it at
`up`; the compose file and experiment.yaml name the file only, never a key or credential):

- `SURREAL_CURVE_KEYS` (when the run's keys travel this way, `surreal.runtime.wire.curve.delivery`): the run's two secret key files,
  base64 JSON. Each process writes them into its container's `CARAML_CURVE_KEYS` folder
  (`CONTAINER_KEYS`, mode 700, files 600) before it opens a socket (`materialize_keys`).
- for a run in an object store (`--folder s3://...`): the launching shell's `PASSED` variables
  that are set (endpoint, credentials, region, `SURREAL_SYNC_S`), so every process reaches the
  bucket the launch checked. An endpoint on 127.0.0.1 is reachable from the containers only in
  the compose backend's host-network mode (`-o network=host`).
"""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import surreal.runtime.wire.curve as curve
from caraml.curve_env import ENV as FOLDER_ENV
from surreal.runtime.plan.portable import run_url
from surreal.runtime.wire.curve import CONTAINER_KEYS  # noqa: F401  (where the keys go: compose_env's API)
from symphony.backends import capabilities

ENV_FILE = "compose.env"
"""The env file's name in the run's `keys/` folder."""

KEYS_ENV = "SURREAL_CURVE_KEYS"
"""The env var that carries the run's secret key files into the containers."""

PASSED = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "SURREAL_SYNC_S",
)
"""Variables of the launching environment an object-store run's containers get (when set)."""

KEY_FILES = ("server.key_secret", "client.key_secret")


def env_file(plan: Any) -> Path:
    """`RUN/keys/compose.env` of the plan's run folder (its local mirror for an s3:// run)."""
    return curve.key_folder(plan) / ENV_FILE


def options(plan: Any) -> dict[str, Any]:
    """The backend option that hands the env file to every process container (none where the
    backend takes no env file)."""
    option = capabilities(plan.backend).env_file_option
    return {option: str(env_file(plan))} if option else {}


def prepare(plan: Any, environ: dict[str, str] | None = None) -> None:
    """Write `RUN/keys/compose.env` (mode 600) where the backend takes an env file (compose);
    elsewhere nothing.

    Raises:
        ValueError: a passed variable's value holds a line break (an env file cannot carry it).
    """
    if not capabilities(plan.backend).env_file_option:
        return
    environ = os.environ if environ is None else environ
    values: dict[str, str] = {}
    if run_url(plan):
        values.update({k: environ[k] for k in PASSED if environ.get(k)})
    if curve.enabled(plan) and curve.delivery(plan) == "env_file":
        folder = curve.key_folder(plan)
        files = {name: (folder / name).read_text() for name in KEY_FILES}
        values[KEYS_ENV] = base64.b64encode(json.dumps(files).encode()).decode()
    for key, value in values.items():
        if "\n" in value or "\r" in value:
            raise ValueError(f"{key} holds a line break; compose env files cannot carry it")
    path = env_file(plan)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(stat.S_IRWXU)
    text = "".join(f"{key}={value}\n" for key, value in values.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)


def materialize_keys(environ: dict[str, str] | None = None) -> bool:
    """Write the keys of `KEYS_ENV` into the `CARAML_CURVE_KEYS` folder (mode 700, files 600)
    where they are missing; returns whether there were keys. Called by every process before it
    opens a socket.

    Raises:
        ValueError: `KEYS_ENV` set without `CARAML_CURVE_KEYS`, or not a key bundle.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(KEYS_ENV)
    if not text:
        return False
    folder = environ.get(FOLDER_ENV)
    if not folder:
        raise ValueError(f"{KEYS_ENV} is set but {FOLDER_ENV} is not: nowhere to write the keys")
    try:
        files = json.loads(base64.b64decode(text, validate=True))
    except ValueError:
        files = None
    if not (
        isinstance(files, dict)
        and set(files) == set(KEY_FILES)
        and all(isinstance(v, str) for v in files.values())
    ):
        raise ValueError(f"{KEYS_ENV} is not a surreal key bundle (the run's keys/{ENV_FILE})")
    root = Path(folder)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.chmod(stat.S_IRWXU)
    for name, content in files.items():
        target = root / name
        if target.is_file() and target.read_text() == content:
            continue
        tmp = root / f".{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(content)
        os.replace(tmp, target)
    return True
