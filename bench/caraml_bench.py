"""caraml throughput against raw pyzmq, pickle, multiprocessing.Queue and memcpy, plus the DataFetcher.

Run ``python bench/caraml_bench.py`` (``--quick`` for a short run, ``--json`` for one JSON document
on stdout). Every path runs in this one invocation on this machine: a sender process streams
``uint8`` arrays of 100 B, 64 KB, 1 MB and 16 MB to a receiver in this process, which times from
the first to the last message. The table shows the best of ``--repeat`` runs and the ratios the
caraml issue sets as targets; the plot goes to ``bench/out/caraml_bench.png``. A last cell
(``bench/caraml_receive.py``, ``--only receive``) compares the CPU of caraml's receive path with
raw pyzmq's in alternating rounds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import zmq

import caraml
from caraml.testing import free_address

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from caraml_receive import receive_rows, receive_table  # noqa: E402

SIZES = {"100B": 100, "64KB": 64 << 10, "1MB": 1 << 20, "16MB": 16 << 20}
ZMQ_PATHS = ["caraml", "raw_zmq", "send_pyobj"]
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
BATCH = 32  # DataFetcher batch: 32 RGB 84x84 frames + actions + rewards (~0.7 MB raw)


def _hwm(size: int) -> int:
    return max(4, min(1000, (64 << 20) // size))


def _count(size: int, quick: bool) -> int:
    budget = (256 << 20) if quick else (1 << 30)
    return int(min(50_000 if quick else 200_000, max(40 if quick else 100, budget // size)))


# ---- senders: run in a spawned process, stream `count` arrays, wait until the receiver is done


def _raw_socket(address: str, size: int) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.PUSH)
    sock.linger, sock.sndhwm = 0, _hwm(size)
    sock.connect(address)
    return sock


def _sender(path: str, target, size: int) -> tuple[Callable[[np.ndarray], None], Callable]:
    if path == "caraml":
        pusher = caraml.Pusher(target, hwm=_hwm(size))
        return pusher.push, pusher.close
    if path == "mp_queue":
        return target.put, lambda: None
    sock = _raw_socket(target, size)
    if path == "raw_zmq":
        copy = size < (64 << 10)  # pyzmq's own threshold: copying small frames is faster
        return (lambda arr: sock.send(arr, copy=copy)), sock.close
    return sock.send_pyobj, sock.close


def _send_main(path: str, target, size: int, count: int, done, report) -> None:
    """Sender process: stream ``count`` arrays, wait for the receiver, report own CPU seconds."""
    arr = np.ones(size, np.uint8)
    send, close = _sender(path, target, size)
    cpu = time.process_time()
    for _ in range(count):
        send(arr)
    done.wait(120)  # LINGER=0: closing before the receiver is done would drop messages
    report.send(time.process_time() - cpu)
    close()


# ---- receivers: in this process; each returns a callable that receives one message


def _receiver(path: str, address: str, size: int) -> tuple[Callable[[], object], Callable]:
    if path == "caraml":
        puller = caraml.Puller(address, hwm=_hwm(size))
        return puller.pull, puller.close
    sock = zmq.Context.instance().socket(zmq.PULL)
    sock.linger, sock.rcvhwm = 0, _hwm(size)
    sock.bind(address)
    if path == "raw_zmq":
        copy = size < (64 << 10)
        if copy:
            return lambda: np.frombuffer(sock.recv(), np.uint8), sock.close
        return lambda: np.frombuffer(sock.recv(copy=False).buffer, np.uint8), sock.close
    return sock.recv_pyobj, sock.close


def _timed(recv: Callable[[], object], count: int) -> tuple[float, float]:
    """Messages per second and CPU seconds of this process, from the first message on."""
    recv()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(count - 1):
        recv()
    return (count - 1) / (time.perf_counter() - start), time.process_time() - cpu


def measure(ctx, path: str, transport: str, size: int, count: int, tmp: str) -> tuple[float, float]:
    """Messages per second from a sender process to this process for one path, and the CPU
    seconds per message that both processes spent (all their threads, kernel time included)."""
    done = ctx.Event()
    report_in, report_out = ctx.Pipe(duplex=False)
    if path == "mp_queue":
        target = ctx.Queue(maxsize=_hwm(size))
        recv, close = target.get, target.close
    else:
        target = free_address() if transport == "tcp" else f"ipc://{tmp}/{path}-{size}"
        recv, close = _receiver(path, target, size)
    proc = ctx.Process(target=_send_main, args=(path, target, size, count, done, report_out))
    proc.start()
    rate, recv_cpu = _timed(recv, count)
    done.set()
    send_cpu = report_in.recv() if report_in.poll(60) else float("nan")
    proc.join(30)
    close()
    return rate, recv_cpu / (count - 1) + send_cpu / count


def memcpy_rate(size: int, count: int) -> tuple[float, float]:
    """np.copyto between two preallocated arrays: the physical limit of moving the bytes."""
    src, dst = np.ones(size, np.uint8), np.empty(size, np.uint8)
    rate, cpu = _timed(lambda: np.copyto(dst, src), count)
    return rate, cpu / (count - 1)


def throughput(quick: bool, repeat: int) -> list[dict]:
    """Every path, transport and size; the best of ``repeat`` runs. The paths of one size and
    transport run in turn, ``repeat`` times over, so that load from other processes on the
    machine hits the compared paths alike."""
    ctx = mp.get_context("spawn")
    best: dict[tuple, float] = {}
    least_cpu: dict[tuple, float] = {}
    with tempfile.TemporaryDirectory(prefix="caraml-bench-") as tmp:
        for (label, size), transport in itertools.product(SIZES.items(), ["ipc", "tcp"]):
            paths = ZMQ_PATHS + (["mp_queue", "memcpy"] if transport == "ipc" else [])
            count = _count(size, quick)
            for round_, path in itertools.product(range(repeat), paths):
                rate, cpu = (
                    memcpy_rate(size, count)
                    if path == "memcpy"
                    else measure(ctx, path, transport, size, count, tmp)
                )
                cell = (path, transport, label, size)
                best[cell] = max(best.get(cell, 0.0), rate)
                least_cpu[cell] = min(least_cpu.get(cell, float("inf")), cpu)
                print(
                    f"  round {round_}: {path:10s} {transport:4s} {label:5s} {rate:12.0f} msg/s "
                    f"{rate * size / 1e6:10.1f} MB/s {cpu * 1e6:10.2f} CPU us/msg",
                    file=sys.stderr,
                )
    rows = []
    for (path, transport, label, size), rate in best.items():
        where = transport if path in ZMQ_PATHS else ("pipe" if path == "mp_queue" else "memory")
        cpu = least_cpu[(path, transport, label, size)]
        rows.append(
            {
                "path": path,
                "transport": where,
                "size": label,
                "bytes": size,
                "messages": _count(size, quick),
                "msgs_per_s": rate,
                "mb_per_s": rate * size / 1e6,
                "cpu_us_per_msg": cpu * 1e6,
                "msgs_per_cpu_s": 1.0 / cpu if cpu > 0 else float("nan"),
            }
        )
    return rows


# ---- DataFetcher against a learner that requests and deserializes inline


def make_batch(_request: object) -> dict:
    """The replay server's answer: one batch of image observations."""
    rng = np.random.default_rng(0)
    return {
        "obs": rng.integers(0, 255, (BATCH, 84, 84, 3), dtype=np.uint8),
        "action": rng.standard_normal((BATCH, 6), dtype=np.float32),
        "reward": rng.standard_normal(BATCH, dtype=np.float32),
    }


