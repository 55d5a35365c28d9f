"""Launching a population and watching it until it ends (what `surreal launch --population` does)."""

from __future__ import annotations

import signal
import sys
import time
from typing import Any, TextIO

import surreal.pbt.store as store
import symphony
from surreal.launch.stopping import raise_interrupt, stop_and_keep_logs
from surreal.pbt.config import make_config
from surreal.pbt.plan import (
    MANAGER,
    PopulationPlan,
    build_experiment,
    create_population,
    plan_population,
    resume_config,
)
from surreal.pbt.status import population_status
from surreal.runtime.runfolder.rundir import read_json
from surreal.runtime.wire import curve

ENDED = ("exited", "failed", "stopped")


def run_population(
    pp: PopulationPlan, backend: str = "local", out: TextIO = sys.stdout, every_s: float = 5.0
) -> int:
    """Write the run folders, launch, show progress, stop every process; returns the exit code
    (0: every member's budget used or `run.stop_at_return` reached by one; 1: failed).

    Raises:
        symphony.SymphonyError: the backend refused to start it (nothing left running).
    """
    create_population(pp)
    base = pp.base
    cfg = base.config
    print(
        f"run folder: {base.run_dir.path}  (population of {pp.pbt.members}, experiment "
        f"{base.experiment_name}, {cfg.run.actors} actors x {cfg.env.num_envs} envs per member, "
        f"backend {backend})",
        file=out,
        flush=True,
    )
    handle = symphony.launch(build_experiment(pp), backend, **curve.launch_options(base))
    signal.signal(signal.SIGTERM, raise_interrupt)  # `kill` and `timeout` stop it like Ctrl-C
    code = 130
    try:
        code, _ = watch(handle, pp, out, every_s)
    except KeyboardInterrupt:
        print("interrupted: stopping every process (the learners write checkpoints)", file=out)
    finally:
        print("stopping the processes...", file=out, flush=True)
        stop_and_keep_logs(handle, base.run_dir.path / "logs")
        store.keep_best(base.run_dir.path, store.member_names(pp.pbt.members))
        print(population_status(base.run_dir.path, {}), file=out)
        print(f"done: {base.run_dir.path} (surreal eval {base.run_dir.path})", file=out)
    return code


def watch(
    handle: Any, pp: PopulationPlan, out: TextIO, every_s: float = 5.0
) -> tuple[int, dict[str, str]]:
    """Print one line on the members when it changed (at most every `every_s` s, at least every
    60 s) until the population ends; returns (exit code, member -> learner state)."""
    names = store.member_names(pp.pbt.members)
    target = pp.base.config.run.stop_at_return
    started, last_line, since = time.monotonic(), (0.0, ""), time.time()
    while True:
        processes = {p.name: p for p in handle.status().processes}
        states = {n: getattr(processes.get(f"{n}-learner"), "state", "unknown") for n in names}
        status = {n: _status(pp.base.run_dir.path / n, since) for n in names}
        best = max(
            (
                (s.get("best_eval_return"), n)
                for n, s in status.items()
                if s.get("best_eval_return") is not None
            ),
            default=(None, None),
        )
        now = time.monotonic()
        line = _line(names, status, states, best)
        if (line != last_line[1] and now - last_line[0] >= every_s) or now - last_line[0] >= 60:
            last_line = (now, line)
            print(f"[{now - started:6.1f}s] {line}", file=out, flush=True)
        if target is not None and best[0] is not None and best[0] >= target:
            print(f"goal reached: {best[1]} evaluated {best[0]:.1f} >= {target}", file=out)
            return 0, states
        if all(s in ENDED for s in states.values()):
            return (0 if all(s == "exited" for s in states.values()) else 1), states
        manager = processes.get(MANAGER)
        if manager is not None and manager.state == "failed":
            print("the population manager failed past its restart limit", file=out)
            return 1, states
        time.sleep(0.5)  # polling the members' status files; the population decides when it ends


def _status(member: Any, since: float) -> dict:
    """A member's `status.json` once its metrics sink wrote it in this launch (a resumed
    member's old file still holds the previous launch's best return), else {}."""
    status = read_json(member / "status.json", {}) or {}
    return status if status.get("started", 0) >= since - 5 else {}


def _line(names: list[str], status: dict, states: dict, best: tuple) -> str:
    def member(n: str) -> str:
        s = status[n]
        ev = s.get("charts/eval_return")
        state = "" if states[n] == "running" else f" {states[n]}"
        return f"{n} {s.get('global_step', 0):,} eval {'-' if ev is None else f'{ev:.0f}'}{state}"

    head = " | ".join(member(n) for n in names)
    return head + ("" if best[0] is None else f" | best {best[1]} {best[0]:.1f}")


def prepare_population(
    plan: Any,
    members: int | None,
    pbt_overrides: tuple[str, ...] = (),
    steps: int | None = None,
    overrides: tuple[str, ...] = (),
) -> PopulationPlan:
    """`surreal launch --population N` (or `--resume` of a population): the PopulationPlan of a
    `surreal.launch.experiment.plan` result; `steps`/`overrides` reach a resumed population's members.

    Raises:
        ConfigError: a bad `pbt.*` setting or a population the algorithm cannot run.
    """
    if plan.resume:
        pbt = resume_config(plan.run_dir.path, members, pbt_overrides)
        return plan_population(plan, pbt, steps, overrides)
    return plan_population(plan, make_config(members or 0, pbt_overrides))
