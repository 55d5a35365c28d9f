"""The one entry point of every process of a run: `python -m surreal component ROLE RUN_DIR`."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

from surreal.monitoring import logs
from surreal.monitoring.crash import process_name, record
from surreal.runtime.plan.compose_env import materialize_keys
from surreal.runtime.plan.portable import materialize
from surreal.runtime.processes.common import STOP_REQUESTED
from surreal.runtime.runfolder.rundir import RunDir, stop_reason
from surreal.runtime.runfolder.storage_sync import attached


def run_component(role: str, run_dir: str, index: int = 0) -> None:
    """Run one process of a run until it finishes or is told to stop.

    ROLE is looked up in the run's `Learner.components()` (the runtime's roles, listed in
    `surreal.runtime`'s docstring, plus those of an algorithm with its own topology), so this is
    the one entry point of every process.
    It sets up the process's log (`surreal.monitoring.logs`): a `start:` line first, a `stop:`
    line last (finished; stopped, saying why when the launcher said (`rundir.stop_reason`: "the
    run finished (budget used)"), else "stopped by a signal"; crashed). An exception that ends it (not a stop
    signal) is recorded in `RUN/crashes.jsonl` (`surreal.monitoring.crash`) and raised again
    (exit code 1, traceback in the log). RUN_DIR may be an `s3://` URL
    (`surreal.runtime.runfolder.storage_sync.attached`).
    """
    log = logs.setup(process_name(role, index))
    log.info("%s", logs.start_line(role, index, run_dir))
    started, ended, began, folder = time.monotonic(), None, time.time(), None
    try:
        materialize(run_dir)  # compose, kube: the run's config files travel in the environment
        materialize_keys()  # compose: the run's Curve keys travel in the environment
        with attached(run_dir) as local:  # an s3:// run: a local mirror, uploaded as written
            folder = RunDir(Path(local))
            roles = folder.components()
            if role not in roles:
                raise ValueError(
                    f"unknown component {role!r}; this run's roles: {', '.join(sorted(roles))}"
                )
            module_name, function = roles[role].split(":")
            try:
                getattr(importlib.import_module(module_name), function)(local, index)
            except Exception as error:  # a crash (not a stop): RUN/crashes.jsonl, exit non-zero
                if not STOP_REQUESTED.is_set():
                    record(Path(local), role, index, error)
                raise
    except BaseException as error:
        ended = error
        raise
    finally:
        stopped = STOP_REQUESTED.is_set()
        why = stop_reason(folder, began) if stopped and folder is not None else None
        level, how = logs.ending(ended, stopped, why)
        log.log(level, "stop: %s after %.1f s", how, time.monotonic() - started)
