"""A Proxy in its own process, so forwarding never competes with the caller's Python threads."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from caraml.errors import CaramlError
from caraml.proxy import Proxy


def _run(frontend: str, backend: str, kind: str, hwm: int | None, conn: Any) -> None:
    """Child body: bind, report the addresses, forward until told to stop or the parent is gone."""
    try:
        proxy = Proxy(frontend, backend, kind, hwm=hwm)
    except CaramlError as exc:
        conn.send(("error", str(exc)))
        return
    with proxy:
        conn.send(("ready", proxy.frontend, proxy.backend))
        try:
            conn.recv()  # "stop", or EOFError when the parent died
        except EOFError:
            pass


class ProxyProcess:
    """Same as :class:`caraml.Proxy` (same kinds and semantics), run in a spawned process.

    The constructor returns once both sockets are bound (``frontend``/``backend`` hold the
    resolved addresses). ``stop()`` ends the process; it also ends by itself if its parent dies.
    """

    def __init__(
        self,
        frontend: str,
        backend: str,
        kind: str = "router-dealer",
        *,
        hwm: int | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_run,
            args=(frontend, backend, kind, hwm, child),
            name=f"caraml-proxy {frontend}",
            daemon=True,
        )
        self._proc.start()
        child.close()
        if not self._conn.poll(start_timeout):
            self.stop()
            raise CaramlError(f"proxy process did not start within {start_timeout} s")
        try:
            status, *rest = self._conn.recv()
        except EOFError:
            status, rest = "error", [f"exited with code {self._proc.exitcode}"]
        if status != "ready":
            self.stop()
            raise CaramlError(f"proxy process failed: {rest[0]}")
        self.kind = kind
        self.frontend, self.backend = rest

    def start(self) -> ProxyProcess:
        """Already forwarding since construction; returns self (for symmetry with Proxy)."""
        return self

    def stop(self) -> None:
        """Stop forwarding and wait for the process to exit (killed after 5 s)."""
        if self._proc.pid is None or self._conn.closed:
            return
        try:
            self._conn.send("stop")
        except (BrokenPipeError, OSError):
            pass
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._conn.close()

    close = stop

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
