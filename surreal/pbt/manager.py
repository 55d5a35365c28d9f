"""The population manager process: each member is checked every `pbt.interval` of its steps.

It talks to the members only through the run folder (which every backend shares with its
processes): it reads each member's `status.json` (latest evaluation return, step), leaves
directives in the recipients' folders (`surreal.pbt.store.issue`) and logs every decision to
`RUN/pbt.jsonl` and TensorBoard (`RUN/tb/`, `pbt/*`). A member that does not answer (no status
change for `pbt.member_timeout_s`: crashed, restarting) is left out of the round; the manager
keeps going. Its own state (round, next directive id, the random generator) lives in
`RUN/pbt_state.json`, so a restarted manager or `--resume` continues the same sequence.

    python -m surreal.pbt.manager RUN_DIR
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import surreal.pbt.store as store
from surreal.pbt.config import PBTConfig, from_dict
from surreal.pbt.exploit import Decision, MemberScore, exploit_explore
from surreal.pbt.store import MemberView
from surreal.runtime.runfolder.rundir import read_json, write_json


class Manager:
    """Holds a round whenever a member is due for its check; `poll` runs about once a second.

    A round ranks every member with a fresh evaluation; each due member in the bottom
    `pbt.fraction` copies one of the top `pbt.fraction` (`exploit_explore`). Members are checked
    on their own schedule (asynchronous PBT, as in the paper), so a slow or late-starting member
    neither holds the others back nor escapes its checks.

    Args:
        run_path: the population's run folder.
        pbt: its settings.
        writer: a tensorboardX SummaryWriter (None: no TensorBoard).
        clock: wall-clock seconds (tests pass a fake).
    """

    def __init__(
        self,
        run_path: Path,
        pbt: PBTConfig,
        writer: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path, self.pbt, self.writer, self.clock = Path(run_path), pbt, writer, clock
        self.space = pbt.hyperparameters()
        self.keys = [hp.key for hp in self.space]
        self.names = store.member_names(pbt.members)
        self.state = read_json(self.path / store.STATE_FILE, {}) or {"round": 0, "next_id": 1}
        self.rng = np.random.default_rng(pbt.seed)
        if self.state.get("rng"):
            self.rng.bit_generator.state = self.state["rng"]

    def views(self) -> list[MemberView]:
        """Every member as its folder shows it now."""
        return [store.read_member(self.path, name, self.keys) for name in self.names]

    def answering(self, views: list[MemberView]) -> list[MemberView]:
        """Members whose status changed within `pbt.member_timeout_s` (or that finished)."""
        now = self.clock()
        return [v for v in views if v.finished or now - v.updated < self.pbt.member_timeout_s]

    def ready(self, views: list[MemberView]) -> tuple[list[MemberView], list[MemberView]]:
        """(members that can be ranked, those of them due for a check). Ranked: answering, with
        an evaluation of their current weights (after the last copy they took) and no copy
        pending. Due: ranked, not finished, and `pbt.interval` steps past their last check."""
        due_at = self.state.setdefault("due_at", {})
        ranked = [
            v
            for v in self.answering(views)
            if v.eval_return is not None and v.eval_step > v.applied_step and not v.pending
        ]
        due = [
            v for v in ranked if not v.finished and v.step >= due_at.get(v.name, self.pbt.interval)
        ]
        return ranked, due

    def poll(self) -> list[Decision] | None:
        """Keep the best checkpoint; hold a round when a member is due. Returns its decisions."""
        store.keep_best(self.path, self.names)
        views = self.views()
        ranked, due = self.ready(views)
        return self.hold(views, ranked, due) if due else None

    def hold(
        self, views: list[MemberView], ranked: list[MemberView], due: list[MemberView]
    ) -> list[Decision]:
        """Rank, decide for the due members, issue, log; their next check is an interval on."""
        round_ = self.state["round"] + 1
        scores = [MemberScore(v.name, float(v.eval_return), v.hyperparameters) for v in ranked]
        decisions = exploit_explore(
            scores,
            self.space,
            self.pbt.fraction,
            self.rng,
            self.pbt.factors,
            self.pbt.resample_probability,
            ready={v.name for v in due},
        )
        step = min(v.step for v in due)
        issued = []
        for decision in decisions:
            try:
                store.issue(self.path, decision, self.state["next_id"], round_)
            except OSError as err:  # e.g. the donor has no checkpoint yet
                self._log(round_, step, "skipped", decision, reason=str(err))
                continue
            at = next(v.step for v in due if v.name == decision.recipient)
            self._log(round_, step, "copy", decision, id=self.state["next_id"], recipient_step=at)
            self.state["next_id"] += 1
            issued.append(decision)
        for v in due:
            self.state["due_at"][v.name] = (v.step // self.pbt.interval + 1) * self.pbt.interval
        store.append_log(
            self.path,
            {
                "event": "round",
                "round": round_,
                "step": step,
                "time": self.clock(),
                "due": [v.name for v in due],
                "scores": {s.name: s.score for s in scores},
                "left_out": sorted({v.name for v in views} - {v.name for v in ranked}),
                "copies": len(issued),
            },
        )
        self._tensorboard(step, views, scores, issued)
        self.state.update(round=round_, rng=self.rng.bit_generator.state)
        write_json(self.path / store.STATE_FILE, self.state)
        return issued

    def _log(self, round_: int, step: int, event: str, decision: Decision, **extra: Any) -> None:
        record = {"event": event, "round": round_, "step": step, "time": self.clock()}
        store.append_log(self.path, {**record, **decision.to_dict(), **extra})
        print(
            f"round {round_}: {event} {decision.donor} -> {decision.recipient} "
            f"({decision.donor_score:.1f} > {decision.recipient_score:.1f}) "
            f"{decision.old} -> {decision.new} {extra.get('reason', '')}",
            flush=True,
        )

    def _tensorboard(
        self, step: int, views: list[MemberView], scores: list[MemberScore], issued: list[Decision]
    ) -> None:
        if self.writer is None:
            return
        for score in scores:
            self.writer.add_scalar(f"pbt/{score.name}/score", score.score, step)
        for view in views:
            for key, value in view.hyperparameters.items():
                self.writer.add_scalar(f"pbt/{view.name}/{key}", float(value), step)
        self.writer.add_scalar("pbt/copies", len(issued), step)
        for d in issued:
            self.writer.add_text("pbt/decisions", f"{d.donor} -> {d.recipient}: {d.new}", step)
        self.writer.flush()


def main(run_path: str) -> None:
    """Run rounds until SIGTERM/SIGINT; an error in one poll is printed and the next goes on."""
    path = Path(run_path)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(path / "tb"))
    manager = Manager(path, from_dict(read_json(path / store.PBT_FILE)), writer)
    print(f"population manager: {len(manager.names)} members, {manager.keys}", flush=True)
    try:
        while not stop.is_set():
            try:
                manager.poll()
            except Exception:  # a half-written file, a member folder being replaced: next poll
                traceback.print_exc()
            stop.wait(1.0)
    finally:
        store.keep_best(path, manager.names)
        writer.close()


if __name__ == "__main__":
    main(sys.argv[1])
