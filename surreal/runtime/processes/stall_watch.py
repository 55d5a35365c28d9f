"""The learner's own stall watch: a run that stands still ends, with or without a launcher.

`surreal launch` ends a run whose learner step has not moved for `run.stall_timeout_s`
(`surreal.launch.progress`). A run nobody watches (kube, always; slurm or local once the launcher
died) stood still for good instead: a learner starved by helpers that failed past their restarts,
or hung, kept its nodes until `symphony delete`. The learner watches itself too: a thread counts
checks (every `CHECK_S` seconds of the process's running time, so a run paused with SIGSTOP does
not count the pause) in which its step did not move, and past `run.stall_timeout_s` + `GRACE_S`
(the launcher, when there is one, says it first) it says so, writes the run's ending (`failed`,
why) and stops the learner with `STALLED_EXIT`, which the learner's restart policy never
restarts (`final_codes`): the learner's end ends the run (`Experiment.ends_with`).

It arms once the step moved in this process, so a learner waiting for its first batch while the
cluster pulls images or adds nodes is never ended by it. A learner that a stall ended and that
is started again (kube restarts it: it does not apply `final_codes`) arms at once (the mark in
`RUN/monitoring/starts/`, which a launch clears), so on kube the Job fails after its backoff
limit of such ends and the cluster's cleanup ends the run.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from surreal.runtime.processes.common import STOP_DEADLINE_S
from surreal.runtime.runfolder.checkpoint import STALLED_EXIT
from surreal.runtime.runfolder.rundir import write_ending

GRACE_S = 60.0
"""Added to `run.stall_timeout_s`: a launcher watching the run says it first."""
CHECK_S = 5.0
"""Seconds between checks."""
MARK = "learner.stalled"
"""In `RUN/monitoring/starts/` (cleared at each launch): a stall ended a learner of this launch."""


class StallWatch:
    """Ends the learner (`STALLED_EXIT`) once `step()` stayed put past the run's stall timeout.

    Args:
        comp: the learner's Component (its config, run folder, log, `stopping`, `stop_code`).
        step: the learner's step now (read from the watch's thread: a counter, never a lock).
    """

    def __init__(self, comp: Any, step: Callable[[], int]) -> None:
        self.comp, self.step = comp, step
        timeout = float(comp.config.run.stall_timeout_s)
        self.checks = int((timeout + GRACE_S) // CHECK_S) + 1 if timeout > 0 else 0
        self.mark = comp.run.path / "monitoring" / "starts" / MARK
        self.thread = None
        if self.checks:
            self.thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
            self.thread.start()

    def _watch(self) -> None:
        last, quiet = self.step(), 0
        armed = self.mark.exists()  # a stall ended this learner's earlier start
        while not self.comp.stopping.wait(CHECK_S):
            now = self.step()
            if now != last:
                last, quiet, armed = now, 0, True
                continue
            quiet += 1 if armed else 0
            if quiet >= self.checks:
                self._end(quiet * CHECK_S, now)
                return

    def _end(self, quiet_s: float, step: int) -> None:
        """Say it, write the run's ending, mark it, and stop the learner with STALLED_EXIT."""
        run = self.comp.run
        why = (
            f"the learner's step stayed at {step:,} for {quiet_s:.0f} s (run.stall_timeout_s="
            f"{self.comp.config.run.stall_timeout_s:g} + {GRACE_S:g} s)"
        )
        self.comp.log.error(
            "%s: ending the learner (exit %d, not restarted), which ends the run, so that it "
            "holds no machine for nothing. Its last checkpoint is kept; continue with: "
            "surreal launch --resume %s",
            why,
            STALLED_EXIT,
            run.path,
        )
        write_ending(run, "failed", why)
        try:
            self.mark.parent.mkdir(parents=True, exist_ok=True)
            self.mark.write_text(why + "\n")
        except OSError:  # a full disk: a later start arms only once its step moves
            pass
        self.comp.stop_code = STALLED_EXIT
        os.kill(os.getpid(), signal.SIGTERM)  # the main thread unwinds, checkpoints, exits
        # a main thread hung in native code never runs the signal's handler (nor its deadline)
        hung = threading.Timer(STOP_DEADLINE_S, os._exit, (STALLED_EXIT,))
        hung.daemon = True
        hung.start()
