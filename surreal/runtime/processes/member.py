"""A population member's learner side: checkpoints at every round boundary, directives taken live.

The runtime's learner loop (`surreal.runtime.processes.learner.LearnerLoop`) calls `Member.after_step`
after every iteration when its run folder is a member (`member.json`). A directive from the
manager (`pbt/directive.json`, see `surreal.pbt.store`) is taken through the checkpoint
machinery: `Learner.load_state_dict` with the donor's saved state (weights, optimizer,
normalizer), then `surreal.api.core.set_hyperparameters` with the explored values; the learner keeps its
own step counters, publishes the new weights as a new version and checkpoints at once, so a
restart resumes from the copy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from surreal.api.core import set_hyperparameters
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import read_json, write_json


class Member:
    """The hook of one member's learner (rank 0 of a single learner)."""

    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        self.path, self.name = path, str(info["name"])
        self.interval = int(info["interval"])
        self.last_boundary: int | None = None

    @classmethod
    def attach(cls, run_path: Path) -> Member | None:
        """The hook when `run_path` is a population member, else None."""
        info = read_json(Path(run_path) / "member.json")
        return cls(Path(run_path), info) if info else None

    def pending(self) -> dict[str, Any] | None:
        """The manager's directive not yet taken, or None."""
        directive = read_json(self.path / "pbt" / "directive.json")
        applied = read_json(self.path / "pbt" / "applied.json", {}) or {}
        if directive and int(directive["id"]) > int(applied.get("id", 0)):
            return directive
        return None

    def apply(self, learner: Any, directive: dict[str, Any]) -> None:
        """Load the donor's learner state, then the new hyperparameters."""
        state = checkpoint.load(self.path / directive["checkpoint"])
        learner.load_state_dict(state["learner"])
        set_hyperparameters(learner, directive["hyperparameters"])

    def after_step(self, loop: Any) -> None:
        """Take a pending directive (publish + checkpoint), and checkpoint at every
        `pbt.interval` boundary the learner's step crossed (what a donor's copy is taken from)."""
        step = loop.counters["global_step"]
        directive = self.pending()
        if directive is not None:
            self.apply(loop.learner, directive)
            loop.counters["version"] += 1
            loop.publish()
            loop.save()
            write_json(
                self.path / "pbt" / "applied.json",
                {"id": int(directive["id"]), "step": step, "time": time.time()},
            )
            print(
                f"{self.name}: took member {directive['donor']}'s state with "
                f"{directive['hyperparameters']} (round {directive.get('round')}) at step {step:,}",
                flush=True,
            )
        boundary = step // self.interval
        if self.last_boundary is not None and boundary > self.last_boundary:
            loop.save()
        self.last_boundary = boundary
