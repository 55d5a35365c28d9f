"""Experiment records: one folder per experiment in a state directory a team can share.

Where the state directory is (first match wins):

1. env `SYMPHONY_HOME`;
2. `home:` in the config file: env `SYMPHONY_CONFIG`, else `~/.config/symphony/config.yaml`
   (the file may also set `backend:` the default backend, and `tmux_socket:`);
3. `~/.symphony`.

Layout of `<home>/experiments/<name>/`:

    record.yaml     the ExperimentRecord below (written atomically; safe to read any time)
    spec.yaml       the experiment spec (Experiment.to_yaml), for humans and `symphony launch`
    logs/<process>.log   every launch of this name, in order (see "Relaunches" below)
    ...             anything the backend keeps (the local supervisor's state.json, compose files)

Every backend's experiment gets a record at launch; `symphony list/describe/logs/delete` find the
backend of an experiment through its record. Names are unique in one state directory, so a team
pointing SYMPHONY_HOME at one shared folder sees each other's experiments (with owners).

A record stays after its experiment ended (finished, failed, stopped), logs included, until
`symphony delete` removes it: `symphony list --all`, `describe` and `logs` show past runs. A
launcher that ends an experiment itself (`ExperimentHandle.stop(outcome=...)`, as `surreal
launch` does when its run is over) records how it ended in `outcome`, which `ended_status` shows
instead of the process states (a finished run's other processes were stopped, not failed).

Relaunches: a launcher that launches the same experiment again under its name (`surreal launch
--resume`) retires the ended record first (`Records.retire`, through
`symphony.launcher.free_name`): the record goes, its `logs/` stay as `.<name>.logs/` and the
next record of that name takes them over (`Records.create`), so each process's log holds every
launch's lines, in order; `create(..., note=LINE)` writes LINE into each log first (e.g.
`--- resumed at step N ---`). The supervisor appends to the logs and marks each restart of a
process in its log (`--- restarted after signal 9 (attempt 2) ---`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from symphony.errors import ExperimentNotFound, SymphonyError
from symphony.ownership import current_owner, current_uid
from symphony.spec import Experiment

ACTIVE_STATUSES = ("launching", "running")
RECORD_FILE = "record.yaml"


def config_path() -> Path:
    """The config file path (it need not exist)."""
    default = Path.home() / ".config" / "symphony" / "config.yaml"
    return Path(os.environ.get("SYMPHONY_CONFIG", default)).expanduser()


def load_config() -> dict[str, Any]:
    """The config file's mapping ({} when there is none)."""
    path = config_path()
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise SymphonyError(f"{path} must hold a YAML mapping such as `home: /shared/symphony`")
    return data


def state_dir() -> Path:
    """The state directory (see the module docstring for the lookup order)."""
    if os.environ.get("SYMPHONY_HOME"):
        return Path(os.environ["SYMPHONY_HOME"]).expanduser()
    home = load_config().get("home")
    return Path(home).expanduser() if home else Path.home() / ".symphony"


def git_revision(folder: str | Path | None = None) -> str | None:
    """`git describe --always --dirty` of `folder` (default: here), or None outside a repository."""
    try:
        result = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


