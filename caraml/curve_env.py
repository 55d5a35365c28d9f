"""Experiment-wide Curve keys from the environment: ``CARAML_CURVE_KEYS=FOLDER``.

A folder written by :func:`write_keys` holds two key pairs, in ZeroMQ's certificate format and
readable by the owner only (mode 600): ``server.key``/``server.key_secret`` and
``client.key``/``client.key_secret``. When ``CARAML_CURVE_KEYS`` names such a folder, every caraml
endpoint made without an explicit ``curve=`` uses it: a socket that binds becomes a Curve server
that lets in only the folder's client key; a socket that connects becomes a Curve client with that
key. A peer without the folder's keys gets nothing (its handshake is refused). An unset or empty
variable means plain TCP; a variable naming a folder without valid keys is an error, never a
silent fall-back to plain TCP.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import zmq.auth

from caraml.auth import Curve, CurveClient, CurveKeys, CurveServer
from caraml.errors import CaramlError

ENV = "CARAML_CURVE_KEYS"
"""The environment variable naming the key folder."""

ROLES = ("server", "client")


@dataclass(frozen=True)
class ExperimentKeys:
    """The two key pairs of one experiment: binding sockets use ``server``, connecting ``client``."""

    server: CurveKeys
    client: CurveKeys

    def for_socket(self, bind: bool) -> Curve:
        """Curve settings of a socket that binds (server) or connects (client)."""
        if bind:
            return CurveServer(self.server, allowed_clients=[self.client.public])
        return CurveClient(self.client, self.server.public)


def write_keys(folder: str | Path) -> Path:
    """Create a fresh server and client key pair in ``folder`` (made mode 700; files mode 600).

    Raises:
        FileExistsError: the folder already holds keys (reuse them or pick another folder).
    """
    path = Path(folder)
    if any((path / f"{role}.key_secret").exists() for role in ROLES):
        raise FileExistsError(f"{path} already holds Curve keys; reuse it or pick another folder")
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(stat.S_IRWXU)
    old = os.umask(0o077)
    try:
        for role in ROLES:
            zmq.auth.create_certificates(str(path), role)
    finally:
        os.umask(old)
    for role in ROLES:
        for name in (f"{role}.key", f"{role}.key_secret"):
            (path / name).chmod(stat.S_IRUSR | stat.S_IWUSR)
    return path


def load_keys(folder: str | Path) -> ExperimentKeys:
    """Read the key pairs :func:`write_keys` wrote.

    Raises:
        CaramlError: a file is missing or holds no secret key (one line saying what to do).
    """
    pairs = {}
    for role in ROLES:
        file = Path(folder) / f"{role}.key_secret"
        try:
            public, secret = zmq.auth.load_certificate(str(file))
        except (OSError, ValueError) as exc:
            raise CaramlError(
                f"{ENV}={folder}: cannot read {file} ({exc}); point {ENV} at a folder made by "
                "caraml.write_keys, or unset it for plain TCP"
            ) from None
        if not secret:
            raise CaramlError(f"{file} holds no secret key; regenerate with caraml.write_keys")
        pairs[role] = CurveKeys(public=public, secret=secret)
    return ExperimentKeys(**pairs)


_CACHE: dict[str, ExperimentKeys] = {}


def env_keys() -> ExperimentKeys | None:
    """The keys ``CARAML_CURVE_KEYS`` names (read once per folder), or None when it is unset."""
    folder = os.environ.get(ENV, "")
    if not folder:
        return None
    if folder not in _CACHE:
        _CACHE[folder] = load_keys(folder)
    return _CACHE[folder]


def env_curve(bind: bool) -> Curve | None:
    """The default ``curve=`` of a socket that binds or connects: from ``CARAML_CURVE_KEYS``."""
    keys = env_keys()
    return None if keys is None else keys.for_socket(bind)
