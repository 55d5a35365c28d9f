"""The process named `learner` of a multi-agent run: it learns nothing itself, it watches every
policy's learner (through `RUN/policies/<P>/status.json`), reports their progress to the run's
metrics sink and exits once each has used its step budget; `surreal launch` ends the run then."""

from __future__ import annotations

from typing import Any

from surreal.multiagent.policy_runs import policy_run, read_policy_specs
from surreal.runtime.processes.common import Component
from surreal.runtime.runfolder.rundir import RunDir, read_json


def progress(run: RunDir, budget: int) -> tuple[int, dict[str, float], bool]:
    """(the slowest policy's step, per-policy scalars, whether every policy's learner reached
    `budget`) from the policies' `status.json`."""
    steps, scalars, finished = [], {}, True
    for spec in read_policy_specs(run):
        status: dict[str, Any] = read_json(policy_run(run, spec.name).status_file, {}) or {}
        step = int(status.get("global_step", 0))
        steps.append(step)
        scalars[f"policies/{spec.name}/global_step"] = float(step)
        for key in ("charts/sps", "losses/policy_loss", "losses/value_loss", "episodic_return"):
            if isinstance(status.get(key), (int, float)):
                scalars[f"policies/{spec.name}/{key.split('/')[-1]}"] = float(status[key])
        finished = finished and step >= budget  # not its `finished`: stale on --resume
    return (min(steps) if steps else 0), scalars, finished


def main(run_dir: str, index: int = 0) -> None:
    """Report the policies' progress every second until all are done or stopped."""
    comp = Component(run_dir, "learner", index)
    try:
        while True:
            step, scalars, finished = progress(comp.run, comp.config.run.steps)
            comp.report(step, scalars, finished=finished)
            if finished or comp.stopping.wait(1.0):
                break
        comp.report(step, {}, finished=finished, exiting=True)
    finally:
        comp.close()
