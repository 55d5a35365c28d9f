"""ParameterClient: how actors, evaluators and policy workers get the learner's parameters."""

from __future__ import annotations

import time

import numpy as np

import caraml
from surreal.runtime.wire.asking import Asker
from surreal.runtime.wire.schemas import MAX_PARAMS_WAIT_S, params_reply
from surreal.runtime.wire.waits import SILENT, Waits

Params = dict[str, np.ndarray]


class ParameterClient:
    """Fetches the learner's latest parameters from the parameter server, only when they changed.

    A parameter server that restarts (or a reply that is lost or garbled) does not end the
    caller: `fetch` keeps asking, prints one line when the server has not answered for `timeout`
    seconds and one when it answers again, and raises RequestTimeout only after `outage_s`
    seconds without an answer. Attempts start with a 1 s wait that doubles up to `timeout`, so a
    lost reply costs about a second while a large reply on a slow link still gets `timeout`.

    Args:
        address: the parameter server's ZeroMQ address ("tcp://host:port").
        timeout: the longest wait for one reply.
        outage_s: how long `fetch` keeps retrying a server that does not answer.
        actor: the asking actor's index: the server counts the actors that ask and says how
            many are alive (`live`, for pacing); None for other askers (evaluators, workers).
        waits: the process's `surreal.runtime.wire.waits.Waits`: a server silent for
            `waits.WAIT_SAY_S` is said in the log and named by the launcher (as `peer`).
    """

    def __init__(
        self,
        address: str,
        timeout: float = 5.0,
        outage_s: float = 600.0,
        actor: int | None = None,
        waits: Waits | None = None,
        peer: str = "param-server",
    ) -> None:
        self._client = caraml.Client(address, timeout=timeout, retries=0)
        self.address, self.timeout, self.outage_s = address, timeout, outage_s
        self._asker = Asker(
            self._client,
            f"parameter server at {address}",
            timeout,
            f"retrying for up to {outage_s:.0f} s",
        )
        if waits is not None:
            self._asker.watch = lambda silent: (
                waits.over(peer) if silent is None else waits.waiting(peer, SILENT, silent)
            )
        self.version = 0
        self.step = 0
        self.latest_version = 0
        self.starved = False
        """The learner's last sample found no batch ready (a replay shard warming up)."""
        self.actor = actor
        self.live: int | None = None
        """How many actors the server saw asking lately (None: it has not said)."""
        self.stalls: int | None = None
        """How many stalls the server counted (`param_server`; None: it has not said)."""

    @property
    def outages(self) -> int:
        """How many times the server was silent for `timeout` seconds (each printed once)."""
        return self._asker.outages

    def _give_up(self, silent: float, error: Exception) -> None:
        if silent > self.outage_s:
            raise caraml.RequestTimeout(
                f"parameter server at {self.address} gave no valid answer for "
                f"{self.outage_s:.0f} s; check that it runs (`surreal status RUN_DIR`)"
            ) from error

    def fetch(self, wait_for: int | None = None, wait_s: float = 0.0) -> Params | None:
        """Ask for parameters newer than the ones held; returns them, or None if unchanged.

        With `wait_for`, the server answers once it holds that version, counts a stall (see
        `surreal.runtime.processes.param_server`), or after `wait_s` seconds (a long poll; at most
        `schemas.MAX_PARAMS_WAIT_S`).

        Raises:
            caraml.RequestTimeout: no valid answer for `outage_s` seconds.
        """
        request: dict = {"version": self.version}
        if self.actor is not None:
            request["actor"] = self.actor
        if wait_for is not None and wait_s > 0:
            wait_s = min(wait_s, MAX_PARAMS_WAIT_S)
            request.update(wait_for=wait_for, wait_s=wait_s)
        else:
            wait_s = 0.0
        reply = self._asker.ask(
            request, params_reply, self._give_up, self._client_wait, backoff=True, patience=wait_s
        )
        self.latest_version = reply["version"]
        self.live = reply.get("live", self.live)
        self.stalls = reply.get("stalls", self.stalls)
        self.starved = bool(reply.get("starved", 0))
        if reply.get("params") is None:
            return None
        self.version = reply["version"]
        self.step = reply["step"]
        return reply["params"]

    def wait_for(self, min_version: int, deadline_s: float = 600.0) -> Params | None:
        """Wait until the server holds at least `min_version`; returns new params or None.

        The server answers as soon as the version arrives (a long poll): one request per
        `MAX_PARAMS_WAIT_S` at most while nothing changes.

        Raises:
            TimeoutError: nothing new within `deadline_s` (is the learner running?).
        """
        deadline = time.monotonic() + deadline_s
        params = None
        while True:
            asked = time.monotonic()
            fresh = self.fetch(wait_for=min_version, wait_s=max(0.0, deadline - asked))
            params = fresh if fresh is not None else params
            if self.version >= min_version:
                return params
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no parameters of version >= {min_version} after {deadline_s:.0f} s; "
                    "check that the learner is running (`surreal status RUN_DIR`)"
                )
            if time.monotonic() - asked < 0.01:  # answered at once (a server without long
                self._client_wait(0.02)  # polls): pace the asking as before it had them

    @staticmethod
    def _client_wait(seconds: float) -> None:
        # Polling with a deadline: the server has nothing newer yet.
        time.sleep(seconds)

    def close(self) -> None:
        """Close the connection."""
        self._client.close()
