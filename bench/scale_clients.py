"""Stand-in actors for bench/scale.py: hundreds per process, each speaking exactly what an actor speaks.

A client process runs `count` stand-ins (actor indices `first`...) in one thread: one ZeroMQ poller
over all their sockets and a timer heap, no thread per stand-in. Each stand-in holds the three
connections a real actor holds, made with caraml's own socket helpers (`make_socket`, `attach`,
`send_frames`, `serialize`, `decode`; LINGER=0, the run's Curve keys if it has them):

  params      REQ, as `surreal.runtime.wire.parameter_client.ParameterClient`: `{"version": held, "actor": i}`
              requests, the reply checked by `surreal.runtime.wire.schemas.params_reply`; an attempt waits 1 s,
              doubling up to 5 s (`surreal.runtime.wire.asking.Asker`'s backoff), plus a long poll's `wait_s`,
              then the socket is replaced and the request sent again (caraml.Client's lazy
              pirate); an error reply is retried after 0.5 s.
  experience  PUSH, high-water mark 4 (actor.py): the run's segment, made by a real rollout
              (`bench/scale.py`), with `version` set to the held version, or DDPG's n-step chunk.
  metrics     PUSH, high-water mark 10,000 (common.Component): the actor's report (`actor/sps`,
              env_steps, episode returns/lengths, version) every 2 s or when episodes ended.

PPO stand-ins run surreal/runtime/processes/actor.py's loop: wait for version >= 1, then rollout -> push ->
fetch -> while the actor's `Pacer` (surreal/runtime/processes/pacing.py: its share of the learner's batches
over the live actors, `actor.max_ahead`) says it is ahead, a long poll for the version it wants
(`ParameterClient.wait_for`: answered when the version arrives or after 2 s, then asked again),
giving up after 15 s (`_wait_for`) -> report. A long poll's reply is not a fetch latency (it waits
by design): its count is `polls`. DDPG
stand-ins run surreal/algos/ddpg/actor.py's: fetch every 16 vector steps (4 chunks) or while the
`Pacer` says ahead (then every 10 ms), push a chunk per `chunk_size` transitions, report.

"rollout" is the only part replaced: the stand-in waits until its next slot. In `paced` mode the
slots are `period` s apart (from a random phase), so N stand-ins offer a fixed aggregate load; in
`max` mode there is no wait (an infinitely fast env), so only the pacing rule and the sockets'
back-pressure hold a stand-in back. SIGUSR1 moves every stand-in to the next phase of the spec;
SIGTERM ends the process after it wrote its statistics (per monotonic second: segments, fetches,
bytes, reports, retries, errors, and a log-binned histogram of fetch latencies).

    python bench/scale_clients.py SPEC.json FIRST COUNT STATS.json
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
import signal
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import zmq

from caraml.curve_env import env_curve
from caraml.reader import decode
from caraml.sockets import attach, context, make_socket, recv_frames, send_frames
from caraml.wire import DEFAULT_MAX_SIZE, KIND_DATA, serialize
from surreal.runtime.processes.pacing import Pacer
from surreal.runtime.wire import schemas
from surreal.runtime.wire.guard import Invalid

BINS_PER_DECADE = 40
"""Latency histogram resolution: bins 10^(1/40) (~6%) wide, from 10 us."""
FIELDS = ("segments", "fetches", "with_params", "bytes_in", "reports", "retries", "errors", "polls")


def latency_bin(seconds: float) -> int:
    """The histogram bin of a latency."""
    return max(0, int(BINS_PER_DECADE * math.log10(max(seconds, 1e-5) / 1e-5)))


def bin_seconds(b: int) -> float:
    """The (geometric) middle of a histogram bin, in seconds."""
    return 1e-5 * 10 ** ((b + 0.5) / BINS_PER_DECADE)


class Stats:
    """Counters per monotonic second and latency histograms, dumped as JSON at exit."""

    def __init__(self) -> None:
        self.counts: dict[int, list[int]] = defaultdict(lambda: [0] * len(FIELDS))
        self.hist: dict[int, Counter] = defaultdict(Counter)
        self.lag: dict[int, Counter] = defaultdict(Counter)
        self.kinds: Counter = Counter()

    def add(self, field: str, n: int = 1) -> None:
        self.counts[int(time.monotonic())][FIELDS.index(field)] += n

    def latency(self, seconds: float) -> None:
        self.hist[int(time.monotonic())][latency_bin(seconds)] += 1

    def late(self, seconds: float) -> None:
        """How late the loop ran a scheduled action (a starved client process shows here)."""
        self.lag[int(time.monotonic())][latency_bin(seconds)] += 1

    def error(self, kind: str) -> None:
        self.kinds[kind] += 1
        self.add("errors")

    def dump(self, path: Path, **extra: object) -> None:
        data = {
            "fields": FIELDS,
            "counts": {str(s): c for s, c in self.counts.items()},
            "hist": {str(s): {str(b): n for b, n in h.items()} for s, h in self.hist.items()},
            "lag": {str(s): {str(b): n for b, n in h.items()} for s, h in self.lag.items()},
            "error_kinds": dict(self.kinds),
            **extra,
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)


class Loop:
    """One thread's poller and timer heap for every stand-in of the process."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.poller = zmq.Poller()
        self.owner: dict[zmq.Socket, StandIn] = {}
        self.timers: list[tuple[float, int, StandIn, str, int]] = []
        self.seq = itertools.count()
        self.stats = Stats()
        self.curve = env_curve(False)
        self.phase = 0
        self.stop = False

    def socket(self, kind: int, address: str, owner: StandIn, hwm: int | None = None):
        sock = make_socket(kind, hwm=hwm, curve=self.curve)
        attach(sock, address, False)
        self.owner[sock] = owner
        return sock

    def close(self, sock: zmq.Socket) -> None:
        if sock in self.owner:
            try:
                self.poller.unregister(sock)
            except KeyError:
                pass
            del self.owner[sock]
        sock.close(linger=0)

    def at(self, when: float, who: StandIn, action: str, token: int = 0) -> None:
        heapq.heappush(self.timers, (when, next(self.seq), who, action, token))

    def run(self, standins: list[StandIn]) -> None:
        for s in standins:
            s.start()
        applied = self.phase
        while not self.stop:
            if self.phase != applied:  # SIGUSR1: stand-ins waiting for a slot get a new one
                applied = self.phase
                for s in standins:
                    s.new_phase()
            now = time.monotonic()
            wait = min(self.timers[0][0] - now, 0.1) if self.timers else 0.1
            for sock, event in self.poller.poll(max(0, int(wait * 1000))):
                who = self.owner.get(sock)
                if who is not None:
                    who.ready(sock, event)
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now and not self.stop:
                when, _, who, action, token = heapq.heappop(self.timers)
                if action in ("rollout", "poll"):
                    self.stats.late(now - when)
                who.fire(action, token)


