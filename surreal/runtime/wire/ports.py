"""Receiving on a port without ever dying: caraml endpoints wrapped so any decode failure is a drop.

caraml rejects a malformed message with MalformedMessage; these wrappers also turn any other
exception raised while decoding a peer's bytes (a bug in a decoder is still a peer's message that
must not end the process) into a counted, once-logged drop on the port's `PortGuard`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import caraml
from caraml.wire import KIND_ERROR, serialize
from surreal.runtime.wire.guard import PortGuard
from surreal.runtime.wire.schemas import REQUEST_MAX_BYTES, EsRequest

NOTHING = object()
"""What `receive` returns when nothing (valid) arrived in time."""


def receive(recv: Callable[[], Any], guard: PortGuard) -> Any:
    """`recv()` (a Puller's pull or a Subscriber's recv with its timeout), or NOTHING when it timed
    out or the message could not be decoded (counted on `guard`)."""
    try:
        return recv()
    except caraml.RequestTimeout:
        return NOTHING
    except caraml.MalformedMessage as exc:
        guard.reject(str(exc), "malformed")
    except Exception as exc:  # noqa: BLE001 - an undecodable message never ends the server
        guard.reject(f"{type(exc).__name__}: {exc}", "undecodable")
    return NOTHING


class GuardedServer(caraml.Server):
    """A caraml Server whose loop survives any failure to decode or answer a request: the peer
    gets an error reply and the failure is counted on `guard`."""

    def __init__(self, address: str, handler: Callable[[Any], Any], guard: PortGuard, **kw: Any):
        super().__init__(address, handler, **kw)
        self.guard = guard

    def _answer(self, frames: list) -> list:
        try:
            return super()._answer(frames)
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            self.guard.reject(f"{type(exc).__name__}: {exc}", "undecodable")
            return serialize("undecodable request", kind=KIND_ERROR)


def checked_handler(
    handler: Callable[[Any], Any],
    validate: Callable[[Any], Any],
    guard: PortGuard,
    refusal: dict,
) -> Callable[[Any], Any]:
    """A Server handler that answers `handler(validate(request))`, or a copy of `refusal` (with
    the reason under "error") when the request does not fit (counted on `guard`)."""

    def answer(message: Any) -> Any:
        request = guard.check(validate, message)
        if request is None:
            return {**refusal, "error": f"not a valid request for port {guard.port}"}
        return handler(request)

    return answer


def es_master_server(master: Any, address: str) -> GuardedServer:
    """The ES master's Server: worker requests checked by `schemas.EsRequest` first."""
    guard = PortGuard("es-master")
    validate = EsRequest(len(master.state.obstat.sum), len(master.gen.indices), guard)
    refusal = {"op": "wait", "generation": -1, "checksum": 0.0}
    handler = checked_handler(master.handle, validate, guard, refusal)
    return GuardedServer(address, handler, guard, max_size=REQUEST_MAX_BYTES)