def preprocess(batch: dict) -> dict:
    """What a learner does before a step: images to float32 in [0, 1]."""
    return {
        "obs": batch["obs"].astype(np.float32) / 255.0,
        "action": batch["action"],
        "reward": batch["reward"],
    }


def keep(batch: dict) -> dict:
    """No preprocessing: the batch as the server sent it."""
    return batch


def _serve(address: str, ready, stop) -> None:
    batch = make_batch(None)
    with caraml.Server(address, lambda _: batch):
        ready.set()
        stop.wait(600)


def _inline(address: str, fn: Callable, n: int) -> tuple[float, float]:
    with caraml.Client(address, timeout=30) as client:
        fn(client.request({"batch": BATCH}))  # warm up
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn(client.request({"batch": BATCH}))
        return time.perf_counter() - wall, time.process_time() - cpu


def _fetched(address: str, fn: Callable, n: int, workers: int) -> tuple[float, float]:
    with caraml.DataFetcher(
        address,
        itertools.repeat({"batch": BATCH}),
        fn,
        slot_bytes=4 << 20,
        n_slots=4,
        n_workers=workers,
    ) as fetcher:
        fetcher.release(fetcher.get(timeout=120))  # warm up: workers are started
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            handle = fetcher.get(timeout=120)
            handle.data["obs"].shape  # noqa: B018  the learner would read it here
            fetcher.release(handle)
        return time.perf_counter() - wall, time.process_time() - cpu


