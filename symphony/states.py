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
