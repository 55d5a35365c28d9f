"""The Backend interface every launcher implements, and the status objects it returns.

A backend is one class in `symphony/backends/<module>.py`, registered by name in
`symphony/backends/__init__.py`. The CLI and `symphony.launch` drive every backend the same way:

1. `Experiment.validate()` (nothing starts on a bad spec);
2. `--dry-run`: print `backend.plan(experiment)` and stop (no record, no side effect);
3. `Records.create(experiment, backend.name)` makes the record (spec, owner, created, log paths);
4. `backend.launch(experiment, record, detach=...)`; the backend stores what it needs later in
   `record.data` (and calls `record.save()`), sets `record.status` ("running", ...);
5. later, possibly from another process or another user: `describe(record)`, `logs(record, ...)`,
   `exec(record, ...)`, `delete(record, force=...)`; the caller then removes the record.

Backends whose experiments can also be found without a record (kube: a namespace per experiment
on a shared cluster) override `list()` to add them; the CLI then calls the other methods with
`ExperimentRecord(name, backend, owner, created)` built from that summary (spec may be empty).

Process states (strings, so they print and serialize as they are):
    pending      not started yet / waiting to be scheduled
    running      alive
    restarting   ended; the restart policy brings it back after a backoff
    exited       ended with exit code 0
    failed       ended otherwise and will not be restarted
    stopped      ended because the experiment was deleted / interrupted
    unknown      the backend cannot tell (e.g. its supervisor is gone)
"""

from __future__ import annotations

import abc
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from symphony.errors import BackendError
from symphony.records import ExperimentRecord, Records
from symphony.spec import Experiment
from symphony.states import (  # noqa: F401 - re-exported: backends import them from here
    ALIVE_STATES,
    EXITED,
    FAILED,
    PENDING,
    PROCESS_STATES,
    RESTARTING,
    RUNNING,
    STOPPED,
    UNKNOWN,
)


@dataclass
class ProcessStatus:
    """One process as a backend sees it now.

    Attributes:
        name: process name.
        state: one of PROCESS_STATES.
        group: its process group name.
        restarts: how many times it was restarted.
        pid: OS process id of the command (local, tmux), if known.
        location: where it runs: "tmux window ring:a", a pod, a container, a node.
        started: when the current run started (epoch seconds), if known.
        ended: when it ended (epoch seconds), if it did.
        exit_code: the last exit code (negative: killed by that signal), if it ended.
        last_end: how it last ended, kept over its restarts ("killed by SIGKILL", "exited
            with 1"), where the backend knows (local, tmux).
    """

    name: str
    state: str
    group: str | None = None
    restarts: int = 0
    pid: int | None = None
    location: str | None = None
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    last_end: str | None = None

    def uptime(self, now: float | None = None) -> float | None:
        """Seconds the current run has been alive (None when not running or unknown)."""
        if self.state != RUNNING or self.started is None:
            return None
        return max(0.0, (now or time.time()) - self.started)


@dataclass
class ExperimentSummary:
    """One row of `symphony list`."""

    name: str
    backend: str
    owner: str
    status: str
    created: float
    processes: int = 0
    running: int = 0

    def age(self, now: float | None = None) -> float:
        """Seconds since launch."""
        return max(0.0, (now or time.time()) - self.created)


@dataclass
class ExperimentStatus:
    """What `describe` returns: the experiment and each of its processes."""

    name: str
    backend: str
    owner: str
    created: float
    status: str
    processes: list[ProcessStatus] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def process(self, name: str) -> ProcessStatus:
        """The status of one process (KeyError if absent)."""
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise KeyError(name)

    def summary(self) -> ExperimentSummary:
        """The `symphony list` row for this experiment."""
        running = sum(p.state == RUNNING for p in self.processes)
        return ExperimentSummary(
            self.name,
            self.backend,
            self.owner,
            self.status,
            self.created,
            len(self.processes),
            running,
        )


def overall_status(states: list[str]) -> str:
    """Experiment status from its process states.

    "running" while any process is alive, else "failed" if any failed, "stopped" if any was
    stopped, "finished" when all exited 0, "unknown" when the backend cannot tell.
    """
    if any(s in ALIVE_STATES for s in states):
        return "running"
    for state, status in ((FAILED, "failed"), (UNKNOWN, "unknown"), (STOPPED, "stopped")):
        if state in states:
            return status
    return "finished"


