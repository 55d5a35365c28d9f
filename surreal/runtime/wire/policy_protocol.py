"""The `policy-K` port: what actors ask a policy worker and what it answers (checked both ways).

A request (one per actor call, lockstep over caraml req-rep)::

    {"client": "actor-3", "method": "act", "obs": float32 [n, *obs_shape],
     "kwargs": {"deterministic": False}, "reset": bool [n] (optional), "min_version": int}

`method` is one of the methods the policy declares in `Policy.remote_methods` (`act`, `value`,
DDPG's `unit_action`; `inference_methods`), any other is refused; `reset` marks the client's
environments whose episode ended since its last request (a recurrent policy forgets their state
first); `min_version` asks the worker to hold parameters at least that new before answering.

A reply: {"version": v, "result": <what the method returned>} or {"error": "..."}; `result` is
an array, None, or tuples/lists/dicts of them (split per client along axis 0 by the worker).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from surreal.api.core import Policy
from surreal.runtime.wire.guard import Invalid
from surreal.runtime.wire.schemas import as_dict

MAX_ENVS = 1 << 14
"""Observations in one request, at most."""
LOCAL_METHODS = frozenset({"reset", "load_params"})
"""Policy methods never served remotely (the worker calls them itself)."""
KWARGS = frozenset({"deterministic"})
"""Keyword arguments a request may pass to the method (booleans)."""


def declares(policy: Any, marker: str) -> bool:
    """Whether `policy`'s class, or a base below `Policy`, sets the class attribute `marker`."""
    mro = type(policy).__mro__
    below = mro[: mro.index(Policy)] if Policy in mro else mro
    return any(marker in vars(cls) for cls in below)


def remote_methods(policy: Any) -> frozenset[str]:
    """The methods `policy` declares in `Policy.remote_methods`; raises ValueError for a name
    that is not a public method of it, or one the worker calls itself (`LOCAL_METHODS`)."""
    names = frozenset(getattr(policy, "remote_methods", Policy.remote_methods))
    bad = sorted(
        n
        for n in names
        if n.startswith("_") or n in LOCAL_METHODS or not callable(getattr(policy, n, None))
    )
    if bad:
        raise ValueError(
            f"{type(policy).__name__}.remote_methods names {bad}: list public methods called as "
            f"method(obs, **kwargs), never {sorted(LOCAL_METHODS)}"
        )
    return names


def undeclared_methods(policy: Any) -> frozenset[str]:
    """Public methods whose first parameter is `obs` that `policy` serves without declaring them:
    the old rule, kept (deprecated) for a policy that does not set `remote_methods` itself."""
    if declares(policy, "remote_methods"):
        return frozenset()
    names = set()
    for name in dir(type(policy)):
        if name.startswith("_") or name in LOCAL_METHODS or name in Policy.remote_methods:
            continue
        attr = getattr(policy, name, None)
        if not callable(attr):
            continue
        try:
            params = list(inspect.signature(attr).parameters)
        except (TypeError, ValueError):
            continue
        if params and params[0] == "obs":
            names.add(name)
    return frozenset(names)


def inference_methods(policy: Any) -> frozenset[str]:
    """The methods a policy worker serves for `policy`: its `remote_methods`, plus (deprecated,
    `undeclared_methods`) the obs-first methods of a policy that declares none."""
    return remote_methods(policy) | undeclared_methods(policy)


def undeclared_hint(policy: Any) -> str | None:
    """The one-line deprecation warning for a policy served by the old name rule, or None."""
    extra = sorted(undeclared_methods(policy))
    if not extra:
        return None
    name = type(policy).__name__
    wanted = tuple(sorted(remote_methods(policy))) + tuple(extra)
    return (
        f"{name} serves {extra} remotely because their first parameter is `obs` (deprecated): "
        f"declare `remote_methods = {wanted}` on {name}"
    )


class PolicyRequest:
    """Validates a request on a policy worker's port against the env's observation spec.

    Returns the request as a dict with `client`, `method`, `obs`, `kwargs` (tuple of sorted
    items), `reset` (bool array or None), `min_version`; raises `Invalid` otherwise.
    """

    def __init__(self, obs_shape: tuple[int, ...], methods: frozenset[str]) -> None:
        self.obs_shape, self.methods = tuple(obs_shape), methods

    def __call__(self, message: Any) -> dict:
        req = as_dict(message, "a policy request")
        client = req.get("client")
        if not isinstance(client, str) or not 0 < len(client) <= 64:
            raise Invalid("'client' must be a name of 1-64 characters", "bad-field")
        method = req.get("method")
        if method not in self.methods:
            raise Invalid(
                f"'method' must be one of the policy's remote_methods {sorted(self.methods)}",
                "bad-method",
            )
        obs = req.get("obs")
        if not isinstance(obs, np.ndarray) or obs.dtype != np.float32:
            raise Invalid("'obs' must be a float32 array", "bad-obs")
        if obs.ndim != 1 + len(self.obs_shape) or obs.shape[1:] != self.obs_shape:
            raise Invalid(
                f"'obs' must have shape [n, {self.obs_shape}], got {obs.shape}", "bad-obs"
            )
        if not 1 <= len(obs) <= MAX_ENVS:
            raise Invalid(f"'obs' must hold 1-{MAX_ENVS} observations", "bad-obs")
        kwargs = req.get("kwargs", {})
        if not isinstance(kwargs, dict) or not all(
            k in KWARGS and isinstance(v, bool) for k, v in kwargs.items()
        ):
            raise Invalid(f"'kwargs' may only hold booleans {sorted(KWARGS)}", "bad-field")
        reset = req.get("reset")
        if reset is not None and (
            not isinstance(reset, np.ndarray)
            or reset.dtype != np.bool_
            or reset.shape != (len(obs),)
        ):
            raise Invalid("'reset' must be a bool array [n] or absent", "bad-field")
        min_version = req.get("min_version", 0)
        if not isinstance(min_version, int) or isinstance(min_version, bool) or min_version < 0:
            raise Invalid("'min_version' must be an int >= 0", "bad-field")
        return {
            "client": client,
            "method": method,
            "obs": obs,
            "kwargs": tuple(sorted(kwargs.items())),
            "reset": reset,
            "min_version": min_version,
        }


def split_result(result: Any, sizes: list[int]) -> list[Any]:
    """Cut a method's result over a batch into one result per client (`sizes` rows each)."""
    if result is None:
        return [None] * len(sizes)
    if isinstance(result, dict):
        parts = {k: split_result(v, sizes) for k, v in result.items()}
        return [{k: parts[k][i] for k in result} for i in range(len(sizes))]
    if isinstance(result, (tuple, list)):
        parts = [split_result(v, sizes) for v in result]
        return [type(result)(p[i] for p in parts) for i in range(len(sizes))]
    array = np.asarray(result)
    if array.ndim == 0 or len(array) != sum(sizes):
        raise ValueError(f"a result of shape {array.shape} does not split into rows {sizes}")
    return np.split(array, np.cumsum(sizes)[:-1])


def check_reply(reply: Any) -> tuple[int, Any]:
    """(version, result) of a worker's reply; raises `Invalid` for an error or a foreign reply."""
    rep = as_dict(reply, "a policy reply")
    if "error" in rep:
        raise Invalid(str(rep["error"])[:200], "refused")
    version = rep.get("version")
    if not isinstance(version, int) or "result" not in rep:
        raise Invalid("a policy reply needs 'version' and 'result'", "bad-reply")
    return version, rep["result"]
