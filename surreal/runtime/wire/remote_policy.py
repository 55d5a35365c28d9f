"""Env-only actors: a Policy that asks a policy worker, and how actors and topologies choose it.

`actor.inference=local` (the default): each actor runs `Learner.make_policy` itself and loads the
parameters it fetches. `actor.inference=remote`: each actor gets a `RemotePolicy`, a drop-in
`Policy` whose inference methods (its `Policy.remote_methods`: `act`, `value`, DDPG's
`unit_action`; `policy_protocol.inference_methods`) are answered by policy worker
`index % run.policy_workers` (`surreal.runtime.processes.policy_worker`); other methods (e.g. DDPG's `scale`) run on a local copy
of the learner's policy. The actor then follows the parameter *version* only (`VersionClient`:
no weights travel to it) and passes it on, so the worker answers with parameters at least as new.
A worker that dies is restarted by the launcher; meanwhile the actor waits and retries.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

import caraml
from surreal.api.core import Batch, Params, Policy
from surreal.runtime.wire.asking import Asker
from surreal.runtime.wire.parameter_client import ParameterClient
from surreal.runtime.wire.policy_protocol import check_reply, inference_methods


class VersionClient(ParameterClient):
    """A ParameterClient that follows the parameter version without fetching the weights.

    `fetch` returns `{"version": v}` (which `RemotePolicy.load_params` takes) when the server
    holds a newer version, else None; `version`, `latest_version` and `wait_for` work as usual.
    """

    def fetch(self, wait_for: int | None = None, wait_s: float = 0.0) -> Params | None:
        held = self.version
        self.version = 2**62  # "I have everything": the server answers with its version only
        try:
            super().fetch(wait_for, wait_s)
        finally:
            self.version = held
        if self.latest_version > held:
            self.version = self.latest_version
            return {"version": self.version}
        return None


class RemotePolicy(Policy):
    """A Policy answered by a policy worker at `address`, as client `client`.

    Args:
        address: the worker's `policy-K` service ("tcp://host:port").
        client: this actor's name (its recurrent memory is kept under it on the worker).
        local: a policy of the learner's class, for methods that are not inference (no weights).
        stopping: an Event; set, a call that waits for the worker gives up (raises SystemExit).
        timeout: seconds one attempt waits for a reply before it is sent again.
    """

    def __init__(
        self, address: str, client: str, local: Policy, stopping: Any = None, timeout: float = 5.0
    ) -> None:
        self.address, self.client, self.local = address, client, local
        self.methods = inference_methods(local)
        self.stopping = stopping or threading.Event()
        self._client = caraml.Client(address, timeout=timeout, retries=0)
        self._asker = Asker(
            self._client,
            f"policy worker at {address}",
            timeout,
            "waiting for it (the launcher restarts it)",
        )
        self._versions = {"min": 0}  # shared with twins: load_params on one raises them all
        self.version = 0
        """The parameter version of the worker's last answer."""
        self._reset: np.ndarray | None = None

    @property
    def min_version(self) -> int:
        """Answers must come from parameters at least this new (set by `load_params`)."""
        return self._versions["min"]

    def twin(self, client: str) -> RemotePolicy:
        """Another client of the same worker (its own connection and recurrent memory there),
        following the same `min_version`: for the halves of a double-buffered actor."""
        other = RemotePolicy(self.address, client, self.local, self.stopping, self.timeout)
        other._versions = self._versions
        return other

    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        action, extras = self.call("act", obs, deterministic=deterministic)
        return action, extras

    def value(self, obs: np.ndarray) -> np.ndarray | None:
        return self.call("value", obs)

    def reset(self, done: np.ndarray) -> None:
        """Remember which environments ended; the next request tells the worker."""
        done = np.asarray(done, bool)
        self._reset = done.copy() if self._reset is None else self._reset | done

    def load_params(self, params: Params) -> None:
        """Take the version from `VersionClient.fetch` (or real params' `version` if present):
        later answers come from parameters at least that new. No weights are loaded here."""
        version = params.get("version") if isinstance(params, dict) else None
        if isinstance(version, (int, np.integer)):
            self._versions["min"] = max(self.min_version, int(version))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("local", "methods", "address", "client"):
            raise AttributeError(name)
        if name in self.methods:
            return lambda obs, **kwargs: self.call(name, obs, **kwargs)
        return getattr(self.local, name)

    def call(self, method: str, obs: np.ndarray, **kwargs: Any) -> Any:
        """`method(obs, **kwargs)` on the worker; retries (printing once per outage) until it
        answers or `stopping` is set."""
        obs = np.ascontiguousarray(obs, np.float32)
        request: dict[str, Any] = {
            "client": self.client,
            "method": method,
            "obs": obs,
            "kwargs": {k: bool(v) for k, v in kwargs.items()},
            "min_version": int(self.min_version),
        }
        if self._reset is not None and len(self._reset) == len(obs):
            request["reset"] = self._reset
        self.version, result = self._asker.ask(
            request, check_reply, self._give_up, self.stopping.wait
        )
        self._reset = None
        return result

    @property
    def timeout(self) -> float:
        """Seconds of silence before an outage is announced (and one attempt's wait)."""
        return self._asker.timeout

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        self._asker.timeout = self._client.timeout = seconds

    @property
    def outages(self) -> int:
        """How many times the worker was silent for `timeout` seconds (each printed once)."""
        return self._asker.outages

    def _give_up(self, silent: float, error: Exception) -> None:
        if self.stopping.is_set():
            raise SystemExit(0) from error

    def close(self) -> None:
        """Close the connection to the worker."""
        self._client.close()


def actor_inference(comp: Any, index: int) -> tuple[Policy, ParameterClient]:
    """The policy and parameter client an actor uses, per `actor.inference` (see the module)."""
    cfg = comp.config
    local = comp.algo.make_policy(cfg.algo, comp.env_info)
    if cfg.actor.inference != "remote":
        return local, ParameterClient(
            comp.address("params").tcp, timeout=5.0, actor=index, waits=comp.waits
        )
    worker = index % cfg.run.policy_workers
    remote = RemotePolicy(
        comp.address(f"policy-{worker}").tcp, f"actor-{index}", local, comp.stopping
    )
    return remote, VersionClient(comp.address("params").tcp, timeout=5.0, actor=index)
