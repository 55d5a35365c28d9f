"""ES scaling: environment interactions per second against the number of ES workers.

The Surreal paper's Fig. 4 shows near-linear growth of ES throughput with the number of actors.
Here the real master (caraml request-reply, seeds and returns only) runs in this process and N
worker processes share one noise table in /dev/shm; beside them, in the same run, the
single-process ES loop with the same config, in a fresh process of its own as each worker is.
Ratios are to the single-process loop and to linear scaling over the cores present (N workers
cannot beat min(N, cores) x one loop).

    .venv/bin/python bench/es_scaling.py [--env gym:HalfCheetah-v5] [--workers 1,2,4] [--generations 3]
        [--rounds 3]

Thread settings are left as the caller has them (the default: BLAS picks its own thread count)
and printed; the load average is recorded before and after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu_seconds(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_settings() -> str:
    """The BLAS/OpenMP thread variables as this process (and its workers) see them."""
    return ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in THREAD_VARS)


def single_process(
    env_id: str, cfg_json: str, generations: int, noise_dir: str, copies: int = 1
) -> dict:
    """Env steps per second and cores used of the single-process ES loop, in a fresh process of
    its own (as each worker is), over the distributed run's window (`_single_run`). With `copies` > 1, that
    many independent loops run side by side and their rates add up: what the machine gives
    N processes that never talk to each other, the ceiling for N workers. Each then runs one
    more generation after its window, so the others' windows end under the same load."""
    cmd = [sys.executable, __file__, "--single-run", cfg_json, "--env", env_id]
    cmd += ["--generations", str(generations), "--noise-dir", noise_dir]
    cmd += ["--tail"] if copies > 1 else []
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # thread settings as the caller has them
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for _ in range(copies)
    ]
    runs = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"single-process ES loop exited with {proc.returncode}")
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return {
        "rate": sum(r["rate"] for r in runs),
        "cores": sum(r["cores"] for r in runs),
        "each": [r["rate"] for r in runs],
    }


def _single_run(env_id: str, cfg_json: str, generations: int, noise_dir: str, tail: bool) -> None:
    """The child of single_process: prints its rate and cores used as one JSON line.

    It runs generations 0..N and measures 1..N, the window the distributed run measures (its
    master's generation 0 is the workers' start-up): the same seeds, so the same policies and
    episodes, hence the same work, in both windows."""
    from surreal.algos.es.config import ESConfig
    from surreal.algos.es.loop import train

    cfg = ESConfig(**json.loads(cfg_json))
    marks: list[tuple[float, float, int]] = []

    def mark(metrics: dict) -> None:
        marks.append((time.perf_counter(), time.process_time(), metrics["global_step"]))
        if len(marks) == generations + 1:  # the window is over
            (t1, c1, s1), (t2, c2, s2) = marks[0], marks[-1]
            rate, used = (s2 - s1) / (t2 - t1), (c2 - c1) / (t2 - t1)
            print(json.dumps({"rate": rate, "cores": used}), flush=True)

    # with `tail`, one more generation keeps the load on while the loops beside this one finish
    train(env_id, cfg, generations + 1 + int(tail), seed=0, noise_dir=noise_dir, log=mark)


