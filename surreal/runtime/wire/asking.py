"""Asking a peer that may be restarting: the retry loop of the parameter and policy clients.

A request that times out, is refused, or gets an answer that fails validation is sent again; the
first time the peer has been silent for `timeout` seconds one line says so, and one more line
says when it answers again. The caller decides when to give up (`outage_s`, or an Event).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import caraml
from surreal.runtime.wire.guard import Invalid


class Asker:
    """Sends requests through a caraml Client (made with `retries=0`) until one is answered.

    Args:
        client: the caraml Client.
        peer: what the peer is, for the printed lines ("parameter server at tcp://...").
        timeout: seconds of silence before the outage is announced (and the longest wait for
            one reply when `backoff` is on).
        waiting: the end of the outage line (what the caller does meanwhile).
    """

    def __init__(self, client: Any, peer: str, timeout: float, waiting: str) -> None:
        self.client, self.peer, self.timeout, self.waiting = client, peer, timeout, waiting
        self.outages = 0
        """How many outages were announced."""
        self.watch: Callable[[float | None], Any] | None = None
        """Told the seconds of silence after each failed attempt, and None once the peer
        answers again (`surreal.runtime.wire.waits`: the launcher names a long silence)."""

    def ask(
        self,
        request: Any,
        check: Callable[[Any], Any],
        give_up: Callable[[float, Exception], None],
        pause: Callable[[float], Any],
        backoff: bool = False,
        patience: float = 0.0,
    ) -> Any:
        """`check(reply)` of the first valid reply to `request`.

        Args:
            check: validates a reply (raises surreal.runtime.wire.guard.Invalid) and returns what to return.
            give_up: called after every failed attempt with the seconds of silence and the
                error; it raises to end the asking (e.g. past an outage limit, or stopping).
            pause: waits the given seconds before an attempt that failed at once is repeated.
            backoff: attempts wait 1 s for a reply, doubling up to `timeout` (a lost reply costs
                about a second while a large reply on a slow link still gets `timeout`);
                without it, every attempt waits the client's own timeout.
            patience: seconds every attempt waits on top (the peer holds the request that long
                by design: a long poll); silence is counted from past it.
        """
        started, announced, watched = time.monotonic(), False, False
        wait = min(1.0, self.timeout) if backoff else None
        while True:
            try:
                timeout = wait if not patience else (wait or self.client.timeout) + patience
                reply = check(self.client.request(request, timeout=timeout))
                break
            except (caraml.CaramlError, Invalid) as exc:
                silent = max(0.0, time.monotonic() - started - patience)
                give_up(silent, exc)
                if self.watch is not None:
                    self.watch(silent)
                    watched = True
                if not announced and silent >= self.timeout:
                    announced, self.outages = True, self.outages + 1
                    print(
                        f"{self.peer} did not answer for {silent:.0f} s ({exc}); {self.waiting}",
                        flush=True,
                    )
                if not isinstance(exc, caraml.RequestTimeout):
                    pause(0.5 if backoff else 0.05)  # refused or garbled: pace the retries
                elif wait is not None:
                    wait = min(wait * 2, self.timeout)
        if watched and self.watch is not None:
            self.watch(None)
        if announced:
            print(f"{self.peer} answers again after {time.monotonic() - started:.1f} s", flush=True)
        return reply
