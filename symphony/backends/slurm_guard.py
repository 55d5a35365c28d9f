"""A job's guard: when the group's launcher dies, however it dies, every process of the job ends.

`python -m symphony.backends.slurm_guard RUN_ID FOLDER` is started by the launcher
(`slurm_launcher`) as its first child. It asks the kernel for SIGTERM when its parent dies
(`PR_SET_PDEATHSIG`), waits for it, then stops every process whose environment carries
`SYMPHONY_RUN_ID=RUN_ID` (SIGTERM, a short grace, SIGKILL) and exits.

Why it is needed: `scancel --batch --signal=KILL` kills only the batch step's main process
(the launcher). Its direct children also get SIGKILL from the kernel (the launcher starts them
with `PR_SET_PDEATHSIG`), but their own children (a shell's commands, worker pools) would be
re-parented to pid 1 and keep running, unseen by `proctrack/linuxproc`. FOLDER is only on the
command line so that a guard is recognisably part of its experiment.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from symphony.local import proctree

GRACE_S = 2.0


def set_parent_death_signal(sig: int) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG


def main(argv: list[str] | None = None) -> int:
    """Entry point: wait for the parent's death, then sweep the run id."""
    run_id = (argv if argv is not None else sys.argv[1:])[0]
    parent = int(os.environ.get("SYMPHONY_GUARD_PARENT", os.getppid()))
    fired = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: fired.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C of an attached srun is the launcher's
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # the launcher died before the request above took effect
        fired.set()
    while not fired.wait(3600):
        pass
    proctree.stop_all([], run_id, grace_s=GRACE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
