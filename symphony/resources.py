"""What a process asks of its backend: Resources (requests, placement) and RestartPolicy (plain data)."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from symphony.errors import SpecError

RESTART_MODES = ("never", "on-failure", "always")
OUTSIDE_KILLS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
"""Signals that end a process from outside: deaths by them are not crashes (`counts`)."""


def outside_kill(exit_code: int | None) -> int | None:
    """The signal of OUTSIDE_KILLS that ended a process, from its exit code: a death by it
    (-9 from Popen) or an exit with 128 + its number, as a process that handles the signal
    reports it (143: stopped on SIGTERM, 130: on SIGINT); None otherwise."""
    if exit_code is None:
        return None
    number = -exit_code if exit_code < 0 else exit_code - 128
    return number if number in OUTSIDE_KILLS else None


def ending(exit_code: int | None) -> str:
    """How a process ended, in words: `exited with 1`, `killed by SIGKILL`, `stopped by
    SIGTERM, exit code 143`."""
    if exit_code is None:
        return "ended (exit code unknown)"
    if exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    if (sig := outside_kill(exit_code)) is not None:
        return f"stopped by {signal.Signals(sig).name}, exit code {exit_code}"
    return f"exited with {exit_code}"


def restart_mark(exit_code: int | None, attempt: int) -> str:
    """The line that opens a restarted process's new attempt in its log, below the ended one's
    lines: `--- restarted after signal 9 (attempt 2) ---`, `... after exit code 1 ...`,
    `... after exit code 143 (SIGTERM) ...`."""
    if exit_code is None:
        cause = "an unknown end"
    elif exit_code < 0:
        cause = f"signal {-exit_code}"
    else:
        sig = outside_kill(exit_code)
        cause = f"exit code {exit_code}" + ("" if sig is None else f" ({signal.Signals(sig).name})")
    return f"--- restarted after {cause} (attempt {attempt}) ---"


@dataclass
class Resources:
    """What a process asks for; backends that schedule (kube, slurm) turn it into requests.

    Attributes:
        cpu: CPU cores (fractions allowed).
        memory_gb: memory in GiB, or None for no request.
        gpu: whole GPUs.
        node_pool: name of a cloudwise node pool to run on, or None for any node.
    """

    cpu: float = 1
    memory_gb: float | None = None
    gpu: int = 0
    node_pool: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.cpu, (int, float)) or self.cpu <= 0:
            raise SpecError(f"cpu={self.cpu!r} must be a positive number of cores, e.g. cpu=1")
        if self.memory_gb is not None and (
            not isinstance(self.memory_gb, (int, float)) or self.memory_gb <= 0
        ):
            raise SpecError(
                f"memory_gb={self.memory_gb!r} must be positive, or None for no request"
            )
        if not isinstance(self.gpu, int) or self.gpu < 0:
            raise SpecError(f"gpu={self.gpu!r} must be a whole number >= 0")


@dataclass
class RestartPolicy:
    """When a backend restarts a process that ended.

    Attributes:
        mode: "never", "on-failure" (non-zero exit or killed by a signal) or "always".
        max_restarts: restarts allowed before the process is left failed (within `window_s`).
        backoff_s: delay before the first restart; doubles after each restart.
        max_backoff_s: the delay never grows past this.
        window_s: count only the restarts of the last `window_s` seconds against `max_restarts`
            (and for the backoff), so a process that crashes now and then over a long run keeps
            coming back while a crash loop still ends; None counts restarts for life. The local
            and tmux backends apply it; compose and kube have their own (lifetime) accounting.
        final_codes: exit codes after which the process is never restarted: it ended for a
            reason a restart cannot fix and said so (systemd's `RestartPreventExitStatus`).
            The local, tmux and in-process backends apply it; compose and kube restart such a
            process within `max_restarts`.
    """

    mode: str = "never"
    max_restarts: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    window_s: float | None = None
    final_codes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.final_codes = tuple(self.final_codes)  # a list read back from YAML or JSON
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in self.final_codes):
            raise SpecError(
                f"final_codes={self.final_codes!r} must be whole exit codes, e.g. (73,)"
            )
        if self.mode not in RESTART_MODES:
            raise SpecError(f"restart mode {self.mode!r} is unknown; use one of {RESTART_MODES}")
        if not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise SpecError(f"max_restarts={self.max_restarts!r} must be a whole number >= 0")
        if self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise SpecError(
                "need 0 <= backoff_s <= max_backoff_s, e.g. backoff_s=1, max_backoff_s=30"
            )
        if self.window_s is not None and (
            not isinstance(self.window_s, (int, float)) or not self.window_s > 0
        ):
            raise SpecError(
                f"window_s={self.window_s!r} must be a positive number of seconds, or None "
                "(count restarts for life)"
            )

    def should_restart(self, exit_code: int | None, restarts: int) -> bool:
        """Whether a process that ended with `exit_code` after `restarts` restarts (those
        within the window, see `counted`) comes back."""
        if restarts >= self.max_restarts or self.mode == "never":
            return False
        if exit_code in self.final_codes:
            return False
        return self.mode == "always" or exit_code != 0

    @staticmethod
    def counts(exit_code: int | None) -> bool:
        """Whether an end counts against `max_restarts` (and the window): a crash does (the
        process exited by itself, or died of its own fault: SIGSEGV, SIGABRT, ...); a kill from
        outside (SIGKILL, SIGTERM, SIGINT, SIGHUP: `kill -9`, a preempted node, the OOM killer;
        also an exit with 128 + the signal's number, a process that stopped on it: `outside_kill`)
        does not. A killed process comes back after the backoff however often it is killed,
        as Kubernetes brings back a Deployment's pods; a crash loop still ends."""
        return outside_kill(exit_code) is None

    def delay(self, restarts: int) -> float:
        """Seconds to wait before restart number `restarts + 1`."""
        return min(self.backoff_s * (2**restarts), self.max_backoff_s)

    def counted(self, restart_times: list[float], now: float) -> int:
        """How many of the restarts at `restart_times` count now (all of them without a window).

        Prunes `restart_times` (in place) to the ones inside the window.
        """
        if self.window_s is not None:
            restart_times[:] = [t for t in restart_times if now - t < self.window_s]
        return len(restart_times)
