"""The experiment model: Experiment, ProcessGroup, Process (plain data, YAML round trip).

Declaring is separate from launching. An `Experiment` holds processes and process groups; a
`ProcessGroup`'s processes always share one node (one Pod on Kubernetes). Processes declare the
named services they provide (`binds`), use (`connects`) and make reachable from outside the
cluster (`exposes`, which also binds). Backends turn these names into addresses
(see `symphony.addresses`).

Errors surface as early as possible, each with a fix:

- at declaration: a bad name (not a DNS-1123 label), an empty command, a process that binds or
  connects the same name twice, adding two components with one name to an experiment;
- at `Experiment.validate()` (every backend calls it before starting anything): a service that is
  connected to but bound by nobody, a service bound by two processes, a group whose processes ask
  for different node pools, an empty experiment or group.

Example:
    >>> exp = Experiment("ring")
    >>> exp.add(Process("a", ["python", "a.py"]).binds("a-in").connects("b-in"))  # doctest: +SKIP
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Union

import yaml

from symphony.errors import SpecError
from symphony.resources import RESTART_MODES, Resources, RestartPolicy

# Resources and RestartPolicy live in symphony.resources; importing them from here keeps working.
__all__ = [
    "RESTART_MODES",
    "SPEC_VERSION",
    "Command",
    "Experiment",
    "Process",
    "ProcessGroup",
    "Resources",
    "RestartPolicy",
    "check_name",
]

SPEC_VERSION = 1
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_name(name: Any, what: str = "name") -> str:
    """Return `name` if it is a DNS-1123 label, else raise SpecError saying how to fix it."""
    if not isinstance(name, str) or len(name) > 63 or not _NAME_RE.match(name):
        suggestion = re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")[:63] or "my-name"
        raise SpecError(
            f"{what} {name!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most 63 characters); "
            f"try {suggestion!r}"
        )
    return name


Command = Union[list[str], str]


@dataclass
class Process:
    """One program of an experiment.

    Args:
        name: DNS-1123 label, unique in the experiment.
        command: a list of arguments, or one shell string (run by `/bin/sh -c`).
        env: extra environment variables.
        cwd: working directory (local backends; None means the launch directory).
        resources: what the process asks for.
        restart: the restart policy.
        image: container image (compose, kube); None uses the experiment's image.
        secrets: names of Kubernetes Secrets the process mounts (DNS-1123 labels; the kube
            backend mounts each read-only and sets `SYMPH_SECRET_<NAME>_DIR`; others ignore it).
        preload: modules to import once, before the process starts (local backend: a
            `python -m MODULE ...` command forks from a fork server that imported them, shared
            by the processes with the same list; see `symphony.local.forkserver`; others ignore it).
    """

    name: str
    command: Command
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    resources: Resources = field(default_factory=Resources)
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    image: str | None = None
    secrets: list[str] = field(default_factory=list)
    preload: list[str] = field(default_factory=list)
    bound: list[str] = field(default_factory=list)
    connected: list[str] = field(default_factory=list)
    exposed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_name(self.name, "process name")
        if isinstance(self.command, tuple):
            self.command = list(self.command)
        empty = not self.command or (isinstance(self.command, str) and not self.command.strip())
        if empty or not isinstance(self.command, (str, list)):
            raise SpecError(
                f"process {self.name!r} has no command; pass a list of arguments such as "
                f"['python', 'worker.py'] or a shell string"
            )
        if isinstance(self.command, list):
            self.command = [str(a) for a in self.command]
        self.env = {str(k): str(v) for k, v in (self.env or {}).items()}
        self.resources = self.resources or Resources()
        self.restart = self.restart or RestartPolicy()
        self.secrets = _secret_names(self.name, self.secrets)
        self.preload = _module_names(self.name, self.preload)

    def binds(self, *names: str) -> Process:
        """Declare services this process provides (listens on); returns self."""
        for name in names:
            self._declare(name, self.bound, "binds")
        return self

    def connects(self, *names: str) -> Process:
        """Declare services this process uses; returns self."""
        for name in names:
            self._declare(name, self.connected, "connects")
        return self

    def exposes(self, *names: str) -> Process:
        """Declare services reachable from outside the cluster; they are bound too. Returns self."""
        for name in names:
            if name not in self.bound:
                self.binds(name)
            if name not in self.exposed:
                self.exposed.append(name)
        return self

    def _declare(self, name: str, into: list[str], verb: str) -> None:
        check_name(name, "service name")
        if name in self.bound or name in self.connected:
            how = "binds" if name in self.bound else "connects"
            raise SpecError(
                f"process {self.name!r} already {how} {name!r}; declare each service once per "
                f"process (remove the second .{verb}({name!r}))"
            )
        into.append(name)

    def services(self) -> list[str]:
        """Every service this process binds or connects to (it gets addresses for these)."""
        return self.bound + self.connected

    def argv(self) -> list[str]:
        """The command as an argument list (a shell string runs under `/bin/sh -c`)."""
        if isinstance(self.command, str):
            return ["/bin/sh", "-c", self.command]
        return list(self.command)

    def shell_command(self) -> str:
        """The command as one shell string."""
        return self.command if isinstance(self.command, str) else shlex.join(self.command)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (what YAML stores)."""
        return {
            "name": self.name,
            "command": self.command,
            "env": dict(self.env),
            "cwd": self.cwd,
            "image": self.image,
            **({"secrets": list(self.secrets)} if self.secrets else {}),
            **({"preload": list(self.preload)} if self.preload else {}),
            "binds": list(self.bound),
            "connects": list(self.connected),
            "exposes": list(self.exposed),
            "resources": vars(self.resources).copy(),
            "restart": _restart_dict(self.restart),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Process:
        """Build a process from `to_dict()` output (unknown keys are an error)."""
        data = _known_keys(data, "process", _PROCESS_KEYS)
        proc = cls(
            name=data.get("name"),
            command=data.get("command"),
            env=data.get("env") or {},
            cwd=data.get("cwd"),
            image=data.get("image"),
            secrets=data.get("secrets") or [],
            preload=data.get("preload") or [],
            resources=Resources(**_known_keys(data.get("resources") or {}, "resources", _RES_KEYS)),
            restart=RestartPolicy(**_known_keys(data.get("restart") or {}, "restart", _RST_KEYS)),
        )
        proc.binds(*(data.get("binds") or []))
        proc.connects(*(data.get("connects") or []))
        proc.exposes(*(data.get("exposes") or []))
        return proc


_PROCESS_KEYS = {
    "name",
    "command",
    "env",
    "cwd",
    "image",
    "secrets",
    "preload",
    "binds",
    "connects",
    "exposes",
    "resources",
    "restart",
}
_RES_KEYS = {"cpu", "memory_gb", "gpu", "node_pool"}
_RST_KEYS = {"mode", "max_restarts", "backoff_s", "max_backoff_s", "window_s", "final_codes"}


def _restart_dict(policy: RestartPolicy) -> dict[str, Any]:
    """A RestartPolicy as plain data (`final_codes` only when set: specs without it read as
    before)."""
    data = vars(policy).copy()
    codes = data.pop("final_codes", ())
    return {**data, "final_codes": list(codes)} if codes else data


def _secret_names(process: str, names: Any) -> list[str]:
    """Validated Secret names: a list of distinct DNS-1123 labels."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise SpecError(
            f"secrets of process {process!r} must be a list of Secret names, e.g. "
            f"secrets=['gcs-credentials'], not {names!r}"
        )
    for name in names:
        check_name(name, f"secret name (process {process!r})")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SpecError(
            f"process {process!r} lists secret(s) {duplicates} twice; name each Secret once"
        )
    return list(names)


def _module_names(process: str, names: Any) -> list[str]:
    """Validated `preload`: a list of dotted module names."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise SpecError(
            f"preload of process {process!r} must be a list of module names, e.g. "
            f"preload=['numpy'], not {names!r}"
        )
    bad = [n for n in names if not isinstance(n, str) or not _MODULE_RE.match(n)]
    if bad:
        raise SpecError(
            f"preload of process {process!r} names {bad}, which are not module names; "
            f"use dotted Python names such as 'numpy' or 'mypkg.worker'"
        )
    return list(names)


