"""Fork servers: local processes start as forks of one process that imported their modules once.

A process that declares `Process.preload` and whose command is `<this python> -m MODULE ARGS...`
is not started with `subprocess.Popen`: the supervisor starts one fork server per distinct
preload list (`python -m symphony.local.forkserver`), which imports the modules once, and asks it to
fork each such process. The fork sets up exactly what Popen did (a new session, stdin from
/dev/null, stdout and stderr into the log file, the process's environment and working directory,
SIGTERM when the supervisor dies) and runs MODULE as `__main__` with `runpy`, its command line
shown in `/proc/PID/cmdline` (so `ps` and psutil see the process's own command). The children
share the server's pages: each one's PSS stays well below its RSS, and none imports again.

The supervisor stays the parent of every process, for reaping, exit codes, restarts and
signals: it is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`) and the fork server forks
twice, so the process is adopted by the supervisor, which waits for it as for a Popen child
(`ForkedChild` has Popen's `pid` and `poll()`). The fork waits until it is adopted before it
asks for SIGTERM at its parent's death and runs.

The server imports under the environment its processes share (every variable they all set to
the same value) and refuses to fork if importing started a thread (forking a threaded process
is unsafe): set the variables that keep libraries from starting threads at import (e.g.
`OMP_NUM_THREADS=1`) in those processes' env, and thread counts in code after the start.
What a library reads once when it loads (OMP_NUM_THREADS, the hash seed, LD_*) is the fork
server's in every fork: a process whose PYTHON*/LD_*/MALLOC_* variables differ from the server's
starts with Popen. `/proc/PID/environ` shows the fork server's environment (`os.environ` is the
process's own). Modules' global state is shared as at the fork (numpy's global random state:
seed each process, as `random` is reseeded by Python).

Anything else starts with Popen: a process without `preload` or not `python -m`; all of them
with SYMPHONY_FORKSERVER=0 or off Linux; a fork server that cannot import its modules, starts
threads, does not answer or dies (one line in the supervisor's log says so).
"""

from __future__ import annotations

import ctypes
import errno
import gc
import importlib
import json
import os
import runpy
import socket
import sys
from pathlib import Path
from typing import Any

from symphony.local import proctree
from symphony.local.forking import MESSAGE_BYTES, cmdline, receive


def serve(fd: int) -> dict[str, Any] | None:
    """Import the preload list, then fork on request; returns only in a fork (its request)."""
    sock = socket.socket(fileno=fd)
    hello = receive(sock)
    set_title([sys.executable, "-m", "symphony.local.forkserver", str(fd)])
    for name in hello.get("preload", []):
        try:
            importlib.import_module(name)
        except BaseException as err:  # noqa: BLE001 - any failure: its processes use Popen
            _send(sock, {"error": f"cannot import {name!r} ({type(err).__name__}: {err})"})
            return None
    threads = _threads()
    if len(threads) > 1:
        _send(
            sock,
            {
                "error": f"importing its modules started {len(threads) - 1} thread(s) "
                f"({', '.join(threads[1:])}); forking now would be unsafe: set what keeps "
                f"them from starting (e.g. OMP_NUM_THREADS=1) in these processes' env"
            },
        )
        return None
    gc.collect()
    gc.freeze()  # the collector never writes to the shared objects: fewer copied pages
    _send(sock, {"ready": True, "pid": os.getpid()})
    supervisor, home = os.getppid(), os.getcwd()
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 1)
        except OSError:
            return None
        if not data:
            return None  # the supervisor closed its end (or is gone)
        request = json.loads(data)
        request.update(supervisor=supervisor, home=home)
        try:
            if _fork(sock, request, fds[0]):
                return request
        except OSError as err:  # no fork: as Popen would raise
            _send(sock, {"error": err.strerror or str(err), "errno": err.errno or 0})
        finally:
            if fds:
                os.close(fds[0])


def _fork(sock: socket.socket, request: dict[str, Any], log: int) -> bool:
    """Fork twice for `request`: True in the grandchild (set up, adopted by the supervisor);
    False here, once the supervisor has its pid or the error that ended it."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid_r, pid_w = os.pipe()
    go_r, go_w = os.pipe()
    err_r, err_w = os.pipe()
    middle = os.fork()
    if middle == 0:  # forks the process, says its pid and exits, so the process is adopted
        pid = -1
        try:
            pid = os.fork()
            if pid == 0:
                for fd in (pid_r, pid_w, go_w, err_r):
                    os.close(fd)
                _become(sock, request, log, go_r, err_w)
                return True
            os.write(pid_w, str(pid).encode())
        finally:
            if pid != 0:
                os._exit(0)
    for fd in (pid_w, go_r, err_w):
        os.close(fd)
    try:
        pid = int(os.read(pid_r, 32) or 0)
        os.waitpid(middle, 0)  # it has exited: the process is the supervisor's child now
        if not pid:
            _send(sock, {"error": "could not fork", "errno": errno.EAGAIN})
            return False
        try:
            os.write(go_w, b"g")
        except OSError:
            pass  # it failed before waiting: its error says why
        os.close(go_w)
        go_w = -1
        error = b"".join(iter(lambda: os.read(err_r, 65536), b""))
    finally:
        for fd in (pid_r, go_w, err_r):
            if fd >= 0:
                os.close(fd)
    _send(sock, {"pid": pid, **(json.loads(error) if error else {})})
    return False


def _become(sock: socket.socket, request: dict[str, Any], log: int, go: int, err: int) -> None:
    """In the fork: what Popen sets up; then wait to be adopted, ask for SIGTERM at the
    supervisor's death and show the process's command line. A failure is written to `err`."""
    try:
        sock.close()
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if sys.path and sys.path[0] == request["home"]:  # `python -m`: the working directory
            sys.path[0] = os.getcwd()
        if os.read(go, 1) != b"g":
            os._exit(1)  # the fork server went away
        os.close(go)
        proctree.die_with_parent()
        if os.getppid() != request["supervisor"]:
            raise OSError(errno.ESRCH, "its supervisor is gone")
        set_title(request["argv"])
        os.close(err)
    except BaseException as error:  # noqa: BLE001 - reported as Popen's OSError would be
        report = {
            "error": getattr(error, "strerror", None) or str(error),
            "errno": getattr(error, "errno", None) or 0,
            "filename": getattr(error, "filename", None),
        }
        os.write(err, json.dumps(report).encode())
        os._exit(127)


def set_title(argv: list[str]) -> bool:
    """Show `argv` as this process's command line (`/proc/self/cmdline`, `ps`): written over
    the memory of its own arguments, NUL-padded; False when it does not fit there."""
    fields = Path("/proc/self/stat").read_bytes().rsplit(b")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
    data = cmdline(argv)
    if len(data) > end - start:
        return False
    ctypes.memmove(start, data.ljust(end - start, b"\0"), end - start)
    return True


def _threads() -> list[str]:
    """The names of this process's threads, the main one first."""
    tids = sorted(os.listdir("/proc/self/task"), key=lambda t: (int(t) != os.getpid(), int(t)))
    names = []
    for tid in tids:
        try:
            names.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:
            continue
    return names


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def main(argv: list[str]) -> int:
    """`python -m symphony.local.forkserver FD PAD`: serve; in a fork, run its module as `__main__`."""
    request = serve(int(argv[0]))
    if request is None:
        return 0
    sys.argv = [request["module"], *request["argv"][3:]]  # runpy sets argv[0] to its file
    sys.orig_argv = list(request["argv"])
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
