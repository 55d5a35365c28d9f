"""Find and stop whole process trees: SIGTERM, a grace period, then SIGKILL; no orphan survives.

Every process symphony starts on this machine carries `SYMPHONY_RUN_ID=<id>` in its environment,
and so do its children (they inherit it). Stopping an experiment gathers each started process,
its descendants, its process group, and every process in the table still carrying the run id (so
a child that double-forked away from its parent is found too).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable

import psutil

RUN_ID_ENV = "SYMPHONY_RUN_ID"
REST_GRACE_S = 5.0
"""Seconds a process gets after SIGTERM once the root of its tree has stopped (`stop_all`)."""


def die_with_parent() -> None:
    """`preexec_fn`: the child gets SIGTERM when the thread that started it dies (Linux only).

    So a supervisor or runner killed with SIGKILL does not leave its command running unseen,
    and the command can still stop cleanly (a learner writes its checkpoint, sockets and
    shared memory are released) as it does when the supervisor stops it. A command that
    ignores SIGTERM outlives its dead supervisor: `symphony delete` sweeps it by its run id.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def set_subreaper(on: bool) -> bool:
    """Make this process adopt the orphans among its descendants (`PR_SET_CHILD_SUBREAPER`, Linux
    only), as init would: the local supervisor, so that the processes a fork server forks for
    it are its children. Returns whether the setting took."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(known: set[int], sessions: set[int]) -> None:
    """Reap this process's ended children that it adopted as a subreaper: zombies not in
    `known` (those it waits for itself) whose session is one of `sessions` (children that a
    caller of the same process started, and waits for, stay untouched)."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        try:
            if child.pid in known or child.status() != psutil.STATUS_ZOMBIE:
                continue
            if os.getsid(child.pid) in sessions:
                os.waitpid(child.pid, os.WNOHANG)
        except (OSError, psutil.Error):
            continue


def alive(pid: int | None, create_time: float | None = None) -> bool:
    """Whether `pid` runs (and, given `create_time`, is the same process, not a reused pid)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) < 0.5
    except psutil.Error:
        return False


def create_time(pid: int) -> float | None:
    """The start time psutil reports for `pid` (None if it is gone)."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def marked(run_id: str) -> list[psutil.Process]:
    """Every live process whose environment carries SYMPHONY_RUN_ID=`run_id`."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(RUN_ID_ENV) == run_id:
                found.append(proc)
        except psutil.Error:
            continue  # gone, a zombie, or another user's process
    return found


def tree(pid: int) -> list[psutil.Process]:
    """`pid`, its descendants, and the members of its process group (if it leads one)."""
    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        procs[pid] = root
        procs.update({c.pid: c for c in root.children(recursive=True)})
    except psutil.Error:
        pass
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and os.getpgid(proc.pid) == pid:
                procs[proc.pid] = proc
        except (OSError, psutil.Error):
            continue
    return list(procs.values())


def gather(pids: Iterable[int], run_id: str | None = None) -> list[psutil.Process]:
    """The trees of `pids` plus every process marked with `run_id`, without duplicates."""
    procs: dict[int, psutil.Process] = {}
    for pid in pids:
        procs.update({p.pid: p for p in tree(pid)})
    if run_id:
        procs.update({p.pid: p for p in marked(run_id)})
    procs.pop(os.getpid(), None)
    return list(procs.values())


def terminate(procs: list[psutil.Process], grace_s: float = 5.0) -> list[psutil.Process]:
    """SIGTERM every process, wait up to `grace_s`, SIGKILL the rest; return any still alive."""
    for sig, timeout in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for proc in procs:
            try:
                proc.send_signal(sig)
            except psutil.Error:
                continue
        _, procs = psutil.wait_procs(procs, timeout=timeout)
        procs = [p for p in procs if alive(p.pid)]
        if not procs:
            break
    return procs


def stop_all(
    pids: Iterable[int], run_id: str | None = None, grace_s: float = 5.0
) -> list[psutil.Process]:
    """Stop the trees of `pids` and everything marked `run_id`; sweeps again for late children.

    The roots (`pids`) get SIGTERM first and the grace period to stop their own children (a
    service they started, worker processes), as `docker stop` signals only a container's main
    process; what is left of their trees then gets SIGTERM, at most `REST_GRACE_S`, SIGKILL.
    Signalling the whole tree at once would kill such a child before its parent has used it to
    finish (e.g. the W&B service a metrics process still writes its last rows through).
    """
    pids = list(pids)
    procs = gather(pids, run_id)
    roots = [p for p in procs if p.pid in pids]
    rest = [p for p in procs if p.pid not in pids]
    left = terminate(roots, grace_s) if roots else []
    if roots:
        rest = [p for p in rest if alive(p.pid)]
    left += terminate(rest, min(grace_s, REST_GRACE_S) if roots else grace_s)
    late = gather([], run_id)  # started by a dying parent after the first sweep
    return left + terminate(late, 0.0 if grace_s == 0 else 1.0) if late else left