@dataclass
class ExperimentRecord:
    """What symphony remembers about one launched experiment.

    Attributes:
        name: experiment name (unique in the state directory).
        backend: registered backend name ("local", "tmux", "kube", ...).
        owner: user who launched it (`symphony.ownership.current_owner`).
        created: launch time, seconds since the epoch.
        status: last known status: "launching", "running", "finished", "failed", "stopped".
            Backends compute live status in `describe`; this is what they last wrote.
        spec: `Experiment.to_dict()` of what was launched.
        logs: process name -> log file path (file-based backends).
        data: backend-specific state (supervisor pid, tmux socket, namespace, compose file...).
        launch_command: the command line that launched it.
        git_revision: `git describe --always --dirty` of the launch directory, if it is a repo.
        owner_uid: the real uid of the launching process.
        outcome: how the experiment ended, as the launcher that ended it said ("finished",
            "failed", "stopped"); None until then, or when it ended by itself.
        ended: when it ended (seconds since the epoch: its supervisor saw every process end,
            or its launcher stopped it); None while it runs, or when no one said.
        summary: what the launcher reports of the experiment's result, shown by `symphony list
            --all` as `key value` pairs (`ExperimentHandle.set_summary`; e.g. surreal's
            `{"eval": "475.0"}`); symphony knows nothing of what the keys mean.
        path: the record's folder (not stored in the file).
    """

    name: str
    backend: str
    owner: str
    created: float
    status: str = "launching"
    spec: dict[str, Any] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    launch_command: list[str] = field(default_factory=list)
    git_revision: str | None = None
    owner_uid: int | None = None
    outcome: str | None = None
    ended: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def experiment(self) -> Experiment:
        """The launched experiment, rebuilt from the stored spec."""
        return Experiment.from_dict(self.spec)

    def log_path(self, process: str) -> Path:
        """Where a file-based backend writes `process`'s output (logs/<process>.log)."""
        return self._dir() / "logs" / f"{process}.log"

    def file(self, name: str) -> Path:
        """A backend-owned file inside the record folder."""
        return self._dir() / name

    def save(self) -> None:
        """Write record.yaml atomically."""
        folder = self._dir()
        data = asdict(self)
        data.pop("path")
        tmp = folder / f".{RECORD_FILE}.{os.getpid()}.tmp"
        tmp.write_text(yaml.safe_dump(data, sort_keys=False))
        os.replace(tmp, folder / RECORD_FILE)

    def set_status(self, status: str) -> None:
        """Update and save the status."""
        self.status = status
        self.save()

    def update(self, **changes: Any) -> None:
        """Set these fields on the stored record and save it, keeping what another process
        (the supervisor, a launcher) wrote there since this copy was read."""
        try:
            current = ExperimentRecord.load(self._dir())
        except (OSError, yaml.YAMLError, TypeError):
            current = self  # gone or half-written: this copy is the best there is
        for key, value in changes.items():
            setattr(current, key, value)
            setattr(self, key, value)
        current.save()

    def launch_interrupted(self) -> bool:
        """The launch never finished: the record still says `launching` and the process that
        made it (`data["launcher"]`, on this machine) is gone (killed during `docker compose
        up`, a closed terminal), so what it did not start never will."""
        mark = self.data.get("launcher")
        return self.status == "launching" and isinstance(mark, dict) and launcher_gone(mark)

    def ended_status(self, status: str) -> str:
        """The status to show for live status `status`: the launcher's `outcome` once the
        experiment is no longer active, else `status` itself."""
        if self.outcome and status not in ACTIVE_STATUSES:
            return self.outcome
        return status

    def duration(self, status: str, now: float | None = None) -> float | None:
        """Seconds from launch to its end (to now while `status` is active); None when it
        ended and no one recorded when."""
        if status in ACTIVE_STATUSES:
            return max(0.0, (now or time.time()) - self.created)
        return None if self.ended is None else max(0.0, self.ended - self.created)

    def summary_text(self) -> str:
        """`eval 475.0 step 3,000`: the summary's pairs in order; `-` when it has none."""
        return " ".join(f"{k} {v}" for k, v in (self.summary or {}).items()) or "-"

    def _dir(self) -> Path:
        if self.path is None:
            raise SymphonyError(
                f"record {self.name!r} has no folder; create it with Records.create"
            )
        return self.path

    @classmethod
    def load(cls, folder: Path) -> ExperimentRecord:
        """Read record.yaml from a record folder."""
        data = yaml.safe_load((folder / RECORD_FILE).read_text()) or {}
        known = {f.name for f in fields(cls)} - {"path"}
        return cls(path=folder, **{k: v for k, v in data.items() if k in known})


