"""The message schema of every surreal port: what a peer may send, checked before it is used.

A validator takes a decoded caraml message and returns it (possibly a cleaned copy) or raises
`surreal.runtime.wire.guard.Invalid` with a one-line reason and a short kind. Ports and validators:

    experience   (buffer, Puller)        SegmentSchema: an actor's segment, shapes from the env spec
    batches      (buffer, Server)        batch_request: {"segments": n, "timeout": s, "id": ...}
    metrics      (metrics sink, Puller)  report: a component's report (with the run's token)
    params       (param server, Server)  params_request: {"version": v, optional "wait_for",
                                         "wait_s" (a long poll), "actor" (who asks, for pacing)}
    params-pub   (param server, SUB)     ParamsSchema: {"version", "step", "params": {name: array}}
    replay       (replay shard, Puller)  ChunkSchema: a DDPG n-step chunk, shapes from the env spec
    replay-sample (replay shard, Server) sample_request: {"op": "sample"|"stats", "batch_size": b}
    es-master    (ES master, Server)     EsRequest: a worker's ask, its result checked or dropped
    learner-goal (learner, Puller)       goal.goal_message: {"eval_return", "step"} (run's token)

Schemas that depend on what the run's own processes send (a segment's extra keys, the learner's
parameter names) are pinned by the first message that passes the fixed checks; later messages must
match it exactly (keys, dtypes, shapes), so a stray message can never break stacking or loading.
"""

from __future__ import annotations

import hmac
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from surreal.api.spaces import EnvInfo
from surreal.runtime.wire.guard import Invalid

REQUEST_MAX_BYTES = 1 << 20  # a request (batches, params, replay-sample, es-master) is tiny
REPORT_MAX_BYTES = 16 << 20  # a report with 10,000 episode returns is ~200 KB
MAX_KEYS = 64
MAX_KEY_LEN = 64
MAX_TRAILING = 1 << 22  # elements per step and env of one array (an 84x84x3 image is 21,168)
ROLES = ("actor", "buffer", "learner", "param-server", "evaluator", "metrics", "replay-proxy")


def as_dict(message: Any, what: str) -> dict:
    """`message` if it is a dict with short string keys (at most MAX_KEYS of them)."""
    if not isinstance(message, dict):
        raise Invalid(f"expected {what} (a dict), got {type(message).__name__}", "not-a-dict")
    if len(message) > MAX_KEYS:
        raise Invalid(f"{what} has {len(message)} keys (at most {MAX_KEYS})", "too-many-keys")
    for key in message:
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_LEN:
            raise Invalid(f"{what} has a key that is not a short string: {key!r:.80}", "bad-key")
    return message


