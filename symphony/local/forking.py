"""The supervisor's side of fork servers (`symphony.local.forkserver`): which process forks from which
fork server, the fork servers' lives, and the fallback to Popen."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from symphony.local import proctree

SWITCH_ENV = "SYMPHONY_FORKSERVER"
"""`0` in the supervisor's environment: every process starts with Popen (the start-up before)."""
READY_TIMEOUT_S = 300.0
"""Seconds a fork server may take to import its modules before its processes start with Popen."""
REPLY_TIMEOUT_S = 30.0
"""Seconds a ready fork server may take to fork one process."""
STARTUP_PREFIXES = ("PYTHON", "LD_", "GLIBC_TUNABLES", "MALLOC_")
"""Variables read once when the interpreter or libc starts: they must match the fork server's."""
MESSAGE_BYTES = 1 << 20


def module_of(argv: list[str]) -> str | None:
    """MODULE of a `[this python, "-m", MODULE, ...]` command (None for any other command)."""
    if len(argv) < 3 or argv[1] != "-m" or not argv[2]:
        return None
    return argv[2] if os.path.abspath(argv[0]) == os.path.abspath(sys.executable) else None


def unavailable() -> str | None:
    """Why processes cannot fork here (None: they can)."""
    if os.environ.get(SWITCH_ENV, "1").strip() == "0":
        return f"{SWITCH_ENV}=0"
    if not sys.platform.startswith("linux") or not hasattr(socket, "send_fds"):
        return f"fork servers need Linux (this is {sys.platform})"
    return None


class ForkedChild:
    """A process forked by a fork server and adopted by this one (Popen's `pid`, `poll()`)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it ended (-N: killed by signal N), as Popen reports it."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by psutil while being stopped: Popen says 0 too
                self.returncode = 0
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class _Gone(Exception):
    """The fork server died or stopped answering."""


@dataclass
class _Server:
    """One fork server: its process, control socket and the processes that fork from it."""

    preload: list[str]
    members: list[str]
    popen: subprocess.Popen | None = None
    sock: socket.socket | None = None
    state: str = "starting"  # ready, failed, stopped
    started: float = field(default_factory=time.monotonic)

    def launch(self, env: dict[str, str], cwd: str, room: int, log: Any) -> None:
        """Start the server process (its argv leaves `room` bytes for its forks' command lines)
        and send it the modules to import."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        base = [sys.executable, "-m", "symphony.local.forkserver", str(theirs.fileno())]
        pad = max(1, room - len(cmdline(base)) - 1)  # its argv is the room for their cmdlines
        try:
            self.popen = subprocess.Popen(
                [*base, "." * pad],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
                preexec_fn=proctree.die_with_parent,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.sock.send(json.dumps({"preload": self.preload}).encode())

    def poll(self) -> str | None:
        """While starting: None, or why it failed (then it is stopped); else its state."""
        if self.state != "starting":
            return None
        if select.select([self.sock], [], [], 0)[0]:
            hello = receive(self.sock)
            if hello.get("ready"):
                self.state = "ready"
                return None
            return self.fail(hello.get("error") or "closed its socket")
        if self.popen.poll() is not None:
            return self.fail(f"exited with code {self.popen.returncode}")
        if time.monotonic() - self.started > READY_TIMEOUT_S:
            return self.fail(f"did not import its modules in {READY_TIMEOUT_S:g} s")
        return None

    def fork(self, module: str, argv: list[str], env: dict[str, str], cwd: str, log: int) -> int:
        """Ask for a fork running MODULE; its pid (an OSError as Popen raises one)."""
        request = {"module": module, "argv": argv, "env": env, "cwd": cwd}
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], [log])
            if not select.select([self.sock], [], [], REPLY_TIMEOUT_S)[0]:
                raise _Gone(f"did not fork in {REPLY_TIMEOUT_S:g} s")
            reply = receive(self.sock)
        except OSError as err:
            raise _Gone(f"lost ({err})") from err
        if "error" in reply:
            if reply.get("pid"):  # it ended at once; it is ours to reap
                os.waitpid(reply["pid"], 0)
            where = [reply["filename"]] if reply.get("filename") else []
            raise OSError(reply.get("errno") or 0, reply["error"], *where)
        if not reply.get("pid"):
            raise _Gone(reply.get("lost") or "closed its socket")
        return int(reply["pid"])

    def fail(self, reason: str) -> str:
        """Stop it for good (its processes start with Popen); returns `reason`."""
        self.close()
        self.state = "failed"
        return reason

    def close(self) -> None:
        """Stop it: it exits when its socket closes (one still importing is terminated)."""
        if self.sock is not None:
            self.sock.close()
        if self.popen is not None:
            if self.popen.poll() is None and self.state in ("starting", "failed"):
                self.popen.terminate()
            try:
                self.popen.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


