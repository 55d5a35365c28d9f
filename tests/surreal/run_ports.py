"""Where a launched run's services listen, from symphony's record of the experiment."""

from __future__ import annotations

import json
from pathlib import Path


def endpoints(home: Path, experiment: str) -> dict[str, tuple[str, int]]:
    """{service: (host, port)} the local supervisor allocated (empty until it wrote its state)."""
    try:
        state = json.loads((home / "experiments" / experiment / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {name: (host, int(port)) for name, (host, port) in state.get("endpoints", {}).items()}


def restarts_in_logs(run: Path) -> list[str]:
    """The supervisor's restart lines in a finished run's logs (`RUN_DIR/logs/*.log`)."""
    lines = []
    for log in sorted((run / "logs").glob("*.log")):
        lines += [
            f"{log.name}: {line}"
            for line in log.read_text().splitlines()
            if line.startswith("[symphony]") and "; restarting in" in line
        ]
    return lines
