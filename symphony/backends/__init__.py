"""The backend registry: name -> class, imported lazily so heavy clients load only when used.

    local   -> symphony.backends.local:LocalBackend          (subprocesses under a supervisor)
    tmux    -> symphony.backends.tmux:TmuxBackend            (a tmux session, a window per process)
    test    -> symphony.backends.inprocess:InProcessBackend  (threads, for fast topology tests)
    compose -> symphony.backends.compose:ComposeBackend      (docker compose)
    kube    -> symphony.kube.backend:KubeBackend            (Kubernetes)
    slurm   -> symphony.backends.slurm:SlurmBackend          (a Slurm job per experiment)

Every class subclasses `symphony.backends.base.Backend`; see that module for the interface.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from symphony.errors import BackendError

if TYPE_CHECKING:
    from symphony.backends.base import Backend, Capabilities
    from symphony.records import Records

BACKENDS: dict[str, str] = {
    "local": "symphony.backends.local:LocalBackend",
    "tmux": "symphony.backends.tmux:TmuxBackend",
    "test": "symphony.backends.inprocess:InProcessBackend",
    "compose": "symphony.backends.compose:ComposeBackend",
    "kube": "symphony.kube.backend:KubeBackend",
    "slurm": "symphony.backends.slurm:SlurmBackend",
}


INTERNAL = ("test",)
"""Backends for symphony's own tests (threads in the calling process), not offered to users."""


def backend_names(internal: bool = True) -> list[str]:
    """Every registered backend name (`internal=False`: those offered to users)."""
    return [name for name in BACKENDS if internal or name not in INTERNAL]


def backend_class(name: str) -> type[Backend]:
    """The class registered as `name` (BackendError listing the names if unknown)."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    module_name, _, class_name = BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise BackendError(
            f"backend {name!r} cannot be loaded ({err}); install its extra, e.g. "
            f"`pip install 'surreal-stack[{_EXTRAS.get(name, 'all')}]'`"
        ) from err
    return getattr(module, class_name)


def capabilities(name: str) -> Capabilities:
    """What backend `name`'s processes share with this machine and how it is driven
    (`symphony.backends.base.Capabilities`, declared by its class; BackendError as
    `backend_class`)."""
    return backend_class(name).capabilities


def get_backend(name: str, records: Records | None = None, **options: Any) -> Backend:
    """An instance of backend `name` using `records` (default: the state directory's)."""
    return backend_class(name)(records=records, **options)


_EXTRAS = {"tmux": "tmux", "compose": "docker", "kube": "kube"}