@dataclass(frozen=True)
class Capabilities:
    """What a backend's processes share with the launching machine and how it is driven: each
    backend class declares its own (`Backend.capabilities`), so a program above symphony (surreal)
    asks a backend what it does instead of comparing its name, and a new backend is one class
    here. `symphony.backends.capabilities(name)` reads them by registry name."""

    single_machine: bool = False
    """Every process runs on the launching machine and listens on 127.0.0.1 only (local, tmux,
    test): no traffic leaves the machine."""
    shares_launch_disk: bool = False
    """Processes see the launching machine's files at the same paths (local, tmux, test; slurm
    through its shared filesystem)."""
    runs_in_image: bool = False
    """Each process runs in a container of the experiment's image (compose, kube): its command
    names the image's interpreter, no path of the launching machine, and its devices are the
    cluster's, not this machine's."""
    fork_preload: bool = False
    """Processes that declare `Process.preload` start as forks of one fork server that imported
    those modules (local)."""
    secret_mount_root: str | None = None
    """Where a named secret is mounted read-only in every process that lists it in
    `Process.secrets` (`ROOT/NAME`), created at launch from the folders of the option
    `secret_files` ({NAME: FOLDER}); None: the backend mounts no secrets (kube: /etc/symphony)."""
    env_file_option: str | None = None
    """The launch option that hands private env files (a path or a list of them) to every
    process, read by the backend at launch, never written into a spec (compose: `env_file`)."""
    stop_grace_option: str | None = None
    """The launch option with the seconds a stopping process gets between its termination
    notice and the kill (local and tmux: `grace_s`, compose: `stop_grace_s`)."""
    run_volume_option: str | None = None
    """The launch option naming the path where every container mounts the run storage that all
    of them share (kube: `volume_path`)."""
    stays_attached: bool = True
    """`launch(detach=False)` stays until the processes end; False: the processes are the
    cluster's and the launch returns once they started (kube)."""
    plan_is_submission: bool = False
    """`plan()` renders what the backend would submit (compose file, manifests, batch scripts)
    rather than the processes and their addresses (compose, kube, slurm)."""
    logs_on_launch_disk: bool = True
    """The processes' output is kept in files on the launching machine; False: it lives with the
    backend (containers, pods) and is read through `logs()`, from the record once they are
    removed (compose, kube)."""


class Backend(abc.ABC):
    """Launches experiments somewhere and reports on them.

    Subclasses set `name` (the registry name) and implement the abstract methods. They receive
    `Records` to find and save records, and keyword options from the CLI or config file
    (e.g. tmux's `socket`). Unknown options should raise BackendError naming the known ones.
    """

    name: ClassVar[str] = ""
    #: True when processes live inside the launching Python process (they cannot outlive it).
    in_process: ClassVar[bool] = False
    #: What the backend's processes share with this machine and how it is driven; every
    #: registered backend declares its own (tests/symphony/test_capabilities.py).
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, records: Records | None = None, **options: Any) -> None:
        self.records = records or Records()
        self.options = options

    def plan(self, experiment: Experiment) -> str:
        """What `launch` would do, as text for `--dry-run` (no side effects). Default: the spec."""
        return experiment.to_yaml()

    def ends_alone(self, name: str) -> str | None:
        """How experiment NAME ends with no launcher watching, once its `Experiment.ends_with`
        process ended for good: a clause that follows "that process ends, and" (kube: the
        cluster deletes the other pods; slurm: the group launchers stop the rest); None
        (default) where nothing but `symphony delete NAME` stops the others then."""
        return None

    def cluster_spec(self) -> str | None:
        """The path of the cloudwise cluster spec this backend places processes on (prices and
        capacity: `surreal.launch.cost`), None when it has none (default)."""
        return None

    @abc.abstractmethod
    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Start every process of a validated experiment.

        Args:
            experiment: the experiment (already validated).
            record: its fresh record; store backend state in `record.data`, set `record.status`
                and call `record.save()`.
            detach: True: return once everything started (processes keep running).
                False: stay attached until every process ended or Ctrl-C (KeyboardInterrupt), then
                stop whatever still runs before returning. Backends that cannot stay attached
                treat it like True and say so in their docs.

        Raises:
            BackendError: it could not start; whatever did start is stopped again.
        """

    @abc.abstractmethod
    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """The live status of an experiment and each of its processes."""

    @abc.abstractmethod
    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """Yield the output lines (each ending in newline) of one process.

        Args:
            record: the experiment.
            process: an exact process name (the CLI resolves prefixes first).
            follow: keep yielding new lines until the process ended (or the caller stops).
            tail: start with only the last `tail` lines.
        """

    @abc.abstractmethod
    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """Stop every process of an experiment and release what it held.

        Stops gracefully (a termination notice, a grace period, then a kill); `force` kills at once
        and must not fail when the backend's state is already gone. The caller removes the record.
        """

    def exec(self, record: ExperimentRecord, process: str, command: list[str]) -> int:
        """Run `command` next to (or inside) a running process; returns its exit code."""
        raise BackendError(f"the {self.name} backend does not support exec")

    def list(self) -> list[ExperimentSummary]:
        """This backend's experiments; default: those in the records, with live status."""
        summaries = []
        for record in self.records.all():
            if record.backend == self.name:
                try:
                    summaries.append(self.describe(record).summary())
                except Exception:  # noqa: BLE001 - one broken record must not hide the rest
                    summaries.append(
                        ExperimentSummary(
                            record.name, self.name, record.owner, "unknown", record.created
                        )
                    )
        return summaries

    def status_from_record(
        self, record: ExperimentRecord, processes: list[ProcessStatus], **details: Any
    ) -> ExperimentStatus:
        """Helper: an ExperimentStatus for `record` with `processes`, status derived from them."""
        status = overall_status([p.state for p in processes]) if processes else record.status
        return ExperimentStatus(
            record.name,
            record.backend,
            record.owner,
            record.created,
            status,
            processes,
            dict(details),
        )