def as_int(value: Any, name: str, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi] (bools and floats are refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
        raise Invalid(f"{name} must be an integer, got {type(value).__name__}", "bad-field")
    if not lo <= int(value) <= hi:
        raise Invalid(f"{name}={int(value)} is outside [{lo}, {hi}]", "out-of-range")
    return int(value)


def as_float(value: Any, name: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """`value` as a finite float in [lo, hi]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise Invalid(f"{name} must be a number, got {type(value).__name__}", "bad-field")
    out = float(value)
    if not math.isfinite(out) or not lo <= out <= hi:
        raise Invalid(f"{name}={out} is not finite or outside [{lo}, {hi}]", "out-of-range")
    return out


def as_array(value: Any, name: str, kinds: str = "biuf") -> np.ndarray:
    """`value` if it is a numpy array of one of the dtype `kinds`, finite where it is float."""
    if not isinstance(value, np.ndarray):
        raise Invalid(f"{name} must be an array, got {type(value).__name__}", "not-an-array")
    if value.dtype.kind not in kinds or value.dtype.hasobject:
        raise Invalid(f"{name} has dtype {value.dtype.str!r}; expected kind {kinds}", "bad-dtype")
    if value.dtype.kind == "f" and value.size and not np.isfinite(value).all():
        raise Invalid(f"{name} holds NaN or infinite values", "not-finite")
    return value


def _shape(value: np.ndarray, name: str, expected: tuple[int, ...]) -> None:
    if value.shape != expected:
        raise Invalid(
            f"{name} has shape {list(value.shape)}, expected {list(expected)}", "bad-shape"
        )


def signature(arrays: dict[str, np.ndarray]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{key: (dtype, shape)}: what a pinned schema compares."""
    return {key: (value.dtype.str, value.shape) for key, value in arrays.items()}


def _match_pinned(pinned: dict | None, arrays: dict[str, np.ndarray], what: str) -> None:
    if pinned is None:
        return
    sig = signature(arrays)
    if sig != pinned:
        diff = sorted(set(sig) ^ set(pinned)) or sorted(k for k in sig if sig[k] != pinned[k])
        raise Invalid(
            f"{what} differs from the ones this server holds (keys/dtypes/shapes; first "
            f"difference: {diff[:3]})",
            "schema-mismatch",
        )


def _actions(value: Any, info: EnvInfo, lead: tuple[int, ...], name: str) -> None:
    if info.discrete:
        act = as_array(value, name, "iu")
        _shape(act, name, lead)
        if act.size and (act.min() < 0 or act.max() >= info.num_actions):
            raise Invalid(f"{name} outside [0, {info.num_actions})", "out-of-range")
    else:
        _shape(as_array(value, name, "f"), name, (*lead, *info.action_shape))


class SegmentSchema:
    """An actor's segment on the `experience` port (see `surreal.api.core.Actor`).

    Every value is a numeric array with leading dims [rollout_length, num_envs] (or [num_envs]:
    `next_value`, `version`); `obs`, `action`, `reward`, `terminated`, `truncated` and `version`
    are required and shaped by the env spec. The first valid segment pins the rest.
    """

    REQUIRED = ("obs", "action", "reward", "terminated", "truncated", "version")

    def __init__(self, env_info: EnvInfo, rollout_length: int, num_envs: int) -> None:
        self.info, self.T, self.N = env_info, rollout_length, num_envs
        self.pinned: dict | None = None

    def __call__(self, message: Any) -> dict[str, np.ndarray]:
        seg = as_dict(message, "a segment")
        missing = [k for k in self.REQUIRED if k not in seg]
        if missing:
            raise Invalid(f"a segment needs keys {missing}", "missing-keys")
        lead = (self.T, self.N)
        for key, value in seg.items():
            arr = as_array(value, key)
            if arr.shape[:2] != lead and arr.shape[:1] != (self.N,):
                raise Invalid(
                    f"{key} has shape {list(arr.shape)}; leading dims {list(lead)}", "bad-shape"
                )
            if math.prod(arr.shape[2:]) > MAX_TRAILING:
                raise Invalid(f"{key} is too large ({list(arr.shape)})", "too-large")
        _shape(seg["obs"], "obs", (*lead, *self.info.obs_shape))
        _actions(seg["action"], self.info, lead, "action")
        _shape(as_array(seg["reward"], "reward", "fiu"), "reward", lead)
        for key in ("terminated", "truncated"):
            _shape(as_array(seg[key], key, "b"), key, lead)
        _shape(as_array(seg["version"], "version", "iu"), "version", (self.N,))
        _match_pinned(self.pinned, seg, "this segment")
        if self.pinned is None:
            self.pinned = signature(seg)
        return seg


def segment_max_bytes(env_info: EnvInfo, rollout_length: int, num_envs: int) -> int:
    """A bound on one segment's wire size (the experience Puller's max_size): 16 float64 values
    per step and env beside the observation, and room for recurrent state, with a 4x margin."""
    per_step = 8 * (math.prod(env_info.obs_shape) + 16 + 2 * math.prod(env_info.action_shape))
    return 4 * rollout_length * num_envs * (per_step + 8 * 1024) + (1 << 20)


def batch_request(message: Any, max_segments: int) -> dict:
    """A learner's request on the `batches` port: {"segments": n, "timeout": s, "id": str}."""
    req = as_dict(message, "a batch request")
    unknown = set(req) - {"segments", "timeout", "id"}
    if unknown:
        raise Invalid(f"a batch request has unknown keys {sorted(unknown)[:3]}", "unknown-keys")
    if "segments" not in req:
        raise Invalid("a batch request needs 'segments'", "missing-keys")
    out = {
        "segments": as_int(req["segments"], "segments", 1, max_segments),
        "timeout": as_float(req.get("timeout", 1.0), "timeout", 0.0, 30.0),
    }
    if "id" in req:
        if not isinstance(req["id"], str) or len(req["id"]) > 128:
            raise Invalid("a batch request's id must be a short string", "bad-field")
        out["id"] = req["id"]
    return out


MAX_PARAMS_WAIT_S = 10.0
"""The longest a parameter server holds a long-poll request before it answers anyway."""


@dataclass(frozen=True)
class ParamsAsk:
    """A checked request on the `params` port (see `params_request`)."""

    have: int
    wait_for: int | None = None
    wait_s: float = 0.0
    actor: int | None = None


def params_request(message: Any) -> ParamsAsk:
    """A request on the `params` port: {"version": v} (the version held; -1 or absent: none).

    Optional: "wait_for": w and "wait_s": s (answer once the server holds version >= w, or
    after s seconds, at most MAX_PARAMS_WAIT_S); "actor": i (the asking actor's index: the
    server counts the actors that ask, and tells every actor how many are alive, for pacing).
    """
    req = as_dict(message, "a parameter request")
    have = as_int(req.get("version", -1), "version", -1, 2**62)
    wait_for = req.get("wait_for")
    wait_for = None if wait_for is None else as_int(wait_for, "wait_for", 0, 2**62)
    wait_s = as_float(req.get("wait_s", 0.0), "wait_s", 0.0, MAX_PARAMS_WAIT_S)
    actor = req.get("actor")
    actor = None if actor is None else as_int(actor, "actor", 0, 2**31)
    return ParamsAsk(have, wait_for, wait_s, actor)


MAX_STATS_WAIT_S = 2.0
"""The longest a replay shard holds a `stats` request with "wait_s" before it answers anyway."""


def sample_request(message: Any, max_batch: int = 1 << 16) -> dict:
    """A request on a replay shard: {"op": "stats"} or {"op": "sample", "batch_size": b}.

    A stats request may carry "wait_s": s (a long poll: answered once the shard stores its next
    chunk, or after s seconds, at most MAX_STATS_WAIT_S; the paced learner's wait for env steps).
    """
    req = as_dict(message, "a replay request")
    op = req.get("op")
    op = op if isinstance(op, str) else None
    if op == "stats":
        wait_s = as_float(req.get("wait_s", 0.0), "wait_s", 0.0, MAX_STATS_WAIT_S)
        return {"op": "stats", "wait_s": wait_s} if wait_s > 0 else {"op": "stats"}
    if op != "sample":
        raise Invalid(f"unknown replay request op {op!r:.40}; send 'sample' or 'stats'", "bad-op")
    return {"op": "sample", "batch_size": as_int(req.get("batch_size"), "batch_size", 1, max_batch)}


class ParamsSchema:
    """A publication on `params-pub` (learner -> parameter server), pinned by the first one."""

    def __init__(self) -> None:
        self.pinned: dict | None = None

    def __call__(self, message: Any) -> dict:
        msg = as_dict(message, "a parameter publication")
        version = as_int(msg.get("version"), "version", 0, 2**62)
        step = as_int(msg.get("step", 0), "step", 0, 2**62)
        params = as_dict(msg.get("params"), "params")
        for key, value in params.items():
            as_array(value, f"params[{key}]")
        _match_pinned(self.pinned, params, "these parameters")
        if self.pinned is None:
            self.pinned = signature(params)
        starved = as_int(msg.get("starved", 0), "starved", 0, 1)
        return {"version": version, "step": step, "params": params, "starved": starved}


def params_reply(message: Any) -> dict:
    """A parameter server's reply: {"version", "step", optional "params": {name: array} and
    "live" (how many actors asked lately), "stalls" (`param_server.ParameterStore.stalls`) and
    "starved" (1: the learner's last sample found no batch ready)}."""
    msg = as_dict(message, "a parameter reply")
    out = {
        "version": as_int(msg.get("version"), "version", 0, 2**62),
        "step": as_int(msg.get("step", 0), "step", 0, 2**62),
    }
    for key in ("live", "stalls", "starved"):
        if msg.get(key) is not None:
            out[key] = as_int(msg[key], key, 0, 2**62)
    if msg.get("params") is not None:
        params = as_dict(msg["params"], "params")
        for key, value in params.items():
            as_array(value, f"params[{key}]")
        out["params"] = params
    return out


class ChunkSchema:
    """A DDPG n-step chunk on a replay shard (`surreal.algos.ddpg.nstep.pack_chunk`)."""

    def __init__(self, env_info: EnvInfo, dedup: bool, max_rows: int = 1 << 16) -> None:
        self.info, self.dedup, self.max_rows = env_info, dedup, max_rows
        self.pinned: dict | None = None

    def __call__(self, message: Any) -> dict[str, np.ndarray]:
        chunk = as_dict(message, "a replay chunk")
        keys = ("act", "rew", "discount")
        keys += ("obs_table", "obs_idx", "next_obs_idx") if self.dedup else ("obs", "next_obs")
        if set(chunk) != set(keys):
            raise Invalid(f"a replay chunk has keys {sorted(keys)}", "missing-keys")
        rew = as_array(chunk["rew"], "rew", "f")
        n = len(rew) if rew.ndim == 1 else -1
        if not 1 <= n <= self.max_rows:
            raise Invalid(f"rew has shape {list(rew.shape)}; expected [n], n >= 1", "bad-shape")
        _actions(chunk["act"], self.info, (n,), "act")
        disc = as_array(chunk["discount"], "discount", "f")
        _shape(disc, "discount", (n,))
        if (disc < 0).any() or (disc > 1).any():
            raise Invalid("discount outside [0, 1]", "out-of-range")
        if self.dedup:
            table = as_array(chunk["obs_table"], "obs_table", "f")
            rows = len(table) if table.ndim else 0
            _shape(table, "obs_table", (rows, *self.info.obs_shape))
            for key in ("obs_idx", "next_obs_idx"):
                idx = as_array(chunk[key], key, "iu")
                _shape(idx, key, (n,))
                if (idx < 0).any() or (idx >= rows).any():
                    raise Invalid(f"{key} points outside obs_table", "out-of-range")
        else:
            for key in ("obs", "next_obs"):
                _shape(as_array(chunk[key], key, "f"), key, (n, *self.info.obs_shape))
        sig = {k: v[0] for k, v in signature(chunk).items()}  # dtypes only: n varies
        if self.pinned is not None and sig != self.pinned:
            raise Invalid(
                "this chunk's dtypes differ from the ones this shard holds", "schema-mismatch"
            )
        self.pinned = sig
        return chunk


_REPORT_LISTS = ("episode_returns", "episode_lengths")


def check_token(msg: dict, token: str | None, what: str) -> None:
    """Refuse `msg` (kind `no-token`) unless it carries the run's `token` (None: the run has
    none, its traffic is Curve-authenticated or nobody else can reach it)."""
    if token is None:
        return
    sent = msg.get("token")
    if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), token.encode()):
        raise Invalid(f"{what} without the run's token (RUN/keys/metrics.token)", "no-token")