class StandIn:
    """One actor's connections and protocol state (see the module docstring)."""

    def __init__(self, loop: Loop, index: int, payload: dict[str, np.ndarray]) -> None:
        self.loop, self.index, self.spec = loop, index, loop.spec
        self.payload = payload
        a = self.spec["addresses"]
        self.push_sock = loop.socket(zmq.PUSH, a["experience"], self, hwm=self.spec["push_hwm"])
        self.metrics_sock = loop.socket(zmq.PUSH, a["metrics"], self, hwm=10_000)
        self.req: zmq.Socket | None = None
        self.version = self.step = self.latest = 0
        self.token = 0  # the request outstanding (stale deadline timers carry older tokens)
        self.frames: list = []
        self.asked = self.attempt_wait = 0.0
        self.after_reply = ""
        self.blocked: dict | None = None
        self.env_steps = self.segments = 0
        self.due = 0.0
        self.slot, self.sleeping = 0, False  # the pending "rollout" timer (older ones are stale)
        self.wait_started = self.target = 0.0
        self.last_report, self.steps_at_report = time.monotonic(), 0
        self.v0: int | None = None
        self.phase = -1
        self.live: int | None = None
        self.stalls: int | None = None
        self.pacer: Pacer | None = None
        self.patience = 0.0  # the long poll's wait_s of the request outstanding

    # -- the phase (mode, max_ahead) the harness is in -------------------------------------------
    def mode(self) -> dict:
        return self.spec["phases"][self.loop.phase]

    def period(self) -> float:
        return 0.0 if self.mode()["mode"] == "max" else self.spec["period"]

    def check_phase(self) -> None:
        """On a new phase: pace from here (as after lost segments), the next slot at a random
        phase within one period (`wait_rollout` adds the period)."""
        if self.phase != self.loop.phase:
            self.phase = self.loop.phase
            max_ahead = self.mode()["max_ahead"]
            self.pacer = None
            if max_ahead is not None:
                actors, per_batch = self.spec["actors"], self.spec["per_batch"]
                self.pacer = Pacer(per_batch, actors, max_ahead, self.version)
            self.due = time.monotonic() + random.uniform(0, self.period()) - self.period()

    # -- the parameter connection: ParameterClient.fetch over the poller -------------------------
    def fetch(self, then: str, wait_for: int | None = None, wait_s: float = 0.0) -> None:
        self.after_reply = then
        request = {"version": self.version, "actor": self.index}
        if wait_for is not None:
            request.update(wait_for=wait_for, wait_s=wait_s)
        self.patience = wait_s if wait_for is not None else 0.0
        self.frames = serialize(request)
        self.asked, self.attempt_wait = time.monotonic(), 1.0
        self._send()

    def _send(self) -> None:
        if self.req is None:
            self.req = self.loop.socket(zmq.REQ, self.spec["addresses"]["params"], self)
            self.loop.poller.register(self.req, zmq.POLLIN)
        self.token += 1
        send_frames(self.req, self.frames)
        wait = self.attempt_wait + self.patience
        self.loop.at(time.monotonic() + wait, self, "deadline", self.token)

    def _timed_out(self) -> None:
        """Lazy pirate: replace the REQ socket (it is stuck without a reply) and ask again, the
        next attempt waiting twice as long (up to 5 s)."""
        self.loop.close(self.req)
        self.req = None
        self.loop.stats.add("retries")
        self.attempt_wait = min(self.attempt_wait * 2, 5.0)
        self._send()

    def _refused(self, kind: str) -> None:
        """An error reply or one that fails `params_reply`: counted, asked again after 0.5 s."""
        self.token += 1
        self.loop.stats.error(kind)
        self.loop.at(time.monotonic() + 0.5, self, "resend", self.token)

    def _reply(self) -> None:
        frames = recv_frames(self.req)
        stats = self.loop.stats
        try:
            kind, message = decode(frames, DEFAULT_MAX_SIZE)
            if kind != KIND_DATA:
                raise Invalid(f"error reply: {message}", "remote-error")
            reply = schemas.params_reply(message)
        except Exception as exc:  # noqa: BLE001 - counted, retried as the client does
            self._refused(getattr(exc, "kind", type(exc).__name__))
            return
        self.token += 1  # the deadline timer of this request is stale now
        if self.patience:
            stats.add("polls")  # a long poll: it waited for a version by design
        else:
            stats.latency(time.monotonic() - self.asked)
        stats.add("fetches")
        stats.add("bytes_in", sum(len(f) for f in frames))
        self.latest = reply["version"]
        self.live = reply.get("live", self.live)
        self.stalls = reply.get("stalls", self.stalls)
        fresh = reply.get("params") is not None
        if fresh:
            stats.add("with_params")
            self.version, self.step = reply["version"], reply["step"]
        self.on_params(fresh)

    # -- events ----------------------------------------------------------------------------------
    def ready(self, sock: zmq.Socket, event: int) -> None:
        if sock is self.req and event & zmq.POLLIN:
            self._reply()
        elif sock is self.push_sock and self.blocked is not None:
            message, self.blocked = self.blocked, None
            self.loop.poller.unregister(sock)
            self.push(message)

    def fire(self, action: str, token: int) -> None:
        if action == "deadline":
            if token == self.token:
                self._timed_out()
        elif action == "resend":
            if token == self.token:
                self._send()
        elif action == "poll":
            self.fetch(self.after_reply)
        elif action == "rollout":
            if token == self.slot:
                self.sleeping = False
                self.rollout_done()

    def push(self, message: dict) -> None:
        """Send on `experience`; with every queue full (hwm), wait for POLLOUT (the actor blocks)."""
        try:
            send_frames(self.push_sock, serialize(message), zmq.NOBLOCK)
        except zmq.Again:
            self.blocked = message
            self.loop.poller.register(self.push_sock, zmq.POLLOUT)
            return
        self.loop.stats.add("segments")
        self.segments += 1
        self.pushed()

    def report(self, returns: list[float]) -> None:
        now = time.monotonic()
        if not returns and now - self.last_report <= 2.0:
            return
        message = {
            "source": "actor",
            "index": self.index,
            "step": int(self.step),
            "time": time.time(),
            "scalars": self.scalars(now),
            "env_steps": int(self.env_steps),
            "episode_returns": returns,
            "episode_lengths": [self.spec["episode_steps"]] * len(returns),
            "version": int(self.version),
        }
        if self.spec.get("token"):  # the run's metrics token (local runs)
            message["token"] = self.spec["token"]
        try:
            send_frames(self.metrics_sock, serialize(message), zmq.NOBLOCK)
            self.loop.stats.add("reports")
        except zmq.Again:
            self.loop.stats.error("metrics-full")
        self.last_report, self.steps_at_report = now, self.env_steps

    def scalars(self, now: float) -> dict[str, float]:
        sps = (self.env_steps - self.steps_at_report) / max(now - self.last_report, 1e-6)
        return {"actor/sps": float(sps)}

    def wait_rollout(self) -> None:
        """The replaced part: wait for this stand-in's next slot (none in `max` mode)."""
        now = time.monotonic()
        self.due = max(self.due + self.period(), now)
        self.slot += 1
        self.sleeping = True
        self.loop.at(self.due, self, "rollout", self.slot)

    def new_phase(self) -> None:
        """A stand-in waiting for its slot takes one in the new phase's schedule at once (the
        others do when their current step ends)."""
        if self.sleeping:
            self.check_phase()
            self.wait_rollout()


