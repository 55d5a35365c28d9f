"""A scripted run for the progress display's tests: `python -m surreal.launch.progress_demo DIR`.

It drives `surreal.launch.progress.monitor` with a fake experiment whose processes start one by one,
restart, and train to the step budget, writing `DIR/status.json` as the metrics sink would.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from surreal.launch.progress import monitor
from surreal.runtime.runfolder.rundir import RunDir

TOTAL = 1000


@dataclass
class FakeProcess:
    """What `monitor` reads of a process."""

    name: str
    state: str = "pending"
    restarts: int = 0
    exit_code: int | None = None
    last_end: str | None = None


@dataclass
class FakeStatus:
    processes: list[FakeProcess] = field(default_factory=list)


class ScriptedRun:
    """Each `status()` call is one tick of a scripted run (start-up, restarts, training, end)."""

    name = "demo"

    def __init__(self, folder: Path) -> None:
        self.folder, self.tick = folder, 0
        self.procs = [FakeProcess(n) for n in ("learner", "replay", "actor-0", "actor-1")]

    def status(self) -> FakeStatus:
        t, self.tick = self.tick, self.tick + 1
        if t >= 2:
            self.procs[0].state = self.procs[1].state = "running"
        if t >= 4:
            self.procs[2].state = self.procs[3].state = "running"
        if t >= 10:
            self.procs[2].restarts, self.procs[2].last_end = 2, "killed by SIGKILL"
        if t >= 7:
            step = min(TOTAL, (t - 6) * 100)
            status = {
                "global_step": step,
                "total_steps": TOTAL,
                "episodic_return": 10.0 + t,
                "charts/learner_its": 20.0,
                "charts/learn_time": 0.04,
                "charts/policy_lag": 0.5,
            }
            if t >= 12:
                status.update({"charts/eval_return": 42.0, "best_eval_return": 42.0})
            (self.folder / "status.json").write_text(json.dumps(status))
            if step >= TOTAL and t >= 18:
                self.procs[0].state, self.procs[0].exit_code = "exited", 0
        return FakeStatus(self.procs)


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    every_s = float(argv[1]) if len(argv) > 1 else 0.0
    code = monitor(
        ScriptedRun(folder), RunDir(folder), out=sys.stdout, total=TOTAL, every_s=every_s
    )
    (folder / "done").write_text(str(code))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