def distributed(
    env_id: str, cfg, cfg_json: str, workers: int, generations: int, noise_dir: str
) -> dict:
    """Env steps per second and cores used of master + workers, from the end of generation 1
    on, with what tells a healthy run: full syncs per worker (1 = only the join), tasks the
    workers dropped, and tasks the master handed out again (at once, or after task_timeout)."""
    import caraml
    from caraml.testing import free_port
    from surreal.algos.es.loop import build
    from surreal.algos.es.master import ESMaster

    _, policy, state, noise = build(env_id, cfg, 0, noise_dir)
    master = ESMaster(policy, state, noise, cfg, generations=generations + 1, seed=0)
    address = f"tcp://127.0.0.1:{free_port()}"
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # thread settings as the caller has them
    cmd = [sys.executable, "-m", "surreal.algos.es.worker", "--env", env_id, "--master", address]
    cmd += ["--noise-dir", noise_dir, "--config", cfg_json, "--spans"]
    procs = [
        subprocess.Popen([*cmd, "--name", f"w{i}"], env=env, stdout=subprocess.PIPE, text=True)
        for i in range(workers)
    ]
    pids, cpu, at = [os.getpid(), *(p.pid for p in procs)], {}, {}

    def on_generation(m, i: int) -> bool:
        if i in (0, generations):
            cpu[i] = _cpu_seconds(pids)
            at[i] = time.monotonic()  # the workers' span clock
        return False

    stats = []
    # Serve as master.serve does, but keep answering (the finished master says "stop") until
    # every worker has exited: one still in a rollout when the last generation ends asks later.
    server = caraml.Server(address, master.handle).start()
    try:
        seen = 0
        while not master.done or seen < len(master.finished):
            if not master.wait_generation(seen, 600):
                raise TimeoutError("no ES generation finished in 600 s")
            while seen < len(master.finished):
                on_generation(master, seen)
                seen += 1
        for p in procs:
            try:
                out, _ = p.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if p.returncode != 0:
                print(f"worker exited with {p.returncode}", file=sys.stderr)
            lines = [ln for ln in out.splitlines() if ln.startswith("{")]
            stats.append(json.loads(lines[-1]) if lines else {})
    finally:
        server.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    (_, s1, w1, _), (_, s2, w2, _) = master.finished[0], master.finished[-1]
    busy, speed = _spans(stats, at[0], at[generations])
    return {
        "busy": busy,
        "speed": speed,
        "rate": (s2 - s1) / (w2 - w1),
        "cores": (cpu[generations] - cpu[0]) / (w2 - w1),
        "syncs": max((st.get("syncs", -1) for st in stats), default=-1),
        "dropped": sum(st.get("dropped", 0) for st in stats),
        "released": master.released,
        "timeouts": master.reissued,
    }


def _spans(stats: list[dict], start: float, end: float) -> tuple[float, float]:
    """(busy, speed) of the workers in the window [start, end]: the share of worker-time spent in
    rollouts, and the env steps per second of a rollout while it ran (pairs inside the window)."""
    inside, steps, ran = 0.0, 0, 0.0
    for st in stats:
        for t0, t1, n in st.get("spans", []):
            inside += max(0.0, min(t1, end) - max(t0, start))
            if t0 >= start and t1 <= end:
                steps, ran = steps + n, ran + (t1 - t0)
    busy = inside / max(len(stats) * (end - start), 1e-9)
    return busy, steps / ran if ran else float("nan")


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    from surreal.algos.es.config import ESConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="gym:HalfCheetah-v5")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--population", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median, range)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "es_scaling.png"))
    parser.add_argument("--single-run", metavar="CONFIG_JSON", help=argparse.SUPPRESS)
    parser.add_argument("--noise-dir", help=argparse.SUPPRESS)
    parser.add_argument("--tail", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single_run:  # the child process of single_process()
        _single_run(args.env, args.single_run, args.generations, args.noise_dir, args.tail)
        return
    fields = {
        "hidden": [64, 64],
        "population": args.population,
        "noise_size": 5_000_000,
        "eval_every": 0,
    }
    cfg, cfg_json = ESConfig(**fields), json.dumps(fields)
    cores = os.cpu_count() or 1
    counts = [int(w) for w in args.workers.split(",")]
    names = ["single process"]
    for n in counts:
        names += [f"{n} loops side by side"] if n > 1 else []
        names += [f"{n} workers"]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as noise_dir:
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]  # alternate the order between rounds
            for name in order:
                if name == "single process":
                    run = single_process(args.env, cfg_json, args.generations, noise_dir)
                elif name.endswith("side by side"):
                    n = int(name.split()[0])
                    run = single_process(args.env, cfg_json, args.generations, noise_dir, n)
                else:
                    n = int(name.split()[0])
                    run = distributed(args.env, cfg, cfg_json, n, args.generations, noise_dir)
                runs[name].append(run)
                loads.append(os.getloadavg()[0])
                more = (
                    f", busy {run['busy']:.0%}, rollouts {run['speed']:,.0f}"
                    if "busy" in run
                    else ""
                )
                if "each" in run and len(run["each"]) > 1:
                    more = f" ({' + '.join(f'{x:,.0f}' for x in run['each'])})"
                print(f"round {r + 1} {name}: {run['rate']:,.0f} steps/s{more}", flush=True)
    rows = _table(args, runs, names, cores, loads)
    _plot(rows, rows[0][2], cores, args, loads)