def report(message: Any, token: str | None = None) -> dict:
    """A component's report on the `metrics` port, cleaned: the known fields, checked.

    `token`: the run's metrics token (`surreal.runtime.wire.report_token`); a report without it is
    refused (kind `no-token`). Scalars that are not finite numbers are left out (a NaN loss is
    not recorded); at most MAX_KEYS scalars and 10,000 episodes per report.
    """
    msg = as_dict(message, "a report")
    check_token(msg, token, "a report")
    source = msg.get("source")
    if not isinstance(source, str) or len(source) > MAX_KEY_LEN:
        raise Invalid("a report needs 'source', the component's role", "bad-field")
    out: dict[str, Any] = {
        "source": source,
        "index": as_int(msg.get("index", 0), "index", 0, 1 << 20),
        "step": as_int(msg.get("step", 0), "step", 0, 2**62),
    }
    scalars = as_dict(msg.get("scalars", {}), "scalars")
    out["scalars"] = {}
    for name, value in scalars.items():
        try:
            out["scalars"][name] = as_float(value, name)
        except Invalid:
            continue
    boot = msg.get("boot", "")
    if not isinstance(boot, str) or len(boot) > MAX_KEY_LEN:
        raise Invalid("a report's 'boot' is a short string", "bad-field")
    out["boot"] = boot
    for key in ("env_steps", "version", "start"):
        if key in msg:
            out[key] = as_int(msg[key], key, 0, 2**62)
    for key in ("finished", "exiting"):
        if key in msg:
            out[key] = bool(msg[key]) if isinstance(msg[key], (bool, np.bool_)) else False
    if "why" in msg:  # a learner's end: "budget used", or the goal it reached
        out["why"] = _short(msg["why"], "why")
    if msg.get("wait_only") is True:
        out["wait_only"] = True
        out["process"] = _short(msg.get("process", source), "process")
        out["waiting"] = _wait(msg.get("waiting", {}))
        return out
    for key in _REPORT_LISTS:
        values = msg.get(key, [])
        if not isinstance(values, (list, tuple)) or len(values) > 10_000:
            raise Invalid(f"{key} must be a list (at most 10,000 items)", "bad-field")
        out[key] = [as_float(v, key) for v in values]
    return out


