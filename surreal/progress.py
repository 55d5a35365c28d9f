"""Watching a launched run: live progress lines on the terminal, and when to stop."""

from __future__ import annotations

import time
from typing import Any, TextIO

from surreal.rundir import RunDir, read_json

ENDED = ("exited", "failed", "stopped")
UNKNOWN_GRACE_S = 15.0  # a backend may briefly not know a process's state (tmux under load)


def buffer_size(status: dict[str, Any]) -> float | None:
    """What the buffers hold: the sum of the replay shards' sizes (`buffer/shard<k>_size`, in
    transitions) when they report them, else `buffer/fill` (the FIFO buffer's count of segments)."""
    shards = [v for k, v in status.items() if k.startswith("buffer/shard") and k.endswith("_size")]
    return sum(shards) if shards else status.get("buffer/fill")


def format_status(status: dict[str, Any], elapsed: float, total: int = 0) -> str:
    """One progress line from `status.json` (`total`: the step budget, until the sink says)."""

    def num(key: str, fmt: str = "{:.1f}") -> str:
        return show(status.get(key), fmt)

    def show(value: float | None, fmt: str) -> str:
        return "-" if value is None else fmt.format(value)

    return (
        f"[{elapsed:6.1f}s] step {status.get('global_step', 0):>9,}/{status.get('total_steps') or total:,}"
        f" | {num('charts/sps', '{:,.0f}')} steps/s"
        f" | return {num('episodic_return')} | eval {num('charts/eval_return')}"
        f" | learner {num('charts/learner_its', '{:.2f}')} it/s"
        f" | lag {num('charts/policy_lag', '{:.2f}')}"
        f" | buffer {show(buffer_size(status), '{:,.0f}')}"
    )


def monitor(
    handle: Any,
    run_dir: RunDir,
    stop_at_return: float | None = None,
    every_s: float = 2.0,
    out: TextIO | None = None,
    total: int = 0,
) -> int:
    """Print progress until the learner ends (or the eval target is reached); returns the exit code.

    The caller stops the experiment afterwards (also on Ctrl-C).
    """
    started, last_print, unknown_since = time.monotonic(), 0.0, None
    while True:
        processes = handle.status().processes
        learner = next((p for p in processes if p.name == "learner"), None)
        failed = [p.name for p in processes if p.state == "failed" and p.name != "learner"]
        status = read_json(run_dir.status_file, {}) or {}
        now = time.monotonic()
        if out is not None and now - last_print >= every_s:
            if status.get("global_step"):
                line = format_status(status, now - started, total)
            else:
                running = sum(p.state == "running" for p in processes)
                line = (
                    f"[{now - started:6.1f}s] starting: {running}/{len(processes)} processes "
                    "running, waiting for the first batch"
                )
            print(line, file=out, flush=True)
            last_print = now
        if learner is not None and learner.state == "exited":
            return 0
        if learner is None or learner.state == "unknown":
            unknown_since = unknown_since or now
        else:
            unknown_since = None
        lost = unknown_since is not None and now - unknown_since > UNKNOWN_GRACE_S
        if lost or (learner is not None and learner.state in ENDED):
            code = learner.exit_code if learner else None
            if out is not None:
                print(
                    f"the learner ended ({learner.state if learner else 'missing'}, exit code "
                    f"{code}); see {run_dir.path}/logs/learner.log. Continue the run "
                    f"with: surreal launch --resume {run_dir.path}",
                    file=out,
                    flush=True,
                )
            return 1
        if failed and _reached_budget(status, total):
            failed = []  # the learner is finishing its last steps: a helper's end is no failure
        if failed:
            if out is not None:
                print(
                    f"process(es) {', '.join(failed)} failed past their restart limit; see "
                    f"{run_dir.path}/logs/ after the stop. Fix the cause, then continue with: "
                    f"surreal launch --resume {run_dir.path}",
                    file=out,
                    flush=True,
                )
            return 1
        if (
            stop_at_return is not None
            and status.get("best_eval_return", float("-inf")) >= stop_at_return
        ):
            if out is not None:
                print(
                    f"eval return {status['best_eval_return']:.1f} >= {stop_at_return}: stopping",
                    file=out,
                    flush=True,
                )
            return 0
        time.sleep(0.25)  # polling the status with no deadline: the run decides when it ends


def _reached_budget(status: dict[str, Any], total: int) -> bool:
    """Whether the learner reported the end of its step budget (it exits 0 right after)."""
    budget = status.get("total_steps") or total
    return bool(status.get("finished")) or (budget > 0 and status.get("global_step", 0) >= budget)