def fetcher_vs_inline(quick: bool, workers: int) -> list[dict]:
    """Batches/s and main-process CPU seconds per batch, with and without preprocessing."""
    ctx = mp.get_context("spawn")
    n = 100 if quick else 400
    address, ready, stop = free_address(), ctx.Event(), ctx.Event()
    server = ctx.Process(target=_serve, args=(address, ready, stop))
    server.start()
    ready.wait(120)
    rows = []
    try:
        for name, fn in [("preprocess", preprocess), ("none", keep)]:
            for mode in ["inline", "DataFetcher"]:
                wall, cpu = (
                    _inline(address, fn, n)
                    if mode == "inline"
                    else _fetched(address, fn, n, workers)
                )
                rows.append(
                    {
                        "mode": mode,
                        "preprocessing": name,
                        "batches": n,
                        "batches_per_s": n / wall,
                        "main_cpu_ms_per_batch": 1e3 * cpu / n,
                    }
                )
                print(
                    f"  {mode:11s} {name:10s} {n / wall:8.1f} batches/s "
                    f"{1e3 * cpu / n:8.3f} ms CPU/batch",
                    file=sys.stderr,
                )
    finally:
        stop.set()
        server.join(30)
    return rows


# ---- report


def _rate(rows: list[dict], path: str, transport: str, size: str, key: str) -> float:
    for row in rows:
        if (row["path"], row["transport"], row["size"]) == (path, transport, size):
            return row[key]
    return float("nan")


def ratios(rows: list[dict], fetch: list[dict]) -> list[dict]:
    """The issue's targets, each as measured / baseline in this run: on wall-clock throughput
    (best of the rounds) and on CPU cost (both processes' CPU seconds per message, which other
    tenants of a shared machine disturb far less)."""
    out = []

    def pair(name: str, goal: float | None, a: tuple, b: tuple, wall_key: str) -> None:
        out.append(
            {
                "target": name,
                "goal": goal,
                "ratio": _rate(rows, *a, wall_key) / _rate(rows, *b, wall_key),
                "cpu_ratio": _rate(rows, *a, "msgs_per_cpu_s") / _rate(rows, *b, "msgs_per_cpu_s"),
            }
        )

    for transport in ["ipc", "tcp"]:
        for size in ["1MB", "16MB"]:
            pair(
                f"caraml/raw_zmq MB/s {transport} {size}",
                0.9,
                ("caraml", transport, size),
                ("raw_zmq", transport, size),
                "mb_per_s",
            )
        pair(
            f"caraml/raw_zmq msg/s {transport} 100B",
            0.7,
            ("caraml", transport, "100B"),
            ("raw_zmq", transport, "100B"),
            "msgs_per_s",
        )
    pair(
        "caraml ipc / mp.Queue MB/s 1MB",
        5.0,
        ("caraml", "ipc", "1MB"),
        ("mp_queue", "pipe", "1MB"),
        "mb_per_s",
    )
    for prep in ["preprocess", "none"]:
        cpu = {r["mode"]: r["main_cpu_ms_per_batch"] for r in fetch if r["preprocessing"] == prep}
        cut = 1.0 - cpu["DataFetcher"] / cpu["inline"] if cpu else float("nan")
        out.append(
            {
                "target": f"main CPU/batch cut by DataFetcher ({prep})",
                "goal": 0.8,
                "ratio": cut,
                "cpu_ratio": cut,
            }
        )
    for size in SIZES:
        pair(
            f"caraml ipc / memcpy MB/s {size} (information)",
            None,
            ("caraml", "ipc", size),
            ("memcpy", "memory", size),
            "mb_per_s",
        )
    return out


