"""The address contract: SYMPH_* environment variables that tell each process where services are.

For every service a process binds or connects to, the backend sets (name upper-cased, `-` -> `_`):

    SYMPH_<NAME>_HOST   host to connect to (127.0.0.1 locally, a service name on compose/kube)
    SYMPH_<NAME>_PORT   port number
    SYMPH_<NAME>_ADDR   "host:port"

and for every process:

    SYMPH_EXPERIMENT    experiment name
    SYMPH_PROCESS       process name
    SYMPH_GROUP         process group name (the process's own name when it is alone)
    SYMPH_SERVICES      comma-separated services this process declared (binds + connects)
    SYMPH_BIND_HOST     host to bind on: "127.0.0.1" on local backends, "*" (all interfaces of
                        the pod/container) on the others

A process reads them with `symphony.address("replay")`, which never branches on the backend.

Backends build the env with `process_env(experiment, process, endpoints, bind_host)`, where
`endpoints` maps every bound service to an `Address`; `local_endpoints(experiment)` gives free
ports on 127.0.0.1 (local, tmux, test), `fixed_endpoints(experiment, host_for)` gives stable
ports on named hosts (compose, kube, slurm).
"""

from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from symphony.errors import AddressError, BackendError
from symphony.spec import Experiment, Process

LOCAL_HOST = "127.0.0.1"
DEFAULT_BASE_PORT = 7000


class Address(NamedTuple):
    """A resolved service address."""

    host: str
    port: int
    bind_host: str = "*"

    @property
    def addr(self) -> str:
        """ "host:port"."""
        return f"{self.host}:{self.port}"

    @property
    def tcp(self) -> str:
        """ZeroMQ endpoint to connect to: "tcp://host:port"."""
        return f"tcp://{self.host}:{self.port}"

    @property
    def bind_tcp(self) -> str:
        """ZeroMQ endpoint to bind: "tcp://*:port" (or "tcp://127.0.0.1:port" on local backends)."""
        return f"tcp://{self.bind_host}:{self.port}"

    def __str__(self) -> str:
        return self.addr


def env_prefix(service: str) -> str:
    """`SYMPH_<NAME>` for a service name ("replay-0" -> "SYMPH_REPLAY_0")."""
    return "SYMPH_" + service.upper().replace("-", "_")


def service_env(service: str, address: Address) -> dict[str, str]:
    """The three SYMPH_<NAME>_* variables for one service."""
    prefix = env_prefix(service)
    return {
        f"{prefix}_HOST": address.host,
        f"{prefix}_PORT": str(address.port),
        f"{prefix}_ADDR": address.addr,
    }


def process_env(
    experiment: Experiment,
    process: Process,
    endpoints: Mapping[str, Address | tuple[str, int]],
    bind_host: str = "*",
    group: str | None = None,
) -> dict[str, str]:
    """Every variable symphony sets for one process (its own `env` entries come last and win).

    Args:
        experiment: the (validated) experiment.
        process: one of its processes.
        endpoints: every bound service -> Address or (host, port).
        bind_host: what `Address.bind_tcp` binds on ("127.0.0.1" for local backends, "*" else).
        group: the process's group when the caller knows it (saves a search of the experiment).
    """
    env = {
        "SYMPH_EXPERIMENT": experiment.name,
        "SYMPH_PROCESS": process.name,
        "SYMPH_GROUP": group or experiment.group_of(process.name),
        "SYMPH_SERVICES": ",".join(process.services()),
        "SYMPH_BIND_HOST": bind_host,
    }
    for service in process.services():
        if service not in endpoints:
            raise BackendError(
                f"no endpoint for service {service!r}; the backend must map every bound service"
            )
        host, port = tuple(endpoints[service])[:2]
        env.update(service_env(service, Address(host, int(port))))
    env.update(process.env)
    return env


