"""Process states, as strings (they print and serialize as they are).

They live here, below everything that reports them: the supervisor and the tmux runner (which
run processes) and the backends (which report them) import them from this module.

    pending      not started yet / waiting to be scheduled
    running      alive
    restarting   ended; the restart policy brings it back after a backoff
    exited       ended with exit code 0
    failed       ended otherwise and will not be restarted
    stopped      ended because the experiment was deleted / interrupted
    unknown      the backend cannot tell (e.g. its supervisor is gone)
"""

PENDING, RUNNING, RESTARTING = "pending", "running", "restarting"
EXITED, FAILED, STOPPED, UNKNOWN = "exited", "failed", "stopped", "unknown"
ALIVE_STATES = (PENDING, RUNNING, RESTARTING)
PROCESS_STATES = (PENDING, RUNNING, RESTARTING, EXITED, FAILED, STOPPED, UNKNOWN)


def ended_leader(ends_with: list[str], states: dict[str, str]) -> str | None:
    """The first process named in `Experiment.ends_with` whose state (`states`: name -> state)
    says it ended for good (exited, or failed past its restarts); None while none has. The
    local supervisor, tmux and kube read an experiment's end from it."""
    return next((name for name in ends_with if states.get(name) in (EXITED, FAILED)), None)


def ended_status(ends_with: list[str], states: dict[str, str], status: str) -> str:
    """An experiment's `status` once nothing runs and an `ends_with` process ended it:
    `finished` (`failed`, if that process failed), not the `stopped` its stopped others would
    make it; `status` as it is otherwise (tmux and slurm describe with it)."""
    leader = ended_leader(ends_with, states)
    if leader is None or status == "running":
        return status
    return "failed" if states[leader] == FAILED else "finished"
