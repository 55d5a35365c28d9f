"""No silent waits: a process that waits on another says so, in its log and to the launcher.

A wait is on a peer (`param-server`, `learner`, `buffer`) for something (`no answer`: the peer
is silent; `no new parameters`, `no batch`: it answers, with nothing new). Once a wait has lasted
`WAIT_SAY_S` seconds, the process's log gets one line naming it (and one when it ends), and its
reports to the metrics sink carry it (`waiting`), at least every `WAIT_REPORT_S` seconds while it
lasts: the sink keeps the run's waits in `status.json` (`waits`), and `surreal launch`'s progress
line names the one that explains the others (`waiting for param-server: no answer for 35 s`;
`surreal.launch.progress`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

WAIT_SAY_S = 20.0
"""A wait this long is said: a log line, and in the process's reports."""
WAIT_REPORT_S = 2.0
"""While a said wait lasts, a report carries it at least this often."""
SILENT = "no answer"
"""What a wait on a peer that does not answer at all is for (the launcher shows these first)."""


class Waits:
    """This process's waits (see the module docstring).

    Args:
        log: the process's logger.
        send: sends a report that only carries the waits (`Component.report_waits`).
        clock: seconds, monotonic.
    """

    def __init__(
        self, log: Any, send: Callable[[], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log, self.send, self.clock = log, send, clock
        self.current: dict[str, tuple[str, float]] = {}
        """peer -> (what, when the wait began)."""
        self.said: set[str] = set()
        self.sent = float("-inf")

    def waiting(self, peer: str, what: str, seconds: float | None = None) -> None:
        """This process is waiting on `peer` for `what` (`seconds` so far; None: since the
        first call for this peer and `what`)."""
        now = self.clock()
        began = now - seconds if seconds is not None else None
        held = self.current.get(peer)
        if held is None or held[0] != what:
            self.current[peer] = (what, began if began is not None else now)
        elif began is not None:
            self.current[peer] = (what, began)
        what, began = self.current[peer]
        if now - began < WAIT_SAY_S:
            return
        if peer not in self.said:
            self.said.add(peer)
            self.log.warning("waiting for %s: %s for %.0f s", peer, what, now - began)
        if now - self.sent >= WAIT_REPORT_S:
            self.sent = now
            self.send()

    def over(self, peer: str) -> None:
        """The wait on `peer` ended (it answered, or sent what was awaited)."""
        held = self.current.pop(peer, None)
        if held is None or peer not in self.said:
            return
        self.said.discard(peer)
        self.log.info("%s again after %.0f s of %s", peer, self.clock() - held[1], held[0])
        self.sent = self.clock()
        self.send()

    def field(self) -> dict[str, Any]:
        """What a report carries: the longest said wait as {"for", "what", "s"}, or {}."""
        now = self.clock()
        said = [(now - began, peer, what) for peer, (what, began) in self.current.items()]
        said = [w for w in said if w[0] >= WAIT_SAY_S]
        if not said:
            return {}
        seconds, peer, what = max(said, key=lambda w: (w[2] == SILENT, w[0]))
        return {"for": peer, "what": what, "s": round(seconds, 1)}


def describe(wait: dict[str, Any], seconds: float | None = None) -> str:
    """`param-server: no answer for 35 s` (what a process is waiting for)."""
    s = wait.get("s", 0.0) if seconds is None else seconds
    return f"{wait.get('for')}: {wait.get('what')} for {s:.0f} s"


def pick(waits: dict[str, dict[str, Any]], now: float, fresh_s: float = 15.0) -> str | None:
    """The wait the launcher names (`param-server: no answer for 35 s (actor-0, actor-1)`), from
    `status.json`'s `waits` ({process: {"for", "what", "s", "time"}}, `time` in epoch seconds
    like `now`): among those reported within `fresh_s` seconds, a silent peer's first (the
    others often wait because of it), then the longest, with its waiters. None: nothing waits."""
    live = {
        proc: w
        for proc, w in waits.items()
        if isinstance(w, dict) and w.get("for") and now - float(w.get("time", 0)) <= fresh_s
    }
    if not live:
        return None

    def seconds(w: dict[str, Any]) -> float:
        return float(w.get("s", 0.0)) + max(0.0, now - float(w.get("time", now)))

    top = max(live.values(), key=lambda w: (w.get("what") == SILENT, seconds(w)))
    waiters = sorted(
        p for p, w in live.items() if (w["for"], w.get("what")) == (top["for"], top.get("what"))
    )
    who = ", ".join(waiters[:3]) + (f" and {len(waiters) - 3} more" if len(waiters) > 3 else "")
    return f"{describe(top, seconds(top))} ({who})"
