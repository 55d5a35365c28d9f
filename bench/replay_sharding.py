"""Replay sharding: experiences handled per second with 1, 2 and 3 replay shards under many fast actors.

The Surreal paper's Table 2 (DDPG on HalfCheetah, 128 actors): one replay becomes the bottleneck,
three load-balanced shards resolve it, more do not help. Here: A synthetic "fast actors" (processes
that push pre-built n-step chunks of HalfCheetah-sized transitions as fast as the system takes
them, i.e. actors with an infinitely fast env), the real pull-push and router-dealer proxies, K real
`ReplayShard` processes, and one learner-like process sampling batches of 256 the whole time.
Measured: transitions stored per second over all shards (and batches sampled per second), with
the baseline of the same actors pushing to one shard directly, without proxies, side by side.

    .venv/bin/python bench/replay_sharding.py [--actors 2,8,16] [--shards 1,2,3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

OBS, ACT, CHUNK = 17, 6, 32  # HalfCheetah-v5 observation and action sizes; transitions per push


def _chunk(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(CHUNK, OBS)).astype(np.float32),
        "next_obs": rng.normal(size=(CHUNK, OBS)).astype(np.float32),
        "act": rng.uniform(-1, 1, (CHUNK, ACT)).astype(np.float32),
        "rew": rng.normal(size=CHUNK).astype(np.float32),
        "discount": np.full(CHUNK, 0.97, np.float32),
    }


def actor(address: str, seed: int, stop) -> None:
    """Push chunks until told to stop (back-pressure from the high-water mark throttles it)."""
    import caraml

    os.environ["OMP_NUM_THREADS"] = "1"
    pusher, chunk = caraml.Pusher(address, hwm=16), _chunk(seed)
    while not stop.is_set():
        pusher.push(chunk)
    pusher.close()


def shard(push_backend: str, sample_backend: str, index: int, bind: bool, stop) -> None:
    """A ReplayShard process (connects to the proxies, or binds when there is no proxy)."""
    import threading

    import caraml
    from surreal.runtime.processes.replay_shard import ReplayShard

    rs = ReplayShard(capacity=500_000, start=1_000, seed=index, index=index)
    if bind:  # baseline: actors push straight to this shard, no proxy
        puller = caraml.Puller(push_backend, bind=True, hwm=16)
        server = caraml.Server(sample_backend, rs.handle, bind=True).start()
        threading.Thread(target=lambda: (stop.wait(), rs.stop()), daemon=True).start()
        while not rs.stopped.is_set():
            try:
                rs.add(puller.pull(timeout=0.2))
            except caraml.RequestTimeout:
                pass
        server.stop()
        puller.close()
        return
    threading.Thread(target=lambda: (stop.wait(), rs.stop()), daemon=True).start()
    rs.serve(push_backend, sample_backend)


def proxies(addrs: dict[str, str], stop) -> None:
    """The replay proxies in their own process, as in a launched experiment."""
    from surreal.runtime.processes.sharding import start_replay_proxies

    with start_replay_proxies(
        addrs["push"], addrs["push_back"], addrs["sample"], addrs["sample_back"], hwm=16
    ):
        stop.wait()


def sampler(address: str, counter, stop) -> None:
    """A learner that samples all the time, as the DDPG learner does: 4 batches of 256 a request."""
    import caraml

    client = caraml.Client(address, timeout=2.0, retries=50)
    while not stop.is_set():
        reply = client.request({"op": "sample", "batch_size": 4 * 256})
        if reply.get("ready"):
            with counter.get_lock():
                counter.value += 4
    client.close()


def stored(address: str, shards: int, retries: int = 5) -> int:
    """Transitions ever stored, summed over every shard (round robin reaches each one)."""
    import caraml

    seen: dict[int, int] = {}
    client = caraml.Client(address, timeout=2.0, retries=retries)
    for _ in range(20 * shards):
        reply = client.request({"op": "stats"})
        seen[int(reply["shard"])] = int(reply["added"])
        if len(seen) == shards:
            break
    client.close()
    return sum(seen.values())


def run(actors: int, shards: int, seconds: float, direct: bool = False):
    """(transitions stored per s, batches sampled per s, cores used per role) for one configuration."""
    from caraml.testing import free_port

    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    port = {
        k: f"tcp://127.0.0.1:{free_port()}" for k in ("push", "push_back", "sample", "sample_back")
    }
    procs: list[tuple[str, mp.Process]] = []
    if direct:
        procs.append(
            (
                "replay",
                ctx.Process(target=shard, args=(port["push"], port["sample"], 0, True, stop)),
            )
        )
    else:
        procs.append(("proxy", ctx.Process(target=proxies, args=(port, stop))))
        procs += [
            (
                "replay",
                ctx.Process(
                    target=shard, args=(port["push_back"], port["sample_back"], k, False, stop)
                ),
            )
            for k in range(shards)
        ]
    counter = ctx.Value("q", 0)
    procs.append(("learner", ctx.Process(target=sampler, args=(port["sample"], counter, stop))))
    procs += [
        ("actors", ctx.Process(target=actor, args=(port["push"], i, stop))) for i in range(actors)
    ]
    for _, p in procs:
        p.start()
    try:
        stored(port["sample"], shards, retries=60)  # every shard up and answering
        time.sleep(1.0)  # warm-up: measure the steady state, not process start-up
        c0 = _cpu(procs)
        n0, b0, t0 = stored(port["sample"], shards), counter.value, time.perf_counter()
        time.sleep(seconds)
        n1, b1, t1 = stored(port["sample"], shards), counter.value, time.perf_counter()
        c1 = _cpu(procs)
    finally:
        stop.set()
        for _, p in procs:
            p.join(timeout=5)
            if p.exitcode is None:
                p.kill()
                p.join()
    cores = {role: (c1[role] - c0[role]) / (t1 - t0) for role in c0}
    return (n1 - n0) / (t1 - t0), (b1 - b0) / (t1 - t0), cores


def _cpu(procs) -> dict[str, float]:
    """CPU seconds used so far by each role's processes."""
    import psutil

    out: dict[str, float] = {}
    for role, p in procs:
        try:
            t = psutil.Process(p.pid).cpu_times()
            out[role] = out.get(role, 0.0) + t.user + t.system
        except psutil.NoSuchProcess:
            out.setdefault(role, 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actors", default="2,8,16", help="comma-separated actor counts")
    parser.add_argument("--shards", default="1,2,3")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "out" / "replay_sharding.png"))
    args = parser.parse_args()
    shard_counts = [int(s) for s in args.shards.split(",")]
    rows = []
    for a in (int(x) for x in args.actors.split(",")):
        rows.append((a, "direct", *run(a, 1, args.seconds, direct=True)))
        rows += [(a, str(k), *run(a, k, args.seconds)) for k in shard_counts]
    print(
        f"\nreplay sharding: fast actors push chunks of {CHUNK} transitions (obs {OBS}, act {ACT}); "
        f"one learner samples batches of 256; {os.cpu_count()} cores"
    )
    print(
        f"{'actors':>6} {'shards':>7} {'transitions/s':>14} {'vs direct':>10} {'batches/s':>10}"
        f"   cores used: {'actors':>6} {'proxy':>6} {'replay':>6} {'learner':>7}"
    )
    for a, name, rate, batches, cores in rows:
        base = next(r[2] for r in rows if r[0] == a and r[1] == "direct")
        print(
            f"{a:>6} {name:>7} {rate:>14,.0f} {rate / base:>10.2f} {batches:>10.1f}"
            f"               {cores.get('actors', 0):>6.2f} {cores.get('proxy', 0):>6.2f} "
            f"{cores.get('replay', 0):>6.2f} {cores.get('learner', 0):>7.2f}"
        )
    _plot(rows, args)


def _plot(rows, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name in dict.fromkeys(r[1] for r in rows):
        sel = [r for r in rows if r[1] == name]
        label = "1 shard, no proxy" if name == "direct" else f"{name} shard(s) + proxies"
        style = "--" if name == "direct" else "-"
        ax1.plot([r[0] for r in sel], [r[2] for r in sel], style, marker="o", label=label)
        ax2.plot([r[0] for r in sel], [r[3] for r in sel], style, marker="o", label=label)
    ax1.set_xlabel("fast actors")
    ax1.set_ylabel("transitions stored / s")
    ax2.set_xlabel("fast actors")
    ax2.set_ylabel("learner batches (256) sampled / s")
    ax1.legend(fontsize=8)
    fig.suptitle(f"Replay sharding on {os.cpu_count()} cores")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
