"""Ending a launched run: stop every process, keep its logs, record how it ended.

`surreal launch` (one run, `surreal.cli`) and `surreal launch --population` (`surreal.pbt.run`)
both end a run here, and both stop on SIGTERM as on Ctrl-C (`raise_interrupt`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from surreal.launch.cluster_launch import save_container_logs
from surreal.runtime.runfolder.rundir import RunDir, finish_why, read_json, write_ending

OUTCOMES = {0: "finished", 130: "stopped"}
"""`surreal launch`'s exit code -> how symphony's record says the run ended (else "failed")."""


def stop_and_keep_logs(handle: Any, logs: Path, code: int | None = None) -> None:
    """Stop every process and keep their logs in RUN_DIR/logs/ (`keep_log`). Symphony keeps
    its record (with the logs) and how the run ended, from the exit `code` (None: as the
    processes ended): `symphony list --all`, `symphony describe/logs EXPERIMENT` show the past
    run."""
    outcome = None if code is None else OUTCOMES.get(code, "failed")
    if outcome is not None:  # first: the processes' stop lines say it (`rundir.stop_reason`)
        run = RunDir(logs.parent)
        write_ending(run, outcome, ending_why(run, code))
    handle.stop(outcome=outcome)
    keep_summary(handle, RunDir(logs.parent))
    save_container_logs(handle, logs)  # compose: what the record kept of each container's output
    try:
        logs.mkdir(exist_ok=True)
        for process, source in (handle.record.logs or {}).items():
            try:
                text = Path(source).read_bytes()
            except FileNotFoundError:
                continue
            keep_log(text, logs / f"{process}.log")
    except OSError as err:  # a full disk: the run's folder cannot take them
        print(
            f"could not copy the processes' logs into {logs} ({err.strerror or err}); they "
            f"stay in symphony's record: symphony logs {handle.record.name} PROCESS",
            file=sys.stdout,
            flush=True,
        )


def keep_summary(handle: Any, run: RunDir) -> None:
    """What `symphony list --all` shows of the run's result (symphony's record `summary`): its
    last evaluation return and its learner's step, e.g. `eval 475.0 step 3,000`."""
    status = read_json(run.status_file, {}) or {}
    shown = {}
    if isinstance(status.get("charts/eval_return"), int | float):
        shown["eval"] = f"{status['charts/eval_return']:.1f}"
    if isinstance(status.get("global_step"), int | float):
        shown["step"] = f"{int(status['global_step']):,}"
    if shown and hasattr(handle, "set_summary"):
        try:
            handle.set_summary(shown)
        except OSError:  # a full disk: the record keeps no summary
            pass


def ending_why(run: RunDir, code: int) -> str:
    """Why `surreal launch` ends the run with exit `code`: its learner used the budget or the
    run reached `run.stop_at_return` (0), it was interrupted (130), or it failed."""
    if code == 130:
        return "surreal launch was interrupted"
    if code != 0:
        return "surreal launch stopped it: see its output"
    status = read_json(run.status_file, {}) or {}
    try:
        goal = run.load_config().run.stop_at_return
    except Exception:  # a config being rewritten: then it was the budget (the other way to 0)
        goal = None
    best = status.get("best_eval_return")
    reached = goal is not None and isinstance(best, int | float) and best >= goal
    if status.get("finished") or not reached:  # the learner exited 0: its budget, or its goal
        return finish_why(status)
    return f"eval {best:.1f} >= run.stop_at_return {goal}"


def keep_log(text: bytes, kept: Path) -> None:
    """Keep a process's log `text` (symphony's record of it) in `kept` (RUN_DIR/logs/P.log),
    which only ever grows: symphony's record of a relaunched run holds the earlier launches'
    lines too (`symphony.records.Records.retire`), so a `kept` that is the start of `text` is
    made the whole of it; any other `kept` (the record was deleted in between) gets `text`
    appended."""
    try:
        before = kept.read_bytes()
    except FileNotFoundError:
        before = b""
    with kept.open("ab") as out:
        out.write(text[len(before) :] if text.startswith(before) else text)


def raise_interrupt(*_: object) -> None:
    """A signal handler that stops the launching process as Ctrl-C does:
    `signal.signal(signal.SIGTERM, raise_interrupt)` (so `kill` and `timeout` stop a run)."""
    raise KeyboardInterrupt