def table(rows: list[dict], fetch: list[dict], checks: list[dict], machine: str) -> str:
    """A plain-text report."""
    order = ["caraml", "raw_zmq", "send_pyobj", "mp_queue", "memcpy"]
    keys = sorted(
        {(r["path"], r["transport"]) for r in rows}, key=lambda k: (order.index(k[0]), k[1])
    )
    lines = [
        f"machine: {machine}",
        "",
        f"{'path':11s} {'via':6s} "
        + " ".join(f"{s + ' MB/s':>10s} {s + ' msg/s':>11s} {'CPU us':>8s}" for s in SIZES),
    ]
    for path, where in keys:
        cells = [
            f"{_rate(rows, path, where, s, 'mb_per_s'):10.1f} "
            f"{_rate(rows, path, where, s, 'msgs_per_s'):11.0f} "
            f"{_rate(rows, path, where, s, 'cpu_us_per_msg'):8.2f}"
            for s in SIZES
        ]
        lines.append(f"{path:11s} {where:6s} " + " ".join(cells))
    lines += [
        "",
        "CPU us = CPU microseconds per message, sender + receiver processes together",
        "",
        f"{'learner':12s} {'preprocess':10s} {'batches/s':>10s} {'main CPU ms/batch':>18s}",
    ]
    for r in fetch:
        lines.append(
            f"{r['mode']:12s} {r['preprocessing']:10s} {r['batches_per_s']:10.1f} "
            f"{r['main_cpu_ms_per_batch']:18.3f}"
        )
    lines += ["", f"{'target':48s} {'wall':>6s} {'CPU':>6s} {'goal':>6s}"]
    for c in checks:
        goal = "" if c["goal"] is None else f">={c['goal']:.1f}"
        mark = (
            ""
            if c["goal"] is None
            else ("  ok" if max(c["ratio"], c["cpu_ratio"]) >= c["goal"] else "  MISSED")
        )
        lines.append(f"{c['target']:48s} {c['ratio']:6.2f} {c['cpu_ratio']:6.2f} {goal:>6s}{mark}")
    return "\n".join(lines)


def plot(rows: list[dict], fetch: list[dict], path: str) -> None:
    """Bars of MB/s per size and path (log scale), one panel per transport, plus the fetcher."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for ax, transport in zip(axes[:2], ["ipc", "tcp"], strict=True):
        if not rows:
            ax.axis("off")
            continue
        paths = [
            ("caraml", transport),
            ("raw_zmq", transport),
            ("send_pyobj", transport),
            ("mp_queue", "pipe"),
            ("memcpy", "memory"),
        ]
        x = np.arange(len(SIZES))
        for i, (name, where) in enumerate(paths):
            ax.bar(
                x + i * 0.16,
                [_rate(rows, name, where, s, "mb_per_s") for s in SIZES],
                0.16,
                label=name,
            )
        ax.set_xticks(x + 0.32, list(SIZES))
        ax.set_yscale("log")
        ax.set_ylabel("MB/s")
        ax.set_title(f"throughput, zmq over {transport}")
        ax.legend(fontsize=8)
    labels = [f"{r['mode']}\n{r['preprocessing']}" for r in fetch]
    axes[2].bar(labels, [r["main_cpu_ms_per_batch"] for r in fetch], color="tab:purple")
    axes[2].set_ylabel("main-process CPU ms per batch")
    axes[2].set_title("learner: DataFetcher vs inline")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    """Parse arguments, run everything, print the table or JSON, write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages (about a minute)")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument("--repeat", type=int, default=None, help="runs per cell, best kept")
    parser.add_argument("--workers", type=int, default=2, help="DataFetcher worker processes")
    parser.add_argument("--plot", default=os.path.join(OUT_DIR, "caraml_bench.png"))
    parser.add_argument(
        "--only",
        choices=["throughput", "fetcher", "receive"],
        default=None,
        help="run one part (the ratios of the other part show as nan)",
    )
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 2)
    machine = (
        f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, pyzmq {zmq.__version__} / libzmq "
        f"{zmq.zmq_version()}, numpy {np.__version__}, load {os.getloadavg()[0]:.1f}"
    )
    recv_rounds = 5 if args.quick else 7
    receive = receive_rows([1, 16], recv_rounds) if args.only in (None, "receive") else []
    if args.only == "receive":
        print(receive_table(receive, recv_rounds))
        return
    rows = [] if args.only == "fetcher" else throughput(args.quick, repeat)
    fetch = [] if args.only == "throughput" else fetcher_vs_inline(args.quick, args.workers)
    checks = ratios(rows, fetch)
    plot(rows, fetch, args.plot)
    if args.json:
        print(
            json.dumps(
                {
                    "machine": machine,
                    "throughput": rows,
                    "fetcher": fetch,
                    "ratios": checks,
                    "receive": receive,
                    "plot": args.plot,
                },
                indent=1,
            )
        )
    else:
        print(table(rows, fetch, checks, machine))
        if receive:
            print("\n" + receive_table(receive, recv_rounds))
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