def _known_keys(data: Any, what: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SpecError(f"{what} must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(f"unknown {what} key(s) {unknown}; allowed keys: {sorted(allowed)}")
    return data


@dataclass
class ProcessGroup:
    """Processes that always share one node (one Pod on Kubernetes, one tmux session window set).

    Args:
        name: DNS-1123 label, unique among all names in the experiment.
        processes: the members (also addable with `add`).
    """

    name: str
    processes: list[Process] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_name(self.name, "process group name")
        members, self.processes = list(self.processes), []
        self.add(*members)

    def add(self, *processes: Process) -> ProcessGroup:
        """Add processes to the group; returns self."""
        for proc in processes:
            if not isinstance(proc, Process):
                raise SpecError(f"a ProcessGroup holds Process objects, not {type(proc).__name__}")
            if any(p.name == proc.name for p in self.processes):
                raise SpecError(
                    f"group {self.name!r} already has a process {proc.name!r}; rename one"
                )
            self.processes.append(proc)
        return self

    def node_pool(self) -> str | None:
        """The one node pool its processes ask for (None: any node)."""
        pools = {p.resources.node_pool for p in self.processes} - {None}
        return pools.pop() if len(pools) == 1 else None


@dataclass
class Experiment:
    """A named set of processes and process groups.

    Args:
        name: DNS-1123 label; names the record, the tmux session, the namespace.
        image: default container image for every process (compose, kube).
        metadata: free-form strings recorded with the spec (launch command, git revision, ...).
        ends_with: processes whose end ends the experiment: once one of them has exited for
            good (exit 0, or failed past its restarts), the local supervisor stops the others
            and the experiment is finished (failed, if that process failed); on tmux the
            process's runner stops the others; on kube the cluster deletes them once its Job
            finished (`symphony.kube.ending`); on slurm the group launchers stop them
            (`slurm_launcher`). So a run ends by itself when its learner does, with no launcher
            watching. Compose leaves this to the launcher (`symphony launch` attached, or
            `surreal launch`).
    """

    name: str
    image: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    components: list[Process | ProcessGroup] = field(default_factory=list)
    ends_with: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_name(self.name, "experiment name")
        if isinstance(self.ends_with, str) or not isinstance(self.ends_with, (list, tuple)):
            raise SpecError(f"ends_with={self.ends_with!r} must be a list of process names")
        self.ends_with = [str(n) for n in self.ends_with]
        members, self.components = list(self.components), []
        self.add(*members)

    def add(self, *items: Process | ProcessGroup) -> Experiment:
        """Add processes and/or groups; a duplicate name is an error now. Returns self."""
        for item in items:
            if not isinstance(item, (Process, ProcessGroup)):
                raise SpecError(f"add Process or ProcessGroup objects, not {type(item).__name__}")
            taken = self._names()
            new = [item.name] + (
                [p.name for p in item.processes] if isinstance(item, ProcessGroup) else []
            )
            clash = [n for n in new if n in taken] or [n for n in set(new) if new.count(n) > 1]
            if clash:
                raise SpecError(
                    f"name {clash[0]!r} is used twice in experiment {self.name!r}; process and "
                    f"group names must be unique, so rename one"
                )
            self.components.append(item)
        return self

    def _names(self) -> list[str]:
        names = []
        for item in self.components:
            names.append(item.name)
            if isinstance(item, ProcessGroup):
                names.extend(p.name for p in item.processes if p.name != item.name)
        return names

    def groups(self) -> Iterator[ProcessGroup]:
        """Every ProcessGroup in declaration order; a lone Process is a group of one (same name)."""
        for item in self.components:
            yield item if isinstance(item, ProcessGroup) else ProcessGroup(item.name, [item])

    def processes(self) -> list[Process]:
        """Every process in declaration order."""
        return [p for g in self.groups() for p in g.processes]

    def process(self, name: str) -> Process:
        """The process called `name` (SpecError listing the names if there is none)."""
        for proc in self.processes():
            if proc.name == name:
                return proc
        raise SpecError(f"no process {name!r} in {self.name!r}; processes: {self.process_names()}")

    def process_names(self) -> list[str]:
        """Names of every process, in declaration order."""
        return [p.name for p in self.processes()]

    def group_of(self, process_name: str) -> str:
        """Name of the group that holds a process (its own name for a lone process)."""
        for group in self.groups():
            if any(p.name == process_name for p in group.processes):
                return group.name
        raise SpecError(f"no process {process_name!r} in {self.name!r}")

    def services(self) -> dict[str, str]:
        """Map each bound service to the process that binds it (call `validate()` first)."""
        return {s: p.name for p in self.processes() for s in p.bound}

    def validate(self) -> Experiment:
        """Check the whole topology; raise SpecError with a fix, else return self."""
        if not self.components:
            raise SpecError(
                f"experiment {self.name!r} has no processes; add some with .add(Process(...))"
            )
        unknown = [n for n in self.ends_with if n not in self.process_names()]
        if unknown:
            raise SpecError(
                f"ends_with names {unknown}, which {self.name!r} does not have; its processes: "
                f"{self.process_names()}"
            )
        binders: dict[str, str] = {}
        for group in self.groups():
            if not group.processes:
                raise SpecError(f"group {group.name!r} is empty; add processes or remove it")
            pools = {p.resources.node_pool for p in group.processes} - {None}
            if len(pools) > 1:
                raise SpecError(
                    f"group {group.name!r} shares one node but its processes ask for node pools "
                    f"{sorted(pools)}; give them the same node_pool"
                )
            for proc in group.processes:
                for service in proc.bound:
                    if service in binders:
                        raise SpecError(
                            f"service {service!r} is bound by both {binders[service]!r} and "
                            f"{proc.name!r}; one process binds a name (use a proxy to shard it)"
                        )
                    binders[service] = proc.name
        for proc in self.processes():
            for service in proc.connected:
                if service not in binders:
                    raise SpecError(
                        f"service {service!r} is connected to by {proc.name!r} but no process "
                        f"binds it; add `.binds({service!r})` to the process that serves it"
                    )
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form: lone processes and groups in declaration order."""
        items = []
        for item in self.components:
            if isinstance(item, ProcessGroup):
                items.append(
                    {"group": item.name, "processes": [p.to_dict() for p in item.processes]}
                )
            else:
                items.append(item.to_dict())
        return {
            "symphony": SPEC_VERSION,
            "name": self.name,
            "image": self.image,
            "metadata": dict(self.metadata),
            "processes": items,
            **({"ends_with": list(self.ends_with)} if self.ends_with else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experiment:
        """Build an experiment from `to_dict()` output; bad data raises SpecError."""
        data = _known_keys(
            data, "experiment", {"symphony", "name", "image", "metadata", "processes", "ends_with"}
        )
        if data.get("symphony", SPEC_VERSION) != SPEC_VERSION:
            raise SpecError(
                f"spec version {data['symphony']!r} is not supported (need {SPEC_VERSION})"
            )
        exp = cls(
            data.get("name"),
            image=data.get("image"),
            metadata=data.get("metadata") or {},
            ends_with=data.get("ends_with") or [],
        )
        for item in data.get("processes") or []:
            if isinstance(item, dict) and "group" in item:
                item = _known_keys(item, "group", {"group", "processes"})
                procs = [Process.from_dict(p) for p in item.get("processes") or []]
                exp.add(ProcessGroup(item["group"], procs))
            else:
                exp.add(Process.from_dict(item))
        return exp

    def to_yaml(self) -> str:
        """The spec as YAML text (`Experiment.from_yaml(exp.to_yaml()) == exp`)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> Experiment:
        """Parse YAML text written by `to_yaml()` (or by hand)."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise SpecError(f"the spec is not valid YAML: {err}") from err
        return cls.from_dict(data)