class Records:
    """The experiment records in one state directory.

    Args:
        home: the state directory; default `state_dir()`.
    """

    def __init__(self, home: str | Path | None = None) -> None:
        self.home = Path(home).expanduser() if home else state_dir()

    @property
    def folder(self) -> Path:
        """`<home>/experiments`."""
        return self.home / "experiments"

    def create(
        self,
        experiment: Experiment,
        backend: str,
        *,
        owner: str | None = None,
        launch_command: list[str] | None = None,
        note: str | None = None,
    ) -> ExperimentRecord:
        """Make a new record (atomically); a name already in use is an error with the fix.

        The logs of a retired record of this name (`retire`) become this record's, and `note`
        (one line, e.g. `--- resumed at step N ---`) is appended to every process's log."""
        self.folder.mkdir(parents=True, exist_ok=True)
        folder = self.folder / experiment.name
        try:
            folder.mkdir()
        except FileExistsError:
            raise SymphonyError(
                f"an experiment named {experiment.name!r} exists in {self.folder}; delete it "
                f"(`symphony delete {experiment.name}`) or launch with another --name"
            ) from None
        earlier = self._take_retired_logs(experiment.name, folder / "logs")
        (folder / "spec.yaml").write_text(experiment.to_yaml())
        record = ExperimentRecord(
            name=experiment.name,
            backend=backend,
            owner=owner or current_owner(),
            created=time.time(),
            spec=experiment.to_dict(),
            launch_command=list(launch_command or []),
            git_revision=git_revision(),
            owner_uid=current_uid(),
            path=folder,
        )
        record.logs = {p: str(record.log_path(p)) for p in experiment.process_names()}
        record.data["launcher"] = launcher_mark()
        if earlier:
            record.data["earlier_logs"] = True  # a failed launch retires them again (launcher)
        record.save()
        if note:
            for path in record.logs.values():
                with open(path, "a") as log:
                    log.write(note.rstrip("\n") + "\n")
        return record

    def retired_logs(self, name: str) -> Path:
        """Where `retire` keeps the logs of `name`'s retired record: `.<name>.logs/`."""
        return self.folder / f".{name}.logs"

    def retire(self, name: str) -> None:
        """Remove the (ended) record of `name` but keep its logs for the next record of that
        name, which `create` gives them to; logs retired before and not taken yet (a launch
        that never got as far) come first in each file."""
        logs, kept = self.folder / name / "logs", self.retired_logs(name)
        if kept.exists() and logs.is_dir():
            for path in sorted(logs.iterdir()):
                with open(kept / path.name, "ab") as out:
                    out.write(path.read_bytes())
        elif logs.is_dir():
            os.rename(logs, kept)
        self.remove(name, keep_logs=True)

    def _take_retired_logs(self, name: str, logs: Path) -> bool:
        """`logs/` of a new record: the retired record's logs of `name` (True), else a new
        folder (False)."""
        try:
            os.rename(self.retired_logs(name), logs)
        except FileNotFoundError:
            logs.mkdir()
            return False
        return True

    def load(self, name: str) -> ExperimentRecord:
        """The record of `name` exactly (ExperimentNotFound if none)."""
        folder = self.folder / name
        if not (folder / RECORD_FILE).exists():
            raise ExperimentNotFound(
                f"no experiment {name!r} in {self.folder}; see `symphony list --all`"
            )
        return ExperimentRecord.load(folder)

    def all(self) -> list[ExperimentRecord]:
        """Every readable record, oldest first."""
        if not self.folder.exists():
            return []
        records = []
        for folder in self.folder.iterdir():
            if (folder / RECORD_FILE).exists():
                try:
                    records.append(ExperimentRecord.load(folder))
                except (OSError, yaml.YAMLError, TypeError):
                    continue  # half-written by another user's launch; skip it
        return sorted(records, key=lambda r: r.created)

    def resolve(self, prefix: str, extra: list[str] | None = None) -> str:
        """The one experiment name that `prefix` selects among records (and `extra` names)."""
        names = sorted({r.name for r in self.all()} | set(extra or []))
        return resolve_prefix(prefix, names, "experiment")

    def remove(self, name: str, keep_logs: bool = False) -> None:
        """Delete a record folder and everything in it (logs included, and its retired logs
        unless `keep_logs`)."""
        shutil.rmtree(self.folder / name, ignore_errors=True)
        if not keep_logs:
            shutil.rmtree(self.retired_logs(name), ignore_errors=True)


def resolve_prefix(prefix: str, names: list[str], what: str) -> str:
    """An exact match, else the unique name starting with `prefix`; else a clear error."""
    if prefix in names:
        return prefix
    matches = [n for n in names if n.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ExperimentNotFound(f"no {what} matches {prefix!r}; {what} names: {names or 'none'}")
    raise ExperimentNotFound(
        f"{prefix!r} is ambiguous: it matches {what} names {matches}; type more of it"
    )


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, Linux's /proc), None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (name) ": state is field 3
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def launcher_mark(pid: int | None = None) -> dict[str, Any]:
    """Who is launching: this machine, the process and when it started (a pid reused later
    by another process is told apart by that)."""
    pid = os.getpid() if pid is None else pid
    return {"host": socket.gethostname(), "pid": pid, "started": _started(pid)}


def launcher_gone(mark: dict[str, Any]) -> bool:
    """Whether the launcher `mark` names no longer runs; False when it ran on another machine
    (it cannot be asked from here) or the mark is not one."""
    pid = mark.get("pid")
    if mark.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    started = mark.get("started")
    return started is not None and _started(pid) not in (None, started)
