"""The metrics sink hears only the run's own processes: a per-run token on local runs.

Where the run's traffic is not Curve-authenticated (`surreal.runtime.wire.curve`: off by default on
the local and tmux backends, whose ports listen on 127.0.0.1), any process of the machine could
send reports to the metrics port. There `surreal launch` writes a fresh random token into
`RUN/keys/metrics.token` (folder mode 700, file mode 600) at every launch and sets
`SURREAL_METRICS_TOKEN` on each process to the file's path (never the token itself: the
experiment's YAML and symphony's record hold only the path). Each report carries the token
(`surreal.runtime.processes.common.Component.report`), and the sink drops and counts one without it
(`surreal.runtime.wire.schemas.report`, kind `no-token`). A run with Curve needs none: a peer
without the run's keys cannot connect.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from surreal.runtime.wire import curve
from symphony.backends import capabilities

ENV = "SURREAL_METRICS_TOKEN"
"""The path of the token file, on every process of a run that has one."""
FILE = "metrics.token"


def enabled(plan: Any) -> bool:
    """Whether the run's reports carry a token: every process on this machine (symphony's
    `Capabilities.single_machine`: they read the token file here), and without Curve."""
    return capabilities(plan.backend).single_machine and not curve.enabled(plan)


def token_file(plan: Any) -> Path:
    """`RUN/keys/metrics.token`."""
    return plan.run_dir.path.resolve() / "keys" / FILE


def prepare(plan: Any) -> None:
    """Write a fresh token (mode 600, in a folder of mode 700) when the run uses one."""
    if not enabled(plan):
        return
    path = token_file(plan)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(16) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def apply(experiment: Any, plan: Any) -> Any:
    """Set `SURREAL_METRICS_TOKEN` (the token file's path) on every process of the run."""
    if enabled(plan):
        for proc in experiment.processes():
            proc.env[ENV] = str(token_file(plan))
    return experiment


def read() -> str | None:
    """This process's run token (None: its run uses none).

    Raises:
        OSError: the token file named by `SURREAL_METRICS_TOKEN` cannot be read.
    """
    path = os.environ.get(ENV)
    if not path:
        return None
    try:
        return Path(path).read_text().strip()
    except OSError as err:
        raise OSError(
            f"cannot read the run's metrics token {path} ({err.strerror or err}); "
            "`surreal launch --resume` writes a new one"
        ) from err
