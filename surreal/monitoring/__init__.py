"""Monitoring a run: Prometheus `/metrics` per process (`prometheus`), Weights & Biases from the
metrics process (`wandb_sink`), and crashes and restarts (`crash`). See docs/monitoring.md."""

from __future__ import annotations

from typing import Any

from surreal.api.config import ConfigError
from surreal.monitoring.crash import clear_starts
from surreal.monitoring.wandb_sink import check as check_wandb


def check(config: Any) -> None:
    """Usage errors of the monitoring settings (`run.wandb`, `run.max_restarts`), before anything
    starts; raises ConfigError."""
    check_wandb(config.run.wandb)
    if config.run.max_restarts < 0:
        raise ConfigError(f"run.max_restarts must be >= 0, got {config.run.max_restarts}")


def prepare(run_path: Any) -> None:
    """At launch: forget the start counts and `/metrics` targets of an earlier launch."""
    clear_starts(run_path)
