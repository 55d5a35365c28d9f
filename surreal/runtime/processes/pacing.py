"""How far an actor may run ahead of the learner (`actor.max_ahead`), counted over live actors.

PPO learns from segments collected by recent parameters. Each batch takes `per_batch` segments,
so with L actors alive each one owes the learner `per_batch / L` segments per parameter version.
An actor holds that as credit (a token bucket): every new version adds `per_batch / L`, every
segment sent spends one, and the actor waits for a newer version while its credit is negative.
The bucket holds about `max_ahead + 1` versions' worth (`Pacer.cap`), so an actor that was stopped
for a while does not flood the buffer with a burst when it comes back.

L is the number of actors that asked the parameter server lately (`LiveActors`, counted by the
server and sent with every reply), not `run.actors`: when some actors stop, stall or restart,
the others take over their share once the server stops counting them (a few of their request
intervals). Until then, and whenever segments are lost on the way, the learner would wait for
segments that no actor may send: the parameter server sees no version for a few usual
intervals while actors wait, counts a stall, and each actor takes a stall as one version's
credit (`surreal.runtime.processes.param_server`). (An equal share of `run.actors` made every live actor
wait for versions the learner could not reach without the stopped ones: 10% of actors stopped
cut PPO's updates to a quarter in bench/scale.py.)

A new actor paces on `run.actors` for its first `WARMUP_S` seconds and only then on the server's
count: in a run's first seconds most actors have not asked yet, so the server counts 1 or 2. One
stall seen with such a count gave each of 8 CartPole actors the credit of 8 (7 segments instead
of 0.5): 21 segments, 5 batches, lay in the buffer before the first update, and since the actors
then send exactly what the learner takes, that backlog stayed all run long, a policy lag of 8
versions under which PPO stalled near 200 (1 of 15 seeds here, and a CI run).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

WARMUP_S = 5.0
"""Seconds a new actor paces on `run.actors` before it trusts the server's live count."""


class Pacer:
    """One actor's credit of segments; see the module docstring.

    Args:
        per_batch: segments per learner batch.
        actors: the run's actor count, used until the server says how many are alive.
        max_ahead: versions' worth of segments an actor may send ahead (`actor.max_ahead`).
        version: the parameter version the actor holds when it starts.
        clock: seconds, monotonic (for `WARMUP_S`).
    """

    def __init__(
        self,
        per_batch: int,
        actors: int,
        max_ahead: int,
        version: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_batch, self.actors, self.max_ahead = per_batch, max(1, actors), max_ahead
        self.version, self.clock = version, clock
        self.started = clock()
        self.live = self.actors
        self.stalls: int | None = None
        self.credit = self.cap()

    def share(self) -> float:
        """Segments per version that this actor owes the learner."""
        return self.per_batch / max(1, self.live)

    def cap(self) -> float:
        """The most credit held: by version v an actor that started at version v0 may have sent
        `(v - v0 + max_ahead + 1) x share` segments (at least one more than its credit)."""
        share = self.share()
        return max((self.max_ahead + 1) * share - 1.0, self.max_ahead * share)

    def sent(self) -> None:
        """One segment went to the buffer."""
        self.credit -= 1.0

    def observe(self, version: int, live: int | None = None, stalls: int | None = None) -> None:
        """The parameter server holds `version`, says `live` actors asked it lately, and has
        counted `stalls` stalls (each one is worth a version of credit)."""
        if live and self.clock() - self.started >= WARMUP_S:
            self.live = live
        versions = max(0, version - self.version)
        if stalls is not None:
            if self.stalls is not None and stalls > self.stalls:
                versions += stalls - self.stalls
            self.stalls = stalls
        self.version = max(self.version, version)
        if versions:
            self.credit = min(self.credit + versions * self.share(), self.cap())

    def ahead(self) -> bool:
        """True: wait for a newer version before the next segment."""
        return self.credit < 0.0

    def wanted_version(self) -> int:
        """The version whose arrival gives this actor credit for its next segment."""
        if not self.ahead():
            return self.version
        return self.version + max(1, math.ceil(-self.credit / self.share() - 1e-9))

    def restart(self, version: int) -> None:
        """Pace afresh from `version` (the wait was given up: segments were lost on the way)."""
        self.version, self.credit = version, 0.0


class LiveActors:
    """The actors that asked lately: each is alive while its silence stays under
    `max(min_s, 4 x its usual gap between requests)`, so a stopped actor drops out within a few
    of its own request intervals. Memory is one entry per actor id (at most `max_ids`; past that
    new ids are refused until old ones fall silent); `count()` is recomputed at most every
    `recount_s`, so a request costs O(1).
    """

    def __init__(
        self,
        min_s: float = 1.0,
        max_ids: int = 1 << 16,
        recount_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_s, self.max_ids, self.recount_s, self.clock = min_s, max_ids, recount_s, clock
        self.last: dict[int, float] = {}
        self.gap: dict[int, float] = {}
        self._counted, self._count = -math.inf, 0

    def seen(self, actor: int) -> bool:
        """Note a request from `actor`; False: refused (too many ids)."""
        now = self.clock()
        before = self.last.get(actor)
        if before is None:
            if len(self.last) >= self.max_ids:
                self._forget_silent(now)
                if len(self.last) >= self.max_ids:
                    return False
            self.gap[actor] = self.min_s / 4
        else:
            self.gap[actor] = min(0.8 * self.gap[actor] + 0.2 * (now - before), 60.0)
        self.last[actor] = now
        return True

    def alive(self, actor: int, now: float) -> bool:
        return now - self.last[actor] <= max(self.min_s, 4.0 * self.gap[actor])

    def count(self) -> int:
        """How many actors are alive now (recounted at most every `recount_s`)."""
        now = self.clock()
        if now - self._counted >= self.recount_s:
            self._count = sum(1 for actor in self.last if self.alive(actor, now))
            self._counted = now
        return self._count

    def _forget_silent(self, now: float) -> None:
        for actor in [a for a in self.last if not self.alive(a, now)]:
            del self.last[actor], self.gap[actor]
