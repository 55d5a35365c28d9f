"""`run.stop_at_return` with no launcher watching: the evaluator tells the learner, which ends.

`surreal launch` stops a run once its best evaluation reached `run.stop_at_return`
(`surreal.launch.progress`). A run nobody watches (kube, always; slurm or local once the launcher
died) had only its step budget. With a goal set, `wire` makes the learner bind `learner-goal` (a
Puller) and each evaluator connect to it. An evaluation whose mean return reaches the goal is
pushed there (`GoalSender`); the learner reads it between updates (`GoalInbox`) and ends as at
its budget: a checkpoint, a report that says why (`finished`, `why`), exit 0. Its end is the
experiment's (`Experiment.ends_with`), so each backend's own ending follows: kube's cleanup,
slurm's end marker, the local supervisor's stop.

Wired only for one learner (`run.learner_replicas` 1: one rank alone cannot leave
torch.distributed's group) and a run with an evaluator. A message without the run's token (local
runs without Curve: `surreal.runtime.wire.report_token`), or that does not fit, is counted and
dropped; only a return at or above the learner's own goal ends it.
"""

from __future__ import annotations

import math
from typing import Any

import caraml
from surreal.runtime.wire.guard import Invalid, PortGuard
from surreal.runtime.wire.ports import NOTHING, receive
from surreal.runtime.wire.schemas import as_dict, as_float, as_int, check_token

SERVICE = "learner-goal"
MAX_BYTES = 4096
"""A goal message is a few numbers and the token."""


def applies(config: Any) -> bool:
    """Whether the run's learner ends by itself at `run.stop_at_return`: a goal, one learner
    (`run.learner_replicas` 1) and evaluations (`eval.every_s` > 0)."""
    run = config.run
    return run.stop_at_return is not None and run.learner_replicas == 1 and config.eval.every_s > 0


def wire(exp: Any, config: Any) -> Any:
    """Declare `learner-goal` on experiment `exp` (bound by `learner`, connected by each
    `evaluator`) when the goal `applies` and both are there; returns `exp`."""
    evaluators = [p for p in exp.processes() if p.name == "evaluator"]
    if not applies(config) or "learner" not in exp.process_names() or not evaluators:
        return exp
    exp.process("learner").binds(SERVICE)
    for proc in evaluators:
        proc.connects(SERVICE)
    return exp


def goal_message(message: Any, token: str | None) -> dict:
    """A message on `learner-goal`, checked: `eval_return` (a finite number) and `step`."""
    msg = as_dict(message, "a goal message")
    check_token(msg, token, "a goal message")
    value = as_float(msg.get("eval_return"), "eval_return")
    if not math.isfinite(value):
        raise Invalid("eval_return must be a finite number", "bad-field")
    return {"eval_return": value, "step": as_int(msg.get("step", 0), "step", 0, 2**62)}


class GoalInbox:
    """The learner's end: `reached()` once an evaluator said an evaluation reached the goal.

    Binds nothing when the process does not declare `learner-goal` (no goal, or not wired).
    """

    def __init__(self, comp: Any) -> None:
        self.comp = comp
        self.goal = comp.config.run.stop_at_return
        self.guard = PortGuard(SERVICE)
        self.puller = None
        if comp.declares(SERVICE):
            bind = comp.address(SERVICE).bind_tcp
            self.puller = caraml.Puller(bind, max_size=MAX_BYTES)
            comp.log.info("binds %s %s (run.stop_at_return %s)", SERVICE, bind, self.goal)
        self.hit: dict | None = None
        """The evaluation that reached the goal (`eval_return`, `step`), once one did."""

    def reached(self) -> bool:
        """Whether an evaluation reached the goal (reads what arrived, never waits)."""
        while self.puller is not None and self.hit is None:
            message = receive(lambda: self.puller.pull(timeout=0), self.guard)
            if message is NOTHING:
                return False
            checked = self.guard.check(lambda m: goal_message(m, self.comp.token), message)
            if checked is not None and checked["eval_return"] >= self.goal:
                self.hit = checked
                self.comp.log.info("stopping: %s", self.why())
        return self.hit is not None

    def why(self) -> str:
        """The end's reason as `surreal launch` says it (`surreal.launch.stopping.ending_why`)."""
        if self.hit is None:
            return "budget used"
        return f"eval {self.hit['eval_return']:.1f} >= run.stop_at_return {self.goal}"

    def close(self) -> None:
        if self.puller is not None:
            self.puller.close()


class GoalSender:
    """The evaluator's end: `tell(mean, step)` pushes an evaluation that reached the goal."""

    def __init__(self, comp: Any) -> None:
        self.comp = comp
        self.goal = comp.config.run.stop_at_return
        self.pusher = None
        if comp.declares(SERVICE):
            self.pusher = caraml.Pusher(comp.address(SERVICE).tcp, hwm=16)

    def tell(self, mean: float, step: int) -> None:
        """Push (mean, step) to the learner when it reached the goal; never blocks past 1 s
        (a learner restarting gets the next evaluation's word)."""
        if self.pusher is None or mean < self.goal:
            return
        message = {"eval_return": float(mean), "step": int(step)}
        if self.comp.token is not None:
            message["token"] = self.comp.token
        try:
            self.pusher.push(message, timeout=1.0)
        except caraml.RequestTimeout:
            self.comp.log.info("the learner did not take the goal's word within 1 s")

    def close(self) -> None:
        if self.pusher is not None:
            self.pusher.close()
