"""Optional CurveZMQ encryption and authentication: only clients whose public key is allowed connect."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import zmq

ZAP_DOMAIN = "caraml"


@dataclass(frozen=True)
class CurveKeys:
    """A CurveZMQ key pair, both Z85-encoded (40 ASCII bytes each)."""

    public: bytes
    secret: bytes


def generate_keys() -> CurveKeys:
    """Create a fresh CurveZMQ key pair (keep ``secret`` private, hand out ``public``)."""
    public, secret = zmq.curve_keypair()
    return CurveKeys(public=public, secret=secret)


@dataclass(frozen=True)
class CurveServer:
    """Curve settings for the side that accepts peers (usually the one that binds).

    Attributes:
        keys: this server's key pair; clients need ``keys.public``.
        allowed_clients: public keys of the clients allowed in; every other peer is refused.
    """

    keys: CurveKeys
    allowed_clients: frozenset[bytes] = field(default_factory=frozenset)

    def __init__(self, keys: CurveKeys, allowed_clients: Iterable[bytes] = ()) -> None:
        object.__setattr__(self, "keys", keys)
        object.__setattr__(
            self, "allowed_clients", frozenset(_as_bytes(k) for k in allowed_clients)
        )


@dataclass(frozen=True)
class CurveClient:
    """Curve settings for the side that dials in.

    Attributes:
        keys: this client's key pair; the server must list ``keys.public`` as allowed.
        server_public: the server's public key.
    """

    keys: CurveKeys
    server_public: bytes


Curve = CurveServer | CurveClient


def _as_bytes(key: bytes | str) -> bytes:
    return key.encode() if isinstance(key, str) else key


class _AllowList:
    """ZAP credentials provider: lets in exactly the listed public keys."""

    def __init__(self, allowed: frozenset[bytes]) -> None:
        self.allowed = {zmq.utils.z85.decode(k) for k in allowed} | set(allowed)

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.allowed


class CurveGuard:
    """Owns the private context and ZAP authenticator thread behind one Curve server socket."""

    def __init__(self, config: CurveServer) -> None:
        from zmq.auth.thread import ThreadAuthenticator

        self.context = zmq.Context()
        self.auth = ThreadAuthenticator(self.context)
        self.auth.start()
        self.auth.configure_curve_callback(
            domain=ZAP_DOMAIN, credentials_provider=_AllowList(config.allowed_clients)
        )

    def close(self) -> None:
        """Stop the authenticator and terminate the private context (sockets must be closed)."""
        self.auth.stop()
        self.context.term()


def apply_curve(sock: zmq.Socket, config: Curve | None) -> None:
    """Set the Curve socket options for ``config`` on ``sock`` (before bind/connect)."""
    if config is None:
        return
    sock.curve_publickey = config.keys.public
    sock.curve_secretkey = config.keys.secret
    if isinstance(config, CurveServer):
        sock.curve_server = True
        sock.zap_domain = ZAP_DOMAIN.encode()
    else:
        sock.curve_serverkey = _as_bytes(config.server_public)