class ForkServers:
    """The fork servers of one supervisor: which process forks from which, and the fallback.

    Args:
        note: writes one line into the supervisor's log.
        log_path: where the servers' own output goes (the supervisor's log).
    """

    def __init__(self, note: Callable[[str], None], log_path: str) -> None:
        self.note, self.log_path = note, log_path
        self.servers: list[_Server] = []
        self.server_of: dict[str, _Server] = {}
        self.sessions: set[int] = set()  # every process started: orphans of theirs are reaped
        self.adopting = False
        self.swept = 0.0

    def start(
        self, launches: list[tuple[str, list[str], dict[str, str], list[str]]], cwd: str
    ) -> None:
        """Start a fork server per distinct preload list of `(name, argv, env, preload)` (the
        processes with a preload and a `python -m` command), importing in `cwd`."""
        groups: dict[tuple[str, ...], list[tuple[str, list[str], dict[str, str]]]] = {}
        for name, argv, env, preload in launches:
            if preload and module_of(argv):
                groups.setdefault(tuple(preload), []).append((name, argv, env))
            elif preload:
                self.note(
                    f"{name} starts with Popen: its command is not `{sys.executable} -m MODULE`"
                )
        if not groups:
            return
        why = unavailable() or (None if proctree.set_subreaper(True) else "prctl failed")
        if why:
            names = [n for members in groups.values() for n, _, _ in members]
            self.note(f"fork server off ({why}): {', '.join(names)} start with Popen")
            return
        self.adopting = True
        with open(self.log_path, "ab") as log:
            for preload, members in groups.items():
                self._start_one(list(preload), members, cwd, log)

    def _start_one(self, preload: list[str], members: list, cwd: str, log: Any) -> None:
        shared = dict(members[0][2])
        for _, _, env in members[1:]:
            shared = {k: v for k, v in shared.items() if env.get(k) == v}
        startup = _startup_env(shared)
        fits = []
        for name, argv, env in members:
            differ = sorted(set(_startup_env(env).items()) ^ set(startup.items()))
            if differ:
                self.note(
                    f"{name} starts with Popen: {differ[0][0]} differs between the "
                    f"processes that preload {', '.join(preload)}"
                )
            else:
                fits.append((name, argv))
        if not fits:
            return
        server = _Server(preload, [name for name, _ in fits])
        try:
            server.launch(shared, cwd, max(len(cmdline(argv)) for _, argv in fits), log)
        except OSError as err:
            server.fail("")
            self.note(f"fork server ({', '.join(preload)}) did not start ({err}); {_popen(server)}")
            return
        self.servers.append(server)
        self.server_of.update({name: server for name in server.members})

    def waiting(self, name: str) -> bool:
        """Whether `name` waits for its fork server to finish importing."""
        server = self.server_of.get(name)
        return server is not None and server.state == "starting"

    def step(self, known: set[int]) -> None:
        """Notice fork servers that became ready, failed or died; reap adopted orphans."""
        for server in self.servers:
            if server.state == "starting":
                if (why := server.poll()) is not None:
                    self.note(f"fork server ({', '.join(server.preload)}) {why}; {_popen(server)}")
                elif server.state == "ready":
                    took = time.monotonic() - server.started
                    self.note(
                        f"fork server ready in {took:.1f} s (pid {server.popen.pid}, preloaded "
                        f"{', '.join(server.preload)}): {', '.join(server.members)} fork from it"
                    )
            elif server.state == "ready" and server.popen.poll() is not None:
                code = server.popen.returncode
                server.fail("")
                self.note(
                    f"fork server ({', '.join(server.preload)}) exited with code {code}; "
                    f"{_popen(server)}"
                )
        if self.adopting and time.monotonic() - self.swept >= 1.0:
            self.swept = time.monotonic()
            servers = {s.popen.pid for s in self.servers if s.popen is not None}
            proctree.reap_orphans(known | servers, self.sessions)

    def start_process(
        self, name: str, argv: list[str], env: dict[str, str], cwd: str, log: Any
    ) -> subprocess.Popen | ForkedChild:
        """Start `name` from its fork server when it has a ready one, else with Popen."""
        server = self.server_of.get(name)
        if server is not None and server.state == "ready":
            try:
                pid = server.fork(module_of(argv), argv, env, cwd, log.fileno())
            except _Gone as gone:
                server.fail(str(gone))
                self.note(f"fork server ({', '.join(server.preload)}) {gone}; {_popen(server)}")
            else:
                self.sessions.add(pid)
                return ForkedChild(pid)
        popen = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=proctree.die_with_parent,
        )
        self.sessions.add(popen.pid)
        return popen

    def describe(self) -> list[dict[str, Any]]:
        """What state.json records of each fork server."""
        return [
            {
                "pid": s.popen.pid if s.popen else None,
                "state": s.state,
                "preload": s.preload,
                "processes": s.members,
            }
            for s in self.servers
        ]

    def close(self, known: set[int] = frozenset()) -> None:
        """Stop the fork servers; stop adopting orphans (those left are reaped first)."""
        for server in self.servers:
            if server.state != "failed":
                server.state = "stopped"
            server.close()
        if self.adopting:
            proctree.reap_orphans(set(known), self.sessions)
            proctree.set_subreaper(False)
            self.adopting = False


def _popen(server: _Server) -> str:
    return f"{', '.join(server.members)} start with Popen"


def cmdline(argv: list[str]) -> bytes:
    """`argv` as `/proc/PID/cmdline` holds it."""
    return b"".join(os.fsencode(a) + b"\0" for a in argv)


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in env.items() if k.startswith(STARTUP_PREFIXES) and k != "PYTHONUNBUFFERED"
    }


def receive(sock: socket.socket) -> dict[str, Any]:
    """One JSON message ({} when the other end closed)."""
    data = sock.recv(MESSAGE_BYTES)
    return json.loads(data) if data else {}
