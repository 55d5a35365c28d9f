"""What a server does with a message that does not fit its port: count it, log it once, drop it.

Every surreal process that binds a port (or reads one through a proxy) checks each message with a
validator from `surreal.runtime.wire.schemas` before acting on it. A validator raises `Invalid`; the
port's `PortGuard` counts the message by reason kind, prints one line the first time a kind is
seen (so 10,000 bad messages write one line, not 10,000 tracebacks), and the server goes on with
the next message. Nothing a peer sends ends the process.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Invalid(ValueError):
    """A message does not fit its port's schema.

    Args:
        reason: one line saying what is wrong (shown in the log, and in error replies).
        kind: a short, stable name of the problem (`not-a-dict`, `bad-shape`, ...): the guard
            logs each kind once and counts per kind.
    """

    def __init__(self, reason: str, kind: str = "invalid") -> None:
        super().__init__(reason)
        self.kind = kind


class PortGuard:
    """Counts and logs (once per kind) the messages dropped on one port.

    Args:
        port: the service name (`experience`, `batches`, `metrics`, `params`, ...).
        out: where the one-line notices go (default: stderr, i.e. the process's log).
    """

    def __init__(self, port: str, out: Any = None) -> None:
        self.port = port
        self.out = out
        self.dropped: Counter[str] = Counter()
        self.accepted = 0
        self._lock = threading.Lock()

    @property
    def total_dropped(self) -> int:
        """Messages dropped on this port so far (all kinds)."""
        return sum(self.dropped.values())

    def check(self, validate: Callable[[Any], T], message: Any) -> T | None:
        """`validate(message)`, or None (counted, logged once per kind) when it raises Invalid."""
        try:
            checked = validate(message)
        except Invalid as exc:
            self.reject(str(exc), exc.kind)
            return None
        except Exception as exc:  # noqa: BLE001 - a validator's own failure is still a drop
            self.reject(f"{type(exc).__name__}: {exc}", "check-failed")
            return None
        with self._lock:
            self.accepted += 1
        return checked

    def reject(self, reason: str, kind: str = "invalid") -> None:
        """Count one dropped message; print the reason the first time this kind is seen."""
        with self._lock:
            self.dropped[kind] += 1
            first = self.dropped[kind] == 1
        if first:
            print(
                f"[{self.port}] dropped a message ({kind}): {reason}; further messages of this "
                "kind are counted, not logged",
                file=self.out or sys.stderr,
                flush=True,
            )

    def guarded(self, what: str, action: Callable[[], T]) -> T | None:
        """Run `action()`; an exception it raises is counted as kind `what` and dropped.

        The last line of defence behind the validators: a message that passed its schema yet
        still makes the server's own code raise is dropped, not fatal.
        """
        try:
            return action()
        except Exception as exc:  # noqa: BLE001 - a peer's message must never end the server
            self.reject(f"{type(exc).__name__}: {exc}", what)
            return None
