"""Policy worker: batched inference for many actors (SRL's policy worker, Sample Factory's).

`actor.inference=remote` starts `run.policy_workers` of them (`policy-worker-K`, binding
`policy-K`); actor i asks worker i % K. A worker follows the parameter server like an actor does
(by version), gathers the requests that arrive within `actor.inference_wait_ms` of the first one
(or until every actor it knows has one waiting), runs the policy's method once on the whole batch
and answers each actor with its rows; it serves the methods the policy declares in
`Policy.remote_methods`. A recurrent policy (`Policy.recurrent = True`, its memory in a
batch-first `state` attribute, like `VisionPolicy`) keeps one state per client there, reset where
the client says an episode ended. Every request is checked against the
env's observation spec (`surreal.runtime.wire.policy_protocol`); a bad one is counted and refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import zmq

import caraml
from caraml.reader import deserialize
from caraml.sockets import Endpoint, send_frames
from caraml.wire import serialize
from surreal.api.config import ConfigError
from surreal.api.core import Policy
from surreal.api.device import check_device
from surreal.monitoring import logs
from surreal.runtime.processes.common import Component
from surreal.runtime.wire.guard import PortGuard
from surreal.runtime.wire.parameter_client import ParameterClient
from surreal.runtime.wire.policy_protocol import (
    PolicyRequest,
    declares,
    inference_methods,
    split_result,
    undeclared_hint,
)

ACTIVE_S = 5.0
"""A client that has not asked for this long no longer holds a batch back."""


def is_recurrent(policy: Policy) -> bool:
    """Whether `policy` keeps per-environment memory: its `Policy.recurrent` marker; a policy
    that overrides `reset` without setting the marker counts as recurrent (deprecated,
    `recurrent_hint`), as it did before the marker."""
    if declares(policy, "recurrent"):
        return bool(type(policy).recurrent)
    return type(policy).reset is not Policy.reset


def recurrent_hint(policy: Policy) -> str | None:
    """The one-line deprecation warning for a policy recurrent by the old rule, or None."""
    if declares(policy, "recurrent") or type(policy).reset is Policy.reset:
        return None
    name = type(policy).__name__
    return (
        f"{name} overrides reset() without declaring `recurrent`: treated as recurrent "
        f"(deprecated); set `recurrent = True` on {name} (or False if reset() keeps no memory)"
    )


class PolicyServer:
    """The worker's inference logic, without sockets: batches of checked requests in, replies out.

    Args:
        policy: the learner's policy (`Learner.make_policy`), parameters loaded by the caller.
        obs_shape: the env's observation shape (requests with another are refused).

    Raises:
        ValueError: a recurrent policy without a batch-first `state` attribute (its memory could
            not be kept per client), or `remote_methods` naming what cannot be served.

    Logs one warning line each for a policy that relies on the old rules (`recurrent_hint`,
    `policy_protocol.undeclared_hint`); it is still served as before.
    """

    def __init__(self, policy: Policy, obs_shape: tuple[int, ...]) -> None:
        self.policy = policy
        self.recurrent = is_recurrent(policy)
        if self.recurrent and not hasattr(policy, "state"):
            raise ValueError(
                f"{type(policy).__name__} is recurrent but keeps no `state` attribute: "
                "remote inference needs its memory as a batch-first tuple of tensors in "
                "`self.state` (see VisionPolicy); use actor.inference=local"
            )
        for hint in (recurrent_hint(policy), undeclared_hint(policy)):
            if hint:
                logs.get().warning(hint)
        self.guard = PortGuard("policy")
        self.validate = PolicyRequest(obs_shape, inference_methods(policy))
        self.states: dict[str, Any] = {}
        self.version = 0
        self.served_envs = 0
        self.batches = 0

    def answer(self, requests: list[dict]) -> list[dict]:
        """Replies to checked requests (`PolicyRequest` output), in their order."""
        replies: list[dict | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault((req["method"], req["kwargs"]), []).append(i)
        for (method, kwargs), members in groups.items():
            batches = [members]
            if (
                self.recurrent
            ):  # a client without memory yet starts it alone (the policy's own init)
                fresh = [i for i in members if self._state_of(requests[i]) is None]
                held = [i for i in members if i not in fresh]
                batches = [[i] for i in fresh] + ([held] if held else [])
            for batch in batches:
                results = self._run(method, dict(kwargs), [requests[i] for i in batch])
                for i, result in zip(batch, results, strict=True):
                    replies[i] = result
        return replies  # type: ignore[return-value]

    def _run(self, method: str, kwargs: dict, reqs: list[dict]) -> list[dict]:
        sizes = [len(r["obs"]) for r in reqs]
        obs = np.concatenate([r["obs"] for r in reqs])  # a writable copy (torch wants one)
        try:
            if self.recurrent:
                self.policy.state = _cat([self._state_of(r) for r in reqs])
            result = getattr(self.policy, method)(obs, **kwargs)
            parts = split_result(result, sizes)
            if self.recurrent:
                for req, state in zip(reqs, _split(self.policy.state, sizes), strict=True):
                    self.states[req["client"]] = state
        except Exception as exc:  # noqa: BLE001 - a policy failing on one batch is answered
            self.guard.reject(f"{method} raised {type(exc).__name__}: {exc}", "policy-error")
            return [{"error": f"{method} raised {type(exc).__name__}: {exc}"} for _ in reqs]
        self.served_envs += len(obs)
        self.batches += 1
        return [{"version": self.version, "result": part} for part in parts]

    def _state_of(self, req: dict) -> Any:
        """The client's memory, reset where its `reset` says, or None (none yet, or its number of
        environments changed)."""
        state = self.states.get(req["client"])
        if state is not None and len(state[0]) != len(req["obs"]):
            state = None
        if state is not None and req["reset"] is not None and req["reset"].any():
            self.policy.state = state
            self.policy.reset(req["reset"])
            state = self.policy.state
        self.states[req["client"]] = state
        return state


def _cat(states: list[Any]) -> Any:
    if len(states) == 1:
        return states[0]
    return tuple(torch.cat([s[k] for s in states]) for k in range(len(states[0])))


def _split(state: Any, sizes: list[int]) -> list[Any]:
    if state is None:
        return [None] * len(sizes)
    if len(sizes) == 1:
        return [state]
    pieces = [part.split(sizes) for part in state]
    return [tuple(p[i] for p in pieces) for i in range(len(sizes))]


def place(policy: Policy, spec: str, cuda_count: int | None = None) -> str:
    """Move POLICY to the device `actor.inference_device` (SPEC) resolves to on this machine
    (`surreal.api.device.check_device`; `cuda_count` as there) and return that device; `cpu` leaves
    it where it is.

    Raises:
        ConfigError: no such device here, or a policy without a `to(device)` method (the
            built-in PPO, conv+LSTM and DDPG/TD3 policies have one).
    """
    device = check_device(spec, cuda_count, name="actor.inference_device")
    if device == "cpu":
        return device
    if not callable(getattr(policy, "to", None)):
        raise ConfigError(
            f"actor.inference_device={spec}: {type(policy).__name__} has no to(device) method "
            "(move its modules there and put act's inputs on that device, as PPOPolicy does); "
            "use actor.inference_device=cpu"
        )
    policy.to(device)
    return device


def main(run_dir: str, index: int = 0) -> None:
    """Serve `policy-INDEX` until stopped."""
    torch.set_num_threads(1)
    comp = Component(run_dir, "policy-worker", index)
    try:
        serve(comp, comp.address(f"policy-{index}").bind_tcp)
    finally:
        comp.close()


def serve(comp: Any, address: str) -> None:
    """Answer policy requests on `address` until `comp.stopping` is set (sockets closed after)."""
    cfg = comp.config
    policy = comp.algo.make_policy(cfg.algo, comp.env_info)
    device = place(policy, cfg.actor.inference_device)
    server = PolicyServer(policy, tuple(comp.env_info.obs_shape))
    obs_bytes = 4 * int(np.prod(comp.env_info.obs_shape))
    port = Endpoint(zmq.ROUTER, address, True, max_size=(1 << 14) * obs_bytes + (1 << 20))
    params = ParameterClient(comp.address("params").tcp, timeout=5.0)
    log = getattr(comp, "log", None) or logs.get()
    loop = _Serving(
        comp,
        policy,
        server,
        port,
        params,
        wait_s=cfg.actor.inference_wait_ms / 1000.0,
        tick=getattr(comp, "tick", None) or logs.Progress(log).tick,  # (tests pass a bare comp)
        drops=logs.DropReport(log, [server.guard]),
    )
    log.info(
        "policy worker %d binds %s on %s; parameters from %s",
        index_of(comp),
        address,
        device,
        comp.address("params").tcp,
    )
    try:
        loop.run()
    finally:
        log.info(
            "served %s envs in %s batches; last version %d",
            f"{server.served_envs:,}",
            f"{server.batches:,}",
            server.version,
        )
        port.close()
        params.close()


@dataclass
class _Serving:
    """The serving loop's parts and state: clients seen, the last fetch and report."""

    comp: Any
    policy: Policy
    server: PolicyServer
    port: Any
    params: Any
    wait_s: float
    tick: Callable[..., bool]
    drops: logs.DropReport
    seen: dict[str, float] = field(default_factory=dict)
    last_fetch: float = field(default_factory=time.monotonic)
    last_report: float = 0.0
    reported: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        """Both clocks start together (the first report covers the time since start)."""
        self.last_report = self.last_fetch

    def run(self) -> None:
        """Gather requests, follow the parameters, answer, report; until stopped."""
        server = self.server
        while not self.comp.stopping.is_set():
            pending = _gather(self.port, server, self.seen, self.wait_s, self.comp)
            need = max((req["min_version"] for _, req in pending), default=0)
            if time.monotonic() - self.last_fetch > 0.05 or server.version < max(need, 1):
                self.last_fetch = _follow(self.params, self.policy, server, need, self.comp)
            if pending:
                self.answer(pending)
            if self.tick(
                {"envs served": server.served_envs, "batches": server.batches},
                {"clients": len(self.seen), "version": server.version},
            ):
                self.drops.check()
            now = time.monotonic()
            if now - self.last_report > 2.0:
                self.report(now)

    def answer(self, pending: list) -> None:
        """Answer each pending request (an error to all while no parameters are held)."""
        if self.server.version < 1:
            replies = [{"error": "no parameters yet; retry"}] * len(pending)
        else:
            replies = self.server.answer([req for _, req in pending])
        for (envelope, _), reply in zip(pending, replies, strict=True):
            _send(self.port, envelope, reply)

    def report(self, now: float) -> None:
        """Report envs served per second, envs per batch and requests dropped since the last."""
        server = self.server
        envs, batches = server.served_envs - self.reported[0], server.batches - self.reported[1]
        self.comp.report(
            self.params.step,
            {
                "policy/envs_per_s": envs / (now - self.last_report),
                "policy/batch_envs": envs / max(batches, 1),
                "policy/dropped": server.guard.total_dropped,
            },
            version=server.version,
        )
        self.last_report, self.reported = now, (server.served_envs, server.batches)


