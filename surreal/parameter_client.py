"""ParameterClient: how actors, evaluators and policy workers get the learner's parameters."""

from __future__ import annotations

import time

import numpy as np

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
    """

    def __init__(self, address: str, timeout: float = 5.0, outage_s: float = 600.0) -> None:
        import caraml
        from surreal.asking import Asker

        self._client = caraml.Client(address, timeout=timeout, retries=0)
        self.address, self.timeout, self.outage_s = address, timeout, outage_s
        self._asker = Asker(
            self._client,
            f"parameter server at {address}",
            timeout,
            f"retrying for up to {outage_s:.0f} s",
        )
        self.version = 0
        self.step = 0
        self.latest_version = 0

    @property
    def outages(self) -> int:
        """How many times the server was silent for `timeout` seconds (each printed once)."""
        return self._asker.outages

    def _give_up(self, silent: float, error: Exception) -> None:
        import caraml

        if silent > self.outage_s:
            raise caraml.RequestTimeout(
                f"parameter server at {self.address} gave no valid answer for "
                f"{self.outage_s:.0f} s; check that it runs (`surreal status RUN_DIR`)"
            ) from error

    def fetch(self) -> Params | None:
        """Ask for parameters newer than the ones held; returns them, or None if unchanged.

        Raises:
            caraml.RequestTimeout: no valid answer for `outage_s` seconds.
        """
        from surreal.schemas import params_reply

        reply = self._asker.ask(
            {"version": self.version},
            params_reply,
            self._give_up,
            self._client_wait,
            backoff=True,
        )
        self.latest_version = reply["version"]
        if reply.get("params") is None:
            return None
        self.version = reply["version"]
        self.step = reply["step"]
        return reply["params"]

    def wait_for(
        self, min_version: int, deadline_s: float = 600.0, poll_s: float = 0.02
    ) -> Params | None:
        """Poll until the server holds at least `min_version`; returns new params or None.

        Raises:
            TimeoutError: nothing new within `deadline_s` (is the learner running?).
        """
        deadline = time.monotonic() + deadline_s
        params = None
        while True:
            fresh = self.fetch()
            params = fresh if fresh is not None else params
            if self.version >= min_version:
                return params
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no parameters of version >= {min_version} after {deadline_s:.0f} s; "
                    "check that the learner is running (`surreal status RUN_DIR`)"
                )
            self._client_wait(poll_s)

    @staticmethod
    def _client_wait(seconds: float) -> None:
        # Polling with a deadline: the server has nothing newer yet.
        time.sleep(seconds)

    def close(self) -> None:
        """Close the connection."""
        self._client.close()
