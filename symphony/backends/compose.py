"""The compose backend: an experiment as a docker compose project on one docker engine.

`launch` renders the compose file (`compose_render`: one container per process, a sandbox
container per multi-process group holding its network and IPC namespaces), checks it against the
compose specification, records the image ids/digests it will run, writes it into the record folder
(`compose.yaml`) and runs `docker compose up -d` (the plugin where it exists, else
`docker-compose`). `describe/logs/exec/delete` talk to the engine through the docker SDK, finding
containers by their compose project label, so they work from any shell that reaches the engine.
`delete` keeps each process's output in the record (`logs/<process>.log`) before it removes the
containers: `symphony logs` of a stopped experiment reads it there.

Options (keyword arguments, e.g. from `symphony launch --backend compose`):
    network         "service" (default; compose's project network, addresses are service names)
                    or "host" (host networking, addresses are free ports on 127.0.0.1); the
                    default can be set with env SYMPHONY_COMPOSE_NETWORK.
    image           image for processes whose spec names none.
    shm_size        /dev/shm per group (default "1g"), for caraml's DataFetcher.
    base_port       first port in "service" mode (default 7000).
    stop_grace_s    SIGTERM-to-SIGKILL grace when stopping (default 10).
    compose_command the compose CLI to run (default: detected; env SYMPHONY_COMPOSE_COMMAND).
    env_file        a path, or a list of paths, of env files (`KEY=VALUE` lines) on this
                    machine that compose reads at `up` into every process container's
                    environment (secrets stay out of the compose file; keep the files mode 600).

An attached launch (`detach=False`) polls until every process ended, and on Ctrl-C deletes the
experiment's containers before returning.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import yaml

from symphony.backends import compose_engine as engine
from symphony.backends.base import (
    ALIVE_STATES,
    PENDING,
    STOPPED,
    Backend,
    Capabilities,
    ExperimentStatus,
    ExperimentSummary,
    ProcessStatus,
)
from symphony.backends.compose_render import (
    EXPERIMENT_LABEL,
    OWNER_LABEL,
    PROCESS_LABEL,
    ComposeOptions,
    image_of,
    project_name,
    render_compose,
)
from symphony.backends.compose_schema import validate_compose
from symphony.errors import BackendError, LaunchRefused
from symphony.logfiles import read_lines
from symphony.records import ExperimentRecord
from symphony.spec import Experiment

COMPOSE_FILE = "compose.yaml"
_OPTIONS = {
    "network",
    "image",
    "shm_size",
    "base_port",
    "stop_grace_s",
    "compose_command",
    "env_file",
}


class ComposeBackend(Backend):
    """Runs experiments as docker compose projects (see the module docstring for options)."""

    name: ClassVar[str] = "compose"
    capabilities: ClassVar[Capabilities] = Capabilities(
        runs_in_image=True,
        env_file_option="env_file",
        stop_grace_option="stop_grace_s",
        plan_is_submission=True,
        logs_on_launch_disk=False,
    )

    def __init__(self, records: Any = None, **options: Any) -> None:
        unknown = set(options) - _OPTIONS
        if unknown:
            raise BackendError(
                f"unknown compose option(s) {sorted(unknown)}; known: {sorted(_OPTIONS)}"
            )
        super().__init__(records, **options)
        self.compose_options = ComposeOptions(
            network=options.get("network") or os.environ.get("SYMPHONY_COMPOSE_NETWORK", "service"),
            image=options.get("image"),
            shm_size=str(options.get("shm_size", "1g")),
            base_port=int(options.get("base_port", 7000)),
            stop_grace_s=int(options.get("stop_grace_s", 10)),
            env_files=_paths(options.get("env_file")),
        )
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The docker SDK client (connected on first use)."""
        if self._client is None:
            self._client = engine.docker_client()
        return self._client

    def render(self, experiment: Experiment, owner: str) -> dict[str, Any]:
        """The validated compose file of `experiment` as a mapping."""
        compose = render_compose(experiment, owner, self.compose_options)
        validate_compose(compose)
        return compose

    def plan(self, experiment: Experiment) -> str:
        """The compose file `launch` would run (for --dry-run; nothing is started)."""
        from symphony.records import current_owner

        project = project_name(experiment.name)
        header = (
            f"# compose project {project}; run with: docker compose -p {project} -f FILE up -d\n"
            f"# network mode: {self.compose_options.network}\n"
        )
        return header + yaml.safe_dump(self.render(experiment, current_owner()), sort_keys=False)

    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Writes the compose file into the record, records the images, and starts the project.

        A project of that name on the engine (another user's run, or one without a record
        here) refuses the launch (`LaunchRefused`) and is left as it is.
        """
        project = project_name(experiment.name)
        existing = engine.project_containers(self.client, project, role=None)
        if existing:
            owners = sorted({c.labels.get(OWNER_LABEL, "?") for c in existing})
            raise LaunchRefused(
                f"compose project {project!r} already has {len(existing)} container(s) on this "
                f"engine (owner {', '.join(owners)}), left as they are; launch under another "
                f"name (--name), or `symphony delete {experiment.name}` it if it is yours"
            )
        compose = self.render(experiment, record.owner)
        images = sorted(
            {image_of(experiment, p, self.compose_options) for p in experiment.processes()}
        )
        identities = {image: engine.image_identity(self.client, image) for image in images}
        compose_file = record.file(COMPOSE_FILE)
        compose_file.write_text(yaml.safe_dump(compose, sort_keys=False))
        command = engine.compose_command(self.options.get("compose_command"))
        record.logs = {}  # no log files while it runs: the containers hold the output
        record.data.update(
            {
                "project": project,
                "compose_file": str(compose_file),
                "compose_command": command,
                "network": self.compose_options.network,
                "images": identities,
                "launch_files": _save_launch_files(record),
            }
        )
        record.save()
        engine.run_compose(command, project, compose_file, "up", "-d", "--no-build")
        record.set_status("running")
        if not detach:
            self._attach(record)

    def _attach(self, record: ExperimentRecord) -> None:
        try:
            while any(p.state in ALIVE_STATES for p in self.describe(record).processes):
                time.sleep(0.5)  # polling the engine, not synchronizing
        except KeyboardInterrupt:
            self.delete(record)
            record.data["exit_code"] = 130
            record.set_status("stopped")
            return
        status = self.describe(record).status
        record.data["exit_code"] = 0 if status == "finished" else 1
        record.set_status(status)

    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """Each process's container state, exit code and restarts, found by the project label."""
        project = record.data.get("project", project_name(record.name))
        seen = {
            s.name: s
            for s in map(engine.process_status, engine.project_containers(self.client, project))
        }
        names = record.experiment().process_names() if record.spec else sorted(seen)
        interrupted = record.launch_interrupted()
        pending = record.status == "launching" and not interrupted
        processes = [
            seen.get(n) or ProcessStatus(n, PENDING if pending else STOPPED) for n in names
        ]
        return self.status_from_record(
            record,
            processes,
            project=project,
            images=record.data.get("images", {}),
            compose_file=record.data.get("compose_file"),
            **({"launch": _INTERRUPTED.format(name=record.name)} if interrupted else {}),
        )

    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """The container output of one process (stdout and stderr interleaved); once the
        containers are removed (the experiment was stopped), the copy `delete` kept."""
        project = record.data.get("project", project_name(record.name))
        try:
            container = engine.process_container(self.client, project, process)
        except BackendError:
            kept = record.log_path(process) if record.path is not None else None
            if kept is None or not kept.exists():
                raise
            return iter(read_lines(kept, tail))
        return engine.container_lines(container, follow, tail)

    def exec(self, record: ExperimentRecord, process: str, command: list[str]) -> int:
        """Runs `command` inside the process's running container."""
        project = record.data.get("project", project_name(record.name))
        return engine.exec_in(
            self.client, engine.process_container(self.client, project, process), command
        )

    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """Stops (SIGTERM, grace, SIGKILL) and removes every container and network of the project.

        Only the project this record launched (`record.data["project"]`): a record whose launch
        was refused or failed early names none, and nothing is touched.
        """
        project = record.data.get("project")
        if not project:
            return
        containers = engine.project_containers(self.client, project, role=None)
        grace = 0 if force else self.compose_options.stop_grace_s

        def stop(container: Any) -> None:
            if not force and container.status == "running":
                _tolerant(container, "stop", lambda: container.stop(timeout=grace))

        def remove(container: Any) -> None:
            _tolerant(container, "remove", lambda: container.remove(force=True))

        def stop_and_remove(container: Any) -> None:
            stop(container)
            remove(container)

        # the processes stop together (one grace period in all, not one each), their output is
        # kept, then they and the sandboxes that hold their namespaces go
        sandboxes = [c for c in containers if c.labels.get("io.symphony.role") == "sandbox"]
        processes = [c for c in containers if c not in sandboxes]
        _all(stop, processes)
        _keep_output(record, processes)
        _all(remove, processes)
        _all(stop_and_remove, sandboxes)
        for network in self.client.networks.list(
            filters={"label": f"{engine.PROJECT_LABEL}={project}"}
        ):
            network.remove()

    def list(self) -> list[ExperimentSummary]:
        """Recorded compose experiments, plus labelled containers of experiments with no record here."""
        summaries = super().list()
        known = {s.name for s in summaries}
        orphans: dict[str, list[Any]] = {}
        for container in self.client.containers.list(all=True, filters={"label": EXPERIMENT_LABEL}):
            name = container.labels[EXPERIMENT_LABEL]
            if name not in known and container.labels.get(PROCESS_LABEL):
                orphans.setdefault(name, []).append(container)
        for name, containers in sorted(orphans.items()):
            record = ExperimentRecord(
                name,
                self.name,
                containers[0].labels.get(OWNER_LABEL, "?"),
                created=min(_created(c) for c in containers),
                status="running",
                data={"project": containers[0].labels.get(engine.PROJECT_LABEL)},
            )
            summaries.append(self.describe(record).summary())
        return summaries