class PPOStandIn(StandIn):
    """surreal/runtime/processes/actor.py's loop with the rollout replaced by a wait."""

    def start(self) -> None:
        self.target = 1
        self.wait_started = time.monotonic()
        self.fetch("wait", 1, 2.0)  # _wait_for(params, 1)

    def on_params(self, fresh: bool) -> None:
        if self.after_reply == "after-push":
            self.env_steps += self.spec["steps_per_segment"]
            if self.pacer is not None:
                self.pacer.sent()
                self.wait_started = time.monotonic()
                self.pace()
                return
            self.cycle_end()
        elif self.after_reply == "wait":
            if self.phase < 0:  # the first parameters (version >= 1)
                if self.version >= self.target:
                    self.cycle_end()
                else:
                    self.fetch("wait", self.target, 2.0)
            elif 0 <= self.phase != self.loop.phase:
                self.cycle_end()
            elif self.version >= 1 and time.monotonic() - self.wait_started > 15.0:
                self.pacer.restart(self.version)  # gave up: pace from here
                self.cycle_end()
            else:
                self.pace()

    def pace(self) -> None:
        """`actor._pace`: a long poll for the wanted version while the pacer says ahead."""
        self.pacer.observe(self.version, self.live, self.stalls)
        if self.pacer.ahead():
            self.target = self.pacer.wanted_version()
            self.fetch("wait", self.target, 2.0)
        else:
            self.cycle_end()

    def cycle_end(self) -> None:
        if self.phase < 0:  # the first parameters: the loop starts
            self.check_phase()
            self.wait_rollout()
            return
        every = max(1, self.spec["episode_steps"] // self.spec["rollout_length"])
        episodes = self.segments % every == 0
        self.report([self.spec["episode_return"]] * self.spec["num_envs"] if episodes else [])
        self.check_phase()
        self.wait_rollout()

    def rollout_done(self) -> None:
        segment = dict(self.payload)
        segment["version"] = np.full(self.spec["num_envs"], self.version, np.int64)
        self.push(segment)

    def pushed(self) -> None:
        self.fetch("after-push")


class DDPGStandIn(StandIn):
    """surreal/algos/ddpg/actor.py's loop (in chunks: `chunk_size` transitions per push)."""

    def start(self) -> None:
        self.check_phase()
        self.wait_rollout()

    def ahead(self) -> bool:
        """`Pacer.ahead(env_steps, latest_version)`."""
        a = self.spec["ddpg"]
        if a["updates_per_step"] <= 0:
            return False
        updates = (self.latest - (self.v0 or 0)) * a["publish_every"]
        slack = a["chunk_size"] + a["n_step"]
        limit = (a["replay_start"] + updates / a["updates_per_step"]) / self.spec["actors"]
        return self.env_steps >= limit + slack

    def rollout_done(self) -> None:
        every = self.spec["ddpg"]["fetch_every_chunks"]
        if self.segments % every == 0 or self.ahead():
            self.fetch("pace")
        else:
            self.push(self.payload)

    def on_params(self, fresh: bool) -> None:
        if fresh and self.v0 is None:
            self.v0 = self.version
        if fresh or not self.ahead():
            self.push(self.payload)
        else:
            self.loop.at(time.monotonic() + 0.01, self, "poll")

    def pushed(self) -> None:
        self.env_steps += self.spec["ddpg"]["chunk_size"]
        self.report([])
        self.check_phase()
        self.wait_rollout()

    def scalars(self, now: float) -> dict[str, float]:
        return {**super().scalars(now), "actor/sigma": 0.1}


def main(argv: list[str]) -> None:
    spec_path, first, count, out = argv[0], int(argv[1]), int(argv[2]), Path(argv[3])
    spec = json.loads(Path(spec_path).read_text())
    context().set(zmq.MAX_SOCKETS, 8 * count + 64)  # 3 per stand-in, more while one is replaced
    with np.load(spec["payload"], allow_pickle=False) as f:
        payload = {k: f[k] for k in f.files}
    loop = Loop(spec)
    random.seed(first)

    def next_phase(*_: object) -> None:
        loop.phase = min(loop.phase + 1, len(spec["phases"]) - 1)

    def stop(*_: object) -> None:
        loop.stop = True

    signal.signal(signal.SIGUSR1, next_phase)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    kind = PPOStandIn if spec["kind"] == "ppo" else DDPGStandIn
    standins = [kind(loop, i, payload) for i in range(first, first + count)]
    started = time.monotonic()
    try:
        loop.run(standins)
    finally:
        loop.stats.dump(out, first=first, count=count, started=started, ended=time.monotonic())
        for sock in list(loop.owner):
            loop.close(sock)


if __name__ == "__main__":
    main(sys.argv[1:])
