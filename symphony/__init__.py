"""symphony: declare distributed experiments once, launch them locally, in tmux, docker or Kubernetes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from symphony.addresses import Address, address
from symphony.errors import (
    AddressError,
    BackendError,
    ExperimentNotFound,
    SpecError,
    SymphonyError,
)
from symphony.spec import Experiment, Process, ProcessGroup, Resources, RestartPolicy

if TYPE_CHECKING:
    from symphony.launcher import ExperimentHandle

__version__ = "0.1.0"

__all__ = [
    "Address",
    "AddressError",
    "BackendError",
    "Experiment",
    "ExperimentNotFound",
    "Process",
    "ProcessGroup",
    "Resources",
    "RestartPolicy",
    "SpecError",
    "SymphonyError",
    "address",
    "launch",
]


def launch(experiment: Experiment, backend: str = "local", **options: Any) -> ExperimentHandle:
    """Validate, record and start `experiment`; see `symphony.launcher.launch` for options."""
    from symphony.launcher import launch as _launch

    return _launch(experiment, backend, **options)