_INTERRUPTED = (
    "interrupted: its launcher stopped before `docker compose up` was done, and what it did "
    "not start never will; `symphony delete {name}` removes the rest"
)


def _all(fn: Any, items: list[Any]) -> None:
    """`fn(item)` for every item at once (threads); the first error is raised after all ran."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    for future in futures:
        future.result()


def _tolerant(container: Any, verb: str, action: Callable[[], object]) -> None:
    """`action()` on a container; one already gone (or going) is fine, else BackendError."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - already gone is fine
        if "No such container" not in str(exc) and "is already in progress" not in str(exc):
            raise BackendError(f"could not {verb} container {container.name}: {exc}") from exc


def _keep_output(record: ExperimentRecord, containers: list[Any]) -> None:
    """Each process's output (its newest container's) into the record's `logs/PROCESS.log`,
    where `logs` reads it once the containers are removed. A record without a folder (found
    through the engine's labels) keeps none."""
    if record.path is None:
        return
    newest: dict[str, Any] = {}
    for container in sorted(containers, key=lambda c: c.attrs.get("Created", "")):
        newest[container.labels.get(PROCESS_LABEL, container.name)] = container
    for process, container in newest.items():
        try:
            lines = list(engine.container_lines(container, follow=False, tail=None))
        except Exception:  # noqa: BLE001 - a container that is gone has no output to keep
            continue
        path = record.log_path(process)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines))


def _paths(value: Any) -> tuple[str, ...]:
    """The `env_file` option as absolute paths (one path, or a list of them)."""
    if not value:
        return ()
    values = [value] if isinstance(value, (str, Path)) else list(value)
    return tuple(str(Path(v).resolve()) for v in values)


def _created(container: Any) -> float:
    stamp = engine.docker_time(container.attrs.get("Created"))
    return stamp if stamp is not None else time.time()


def _save_launch_files(record: ExperimentRecord) -> list[str]:
    """Copies the files named on the launch command line (the launch script) into the record."""
    saved = []
    target = record.file("launch")
    for arg in record.launch_command[1:]:  # [0] is the program (symphony, python)
        path = Path(arg)
        if path.suffix in (".py", ".yaml", ".yml") and path.is_file():
            target.mkdir(exist_ok=True)
            shutil.copy2(path, target / path.name)
            saved.append(str(target / path.name))
    return saved