def index_of(comp: Any) -> int:
    return int(getattr(comp, "index", 0))


def _follow(params: Any, policy: Policy, server: PolicyServer, need: int, comp: Any) -> float:
    """Fetch newer parameters (waiting up to 2 s for version `need`); returns the time."""
    deadline = time.monotonic() + 2.0
    while not comp.stopping.is_set():
        try:
            fresh = params.fetch()
        except caraml.RequestTimeout:
            break
        if fresh:
            policy.load_params(fresh)
            server.version = params.version
        if params.version >= need or time.monotonic() > deadline:
            break
        comp.stopping.wait(0.005)  # polling the parameter server for the version asked for
    return time.monotonic()


def _gather(port: Any, server: PolicyServer, seen: dict, wait_s: float, comp: Any) -> list:
    """Checked requests: the first within 0.1 s, then more until `wait_s` after it or until every
    client seen in the last ACTIVE_S seconds has one waiting. Bad ones are refused here."""
    pending: list[tuple[list, dict]] = []
    clients: set[str] = set()
    deadline = None
    while not comp.stopping.is_set():
        now = time.monotonic()
        active = {c for c, t in seen.items() if now - t < ACTIVE_S}
        if pending and (clients >= active or now >= deadline):
            break
        timeout = 0.1 if deadline is None else max(deadline - now, 0.0)
        if not port._sock.poll(int(timeout * 1000), zmq.POLLIN):
            if deadline is None or time.monotonic() >= deadline:
                break
            continue
        got = _receive(port, server)
        if got is None:
            continue
        envelope, req = got
        if req["client"] in clients:  # a retry of a request still pending: answer the latest
            pending = [(e, r) for e, r in pending if r["client"] != req["client"]]
        pending.append((envelope, req))
        clients.add(req["client"])
        seen[req["client"]] = time.monotonic()
        deadline = deadline or time.monotonic() + wait_s
    return pending


def _receive(port: Any, server: PolicyServer) -> tuple[list, dict] | None:
    """One message off the ROUTER: (envelope, checked request), or None (refused and counted)."""
    parts = port._sock.recv_multipart(copy=False)
    split = next((i for i, part in enumerate(parts) if len(part) == 0), -1)
    if split < 0:
        server.guard.reject("a message without a reply envelope", "malformed")
        return None
    envelope = [p.bytes for p in parts[: split + 1]]
    frames = parts[split + 1 :]
    try:
        frames[0] = frames[0].bytes
        message = deserialize(frames, port.max_size)
    except Exception as exc:  # noqa: BLE001 - an undecodable message never ends the worker
        server.guard.reject(f"{type(exc).__name__}: {exc}", "malformed")
        _send(port, envelope, {"error": "malformed request"})
        return None
    req = server.guard.check(server.validate, message)
    if req is None:
        _send(port, envelope, {"error": "not a valid policy request (see policy_protocol)"})
        return None
    return envelope, req


def _send(port: Any, envelope: list, reply: dict) -> None:
    try:
        send_frames(port._sock, [*envelope, *serialize(reply)])
    except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be serialized
        send_frames(port._sock, [*envelope, *serialize({"error": f"unserializable: {exc}"})])