def _short(value: Any, name: str) -> str:
    """A short string field (a process or peer name)."""
    if not isinstance(value, str) or len(value) > MAX_KEY_LEN:
        raise Invalid(f"a report's {name!r} is a short string", "bad-field")
    return value


def _wait(value: Any) -> dict:
    """A report's `waiting` (`surreal.runtime.wire.waits`): {} or {"for", "what", "s"}."""
    wait = as_dict(value, "waiting")
    if not wait:
        return {}
    return {
        "for": _short(wait.get("for"), "for"),
        "what": _short(wait.get("what"), "what"),
        "s": as_float(wait.get("s", 0.0), "s", 0.0, 1e9),
    }


class EsRequest:
    """A worker's request to the ES master (`surreal.algos.es.master`), cleaned.

    The request itself must name a worker and a generation; a result that does not fit (wrong
    generation type, non-finite returns, observation sums of the wrong shape) is left out, so the
    worker still gets its next task and the master re-issues the pair later.
    """

    def __init__(self, obs_dim: int, population: int, guard: Any = None) -> None:
        self.obs_dim, self.population, self.guard = obs_dim, population, guard

    def __call__(self, message: Any) -> dict:
        msg = as_dict(message, "an ES worker request")
        worker = msg.get("worker")
        if not isinstance(worker, str) or not worker or len(worker) > MAX_KEY_LEN:
            raise Invalid("an ES request needs 'worker', a short name", "bad-field")
        out = {
            "op": "task",
            "worker": worker,
            "generation": as_int(msg.get("generation", -1), "generation", -1, 2**62),
            "result": None,
        }
        if msg.get("result") is not None:
            try:
                out["result"] = self.result(msg["result"])
            except Invalid as exc:
                if self.guard is not None:
                    self.guard.reject(str(exc), f"result-{exc.kind}")
        return out

    def result(self, message: Any) -> dict:
        """One antithetic pair's result: returns, steps, observation statistics."""
        res = as_dict(message, "an ES result")
        out = {
            "generation": as_int(res.get("generation"), "generation", 0, 2**62),
            "task": as_int(res.get("task"), "task", 0, self.population),
            "r_pos": as_float(res.get("r_pos"), "r_pos"),
            "r_neg": as_float(res.get("r_neg"), "r_neg"),
            "steps": as_int(res.get("steps"), "steps", 0, 2**40),
            "obs_count": as_int(res.get("obs_count"), "obs_count", 0, 2**40),
        }
        for key in ("obs_sum", "obs_sumsq"):
            arr = as_array(res.get(key), key, "iuf")
            _shape(arr, key, (self.obs_dim,))
            out[key] = arr
        return {**res, **out}