def _table(args, runs: dict, names: list[str], cores: int, loads: list[float]) -> list[tuple]:
    base = runs["single process"]
    print(
        f"\nES throughput on {args.env}, population {args.population} pairs, {args.generations} "
        f"generations measured per run, {args.rounds} alternating rounds, {cores} cores\n"
        f"threads: {thread_settings()} (master and workers alike); load average (1 min) "
        f"{min(loads):.1f}-{max(loads):.1f} during the run, median {_median(loads):.1f}"
    )
    print(
        f"{'':>22} {'steps/s med':>11} {'(min-max)':>17} {'vs single':>9} {'(min-max)':>11} "
        f"{'vs linear':>9} {'cores':>5} {'steps/core-s':>12} {'of ceiling':>10} {'syncs':>5} "
        f"{'dropped':>7} {'re-issued at once/timeout':>25} {'busy':>5} {'rollout speed':>13}"
    )
    rows = []
    for name in names:
        got = runs[name]
        n = 1 if name == "single process" else int(name.split()[0])
        rates = [g["rate"] for g in got]
        ratios = [g["rate"] / b["rate"] for g, b in zip(got, base, strict=True)]  # same round
        used = _median([g["cores"] for g in got])
        rate, ratio = _median(rates), _median(ratios)
        ceiling = runs.get(f"{n} loops side by side") if name.endswith("workers") else None
        of_ceiling = (
            f"{_median([g['rate'] / c['rate'] for g, c in zip(got, ceiling, strict=True)]):>10.2f}"
            if ceiling
            else f"{'':>10}"
        )
        extra = (
            f"{max(g['syncs'] for g in got):>5} {sum(g['dropped'] for g in got):>7} "
            f"{sum(g['released'] for g in got):>14}/{sum(g['timeouts'] for g in got):<10} "
            f"{_median([g['busy'] for g in got]):>5.0%} "
            f"{_median([g['speed'] / b['rate'] for g, b in zip(got, base, strict=True)]):>12.2f}x"
            if name.endswith("workers")
            else ""
        )
        print(
            f"{name:>22} {rate:>11,.0f} {f'({min(rates):,.0f}-{max(rates):,.0f})':>17} "
            f"{ratio:>9.2f} {f'({min(ratios):.2f}-{max(ratios):.2f})':>11} "
            f"{ratio / min(n, cores):>9.2f} {used:>5.2f} {rate / max(used, 1e-9):>12,.0f} {of_ceiling} {extra}"
        )
        rows.append((name, n, rate, used))
    print(
        "vs single: each run divided by the single-process run of the same round, median; "
        "N loops side by side: N independent single-process loops at once, rates added (the "
        "machine's ceiling for N workers); of ceiling: N workers / N loops side by side, same "
        "round (median); syncs: most full parameter syncs of any worker (1 = only the join); busy: share of "
        "worker-time in rollouts; rollout speed: a worker's env steps/s while in a rollout, vs "
        "the single loop's, same round (median)"
    )
    return rows


def _plot(rows, base: float, cores: int, args, loads: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    dist = [r for r in rows if r[0].endswith("workers")]
    side = [r for r in rows if r[0].endswith("side by side")]
    ns = [r[1] for r in dist]
    ax1.plot(ns, [r[2] for r in dist], "o-", label="master + N workers (measured)")
    ax1.plot(
        ns,
        [base * min(n, cores) for n in ns],
        ":",
        color="black",
        label=f"linear over {cores} cores",
    )
    if side:
        ax1.plot(
            [r[1] for r in side],
            [r[2] for r in side],
            "s",
            color="tab:green",
            label="N independent loops side by side (ceiling)",
        )
    ax1.axhline(base, color="tab:orange", label="single-process loop")
    ax1.set_xlabel("ES workers")
    ax1.set_ylabel("env steps / s")
    ax1.legend(fontsize=8)
    ax2.plot(ns, [r[2] / max(r[3], 1e-9) for r in dist], "o-", label="master + N workers")
    ax2.axhline(rows[0][2] / max(rows[0][3], 1e-9), color="tab:orange", label="single-process loop")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("ES workers")
    ax2.set_ylabel("env steps per CPU-second")
    ax2.legend(fontsize=8)
    fig.suptitle(f"ES scaling on {args.env} ({cores} cores, load average {_median(loads):.0f})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
