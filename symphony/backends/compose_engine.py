"""The compose backend's contact with docker: the compose CLI to start, the SDK to inspect by labels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from symphony.backends.base import (
    EXITED,
    FAILED,
    PENDING,
    RESTARTING,
    RUNNING,
    UNKNOWN,
    ProcessStatus,
)
from symphony.backends.compose_render import GROUP_LABEL, PROCESS_LABEL, ROLE_LABEL
from symphony.errors import BackendError

PROJECT_LABEL = "com.docker.compose.project"


def docker_client() -> Any:
    """A docker SDK client for DOCKER_HOST, or BackendError saying how to get an engine."""
    try:
        import docker
    except ImportError as exc:
        raise BackendError(
            "symphony build and the compose backend need the docker SDK; "
            "pip install 'surreal-stack[docker]'"
        ) from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine reads the same
        raise BackendError(
            f"no docker engine answers ({exc}); start one or set DOCKER_HOST "
            "(scripts/dockerd-up.sh starts a private one)"
        ) from exc
    return client


def compose_command(preferred: str | None = None) -> list[str]:
    """`docker compose` when the plugin is there, else `docker-compose`, else a clear error.

    Args:
        preferred: a command line to use as is (option `compose_command` or env
            SYMPHONY_COMPOSE_COMMAND), e.g. "docker-compose".
    """
    chosen = preferred or os.environ.get("SYMPHONY_COMPOSE_COMMAND")
    if chosen:
        return chosen.split()
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise BackendError(
        "neither `docker compose` nor `docker-compose` is installed; install the "
        "compose plugin or `apt-get install docker-compose`"
    )


def run_compose(
    command: list[str], project: str, compose_file: Path, *args: str, timeout: float = 300
) -> str:
    """Runs `COMMAND -p PROJECT -f FILE ARGS...`; returns its output or raises with it."""
    argv = [*command, "-p", project, "-f", str(compose_file), *args]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, cwd=compose_file.parent
        )
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"`{' '.join(argv)}` did not finish in {timeout:.0f}s") from exc
    if done.returncode != 0:
        raise BackendError(
            f"`{' '.join(argv)}` failed (exit {done.returncode}):\n"
            f"{(done.stderr or done.stdout).strip()[-3000:]}"
        )
    return done.stdout + done.stderr


def project_containers(client: Any, project: str, role: str | None = "process") -> list[Any]:
    """Every container of a compose project (all states), optionally only one role."""
    labels = [f"{PROJECT_LABEL}={project}"] + ([f"{ROLE_LABEL}={role}"] if role else [])
    return client.containers.list(all=True, filters={"label": labels})


def process_container(client: Any, project: str, process: str) -> Any:
    """The newest container of one process, or BackendError naming the known processes."""
    found = [
        c for c in project_containers(client, project) if c.labels.get(PROCESS_LABEL) == process
    ]
    if not found:
        raise BackendError(
            f"no container for process {process!r} in compose project {project!r}; "
            "check `symphony describe` (was the experiment deleted?)"
        )
    return max(found, key=lambda c: c.attrs.get("Created", ""))


def process_status(container: Any) -> ProcessStatus:
    """A ProcessStatus from a container's inspect data."""
    state = container.attrs.get("State", {})
    status = state.get("Status", "")
    code = state.get("ExitCode")
    if status == "running":
        name = RUNNING
    elif status == "restarting":
        name = RESTARTING
    elif status == "created":
        name = PENDING
    elif status in ("exited", "dead"):
        name = EXITED if code == 0 else FAILED
    else:
        name = UNKNOWN
    ended = status in ("exited", "dead")
    return ProcessStatus(
        name=container.labels.get(PROCESS_LABEL, container.name),
        state=name,
        group=container.labels.get(GROUP_LABEL),
        restarts=int(container.attrs.get("RestartCount") or 0),
        pid=state.get("Pid") or None,
        location=f"container {container.name}",
        started=docker_time(state.get("StartedAt")),
        ended=docker_time(state.get("FinishedAt")) if ended else None,
        exit_code=code if ended else None,
    )


def docker_time(text: str | None) -> float | None:
    """Epoch seconds from docker's UTC times like 2026-01-02T03:04:05.123456789Z ("0001-..": never)."""
    if not text or text.startswith("0001-"):
        return None
    try:
        base = datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    frac = text[20:].rstrip("Z") if text[19:20] == "." else ""
    return base.timestamp() + (float(f"0.{frac}") if frac.isdigit() else 0.0)


def container_lines(container: Any, follow: bool, tail: int | None) -> Iterator[str]:
    """A container's output (stdout and stderr) as lines ending in a newline."""
    kwargs = {"stdout": True, "stderr": True, "tail": tail if tail is not None else "all"}
    if not follow:
        text = container.logs(**kwargs).decode(errors="replace")
        yield from (line if line.endswith("\n") else line + "\n" for line in text.splitlines(True))
        return
    pending = ""
    for chunk in container.logs(stream=True, follow=True, **kwargs):
        pending += chunk.decode(errors="replace")
        *lines, pending = pending.split("\n")
        for line in lines:
            yield line + "\n"
    if pending:
        yield pending + "\n"


def exec_in(client: Any, container: Any, command: list[str]) -> int:
    """Runs `command` inside a running container, copying its output here; returns its exit code."""
    container.reload()
    if container.status != "running":
        raise BackendError(
            f"container {container.name} is {container.status}, not running; "
            "exec needs a running process"
        )
    exec_id = client.api.exec_create(container.id, command, stdout=True, stderr=True)["Id"]
    for chunk in client.api.exec_start(exec_id, stream=True):
        sys.stdout.write(chunk.decode(errors="replace"))
        sys.stdout.flush()
    return int(client.api.exec_inspect(exec_id).get("ExitCode") or 0)


def image_identity(client: Any, image: str) -> dict[str, Any]:
    """The id and registry digests of a local image; BackendError if it is not there."""
    try:
        found = client.images.get(image)
    except Exception as exc:  # noqa: BLE001 - docker.errors.ImageNotFound and API errors alike
        raise BackendError(
            f"image {image!r} is not on this docker engine; build it with "
            "`symphony build` (or `docker pull` it) first"
        ) from exc
    return {"id": found.id, "digests": list(found.attrs.get("RepoDigests") or [])}