SERVICE_PORT_SPAN = 12_000
"""How many ports below the kernel's ephemeral range `free_port` chooses from."""


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's `ip_local_port_range`; 32768-60999 if unknown)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split()[:2])
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = LOCAL_HOST) -> int:
    """A TCP port that is free on `host` right now, chosen at random just below the kernel's
    ephemeral range.

    Ports handed out for port 0, and the local ports of outgoing connections, come from the
    ephemeral range: on a busy machine one of them can take a service's port between its choice
    here and its process's bind (the process then fails with EADDRINUSE). Below that range only
    another explicit choice can collide. Falls back to port 0 when that range is too narrow.
    """
    low = ephemeral_ports()[0]
    first = max(1024, low - SERVICE_PORT_SPAN)
    if low - first >= 1000:
        pick = random.SystemRandom()
        for _ in range(200):
            port = pick.randrange(first, low)
            if port_is_free(port, host) and _claim(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


CLAIM_S = 120.0
"""Seconds a port that `free_port` handed out stays off its choices on this machine."""


def _claim(port: int) -> bool:
    """Mark `port` handed out, machine-wide, for `CLAIM_S` seconds (a file per port in the
    temporary folder); False when another launch on this machine claimed it within that time.

    A chosen port is bound only once its process starts, seconds later: without the claim, two
    runs planned at the same time could both find the same port free and the second to bind
    would fail with EADDRINUSE. A claim that cannot be written counts as made."""
    folder = os.path.join(tempfile.gettempdir(), f"symphony-ports-{os.getuid()}")
    path = os.path.join(folder, str(port))
    try:
        os.makedirs(folder, exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            if time.time() - os.stat(path).st_mtime < CLAIM_S:
                return False
            os.utime(path)  # an old claim: this launch's now
            return True
        os.close(fd)
    except OSError:
        pass
    return True


def port_is_free(port: int, host: str = LOCAL_HOST) -> bool:
    """Whether `port` can be bound on `host` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def local_endpoints(experiment: Experiment, host: str = LOCAL_HOST) -> dict[str, Address]:
    """A distinct free port on `host` for every bound service (local, tmux, test backends)."""
    ports: dict[str, Address] = {}
    for service in experiment.services():
        port = free_port(host)
        while any(a.port == port for a in ports.values()):
            port = free_port(host)
        ports[service] = Address(host, port, bind_host=host)
    return ports


def verify_free(endpoints: Mapping[str, Address]) -> list[str]:
    """Services whose port is no longer free (the launcher re-allocates or fails on them)."""
    return [s for s, a in endpoints.items() if not port_is_free(a.port, a.host)]


def fixed_endpoints(
    experiment: Experiment,
    host_for: Callable[[str, str], str],
    base_port: int = DEFAULT_BASE_PORT,
    bind_host: str = "*",
) -> dict[str, Address]:
    """Stable ports from `base_port` up, hosts from `host_for(service, binder_process_name)`.

    Compose and kube give each service its own host name (a container or a Service), so ports may
    repeat across hosts; numbering them in declaration order keeps specs reproducible.
    """
    return {
        service: Address(host_for(service, binder), base_port + i, bind_host=bind_host)
        for i, (service, binder) in enumerate(experiment.services().items())
    }


def address(name: str, environ: Mapping[str, str] | None = None) -> Address:
    """The address of a service this process declared, read from SYMPH_* variables.

    Args:
        name: the service name as declared (`.binds("replay")` -> `address("replay")`).
        environ: the environment to read (default `os.environ`).

    Raises:
        AddressError: the process did not declare `name`, or is not running under symphony.
    """
    env = os.environ if environ is None else environ
    declared = [s for s in env.get("SYMPH_SERVICES", "").split(",") if s]
    who = env.get("SYMPH_PROCESS")
    prefix = env_prefix(name)
    if who is not None and name not in declared:
        raise AddressError(
            f"process {who!r} asked for service {name!r} but declared only {declared}; add "
            f"`.connects({name!r})` (or `.binds({name!r})`) to process {who!r} in the experiment"
        )
    if f"{prefix}_HOST" not in env or f"{prefix}_PORT" not in env:
        raise AddressError(
            f"{prefix}_HOST/{prefix}_PORT are not set: run this program through `symphony launch` "
            f"with a process that declares `.connects({name!r})` or `.binds({name!r})`, or set them"
        )
    return Address(
        env[f"{prefix}_HOST"], int(env[f"{prefix}_PORT"]), env.get("SYMPH_BIND_HOST", "*")
    )
