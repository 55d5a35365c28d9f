"""A private docker engine for tests (scripts/dockerd-up.sh) and the local base images they use.

The engine starts once per test session (about a second), whichever docker test module asks
first, and stops when the session ends. Base images are made with scripts/make-base-image.sh
and cached in the engine's persistent data-root, so only the first run builds them. A test that
cannot get an engine fails with the reason: CI installs docker (scripts/install-system-deps.sh).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[2]
UP, DOWN = ROOT / "scripts" / "dockerd-up.sh", ROOT / "scripts" / "dockerd-down.sh"
MAKE_BASE = ROOT / "scripts" / "make-base-image.sh"
BUSYBOX = "symphony-base/busybox:latest"
# What a container needs to import symphony (the Dockerfile tests); the ring needs the stdlib only.
PYTHON_PACKAGES = ("yaml", "click", "numpy", "psutil")


class DockerEngine:
    """One dockerd on its own socket; `env` holds DOCKER_HOST for clients."""

    _shared: DockerEngine | None = None

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.client: Any = None

    @classmethod
    def shared(cls, config: pytest.Config) -> DockerEngine:
        """The session's engine, started on first use and stopped when pytest finishes."""
        if cls._shared is None:
            engine = cls().start()
            cls._shared = engine
            config.add_cleanup(engine.stop)
        return cls._shared

    def start(self) -> DockerEngine:
        out = subprocess.run(["bash", str(UP)], capture_output=True, text=True, timeout=scaled(120))
        if out.returncode != 0:
            pytest.fail(
                f"scripts/dockerd-up.sh failed (install the engine with "
                f"scripts/install-system-deps.sh, run as root):\n{out.stderr}",
                pytrace=False,
            )
        for line in out.stdout.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            self.env[key] = value
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        import docker

        self.client = docker.DockerClient(base_url=self.env["DOCKER_HOST"])
        return self

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        out = subprocess.run(
            ["bash", str(DOWN), self.env["SYMPHONY_DOCKERD_DIR"]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        DockerEngine._shared = None
        if out.returncode != 0:
            raise RuntimeError(f"scripts/dockerd-down.sh failed:\n{out.stderr}")

    def ensure_image(self, kind: str, tag: str, timeout: float = 300, **env: str) -> str:
        """`tag`, made by make-base-image.sh KIND if the engine does not have it yet."""
        import docker

        try:
            self.client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        out = subprocess.run(
            ["bash", str(MAKE_BASE), kind, tag],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **env},
        )
        if out.returncode != 0:
            pytest.fail(f"make-base-image.sh {kind} failed:\n{out.stderr}", pytrace=False)
        return tag


def python_image_tag() -> str:
    """A tag that changes with this Python, the package list and the script (no stale cache)."""
    key = hashlib.sha256(f"{sys.version}{PYTHON_PACKAGES}".encode() + MAKE_BASE.read_bytes())
    return f"symphony-base/python:{sys.version_info.major}.{sys.version_info.minor}-{key.hexdigest()[:10]}"


@pytest.fixture
def docker_engine(request: pytest.FixtureRequest) -> DockerEngine:
    """The session's private engine (DOCKER_HOST is set in os.environ while it runs)."""
    return DockerEngine.shared(request.config)


@pytest.fixture
def busybox_image(docker_engine: DockerEngine) -> str:
    """A 2 MB busybox image (sh and coreutils), imported locally."""
    return docker_engine.ensure_image("busybox", BUSYBOX)


@pytest.fixture
def python_image(docker_engine: DockerEngine) -> str:
    """This machine's Python with PYTHON_PACKAGES, imported locally (~10 s the first time)."""
    return docker_engine.ensure_image(
        "python", python_image_tag(), PYTHON=sys.executable, PY_PACKAGES=" ".join(PYTHON_PACKAGES)
    )
