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


def single_process(env_id: str, cfg_json: str, generations: int, noise_dir: str) -> dict:
    """Env steps per second and cores used of the single-process ES loop, in a fresh process of
    its own (as each worker is), after a one-generation warm-up there."""
    cmd = [sys.executable, __file__, "--single-run", cfg_json, "--env", env_id]
    cmd += ["--generations", str(generations), "--noise-dir", noise_dir]
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # thread settings as the caller has them
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _single_run(env_id: str, cfg_json: str, generations: int, noise_dir: str) -> None:
    """The child of single_process: prints its rate and cores used as one JSON line."""
    from surreal.algos.es.config import ESConfig
    from surreal.algos.es.loop import train

    cfg = ESConfig(**json.loads(cfg_json))
    train(env_id, cfg, 1, seed=0, noise_dir=noise_dir)  # warm-up (imports, caches)
    cpu0 = time.process_time()
    _, res = train(env_id, cfg, generations, seed=0, noise_dir=noise_dir)
    used = (time.process_time() - cpu0) / res.wall_s
    print(json.dumps({"rate": res.env_steps / res.wall_s, "cores": used}))


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
    cmd += ["--noise-dir", noise_dir, "--config", cfg_json]
    procs = [
        subprocess.Popen([*cmd, "--name", f"w{i}"], env=env, stdout=subprocess.PIPE, text=True)
        for i in range(workers)
    ]
    pids, cpu = [os.getpid(), *(p.pid for p in procs)], {}

    def on_generation(m, i: int) -> bool:
        if i in (0, generations):
            cpu[i] = _cpu_seconds(pids)
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
    return {
        "rate": (s2 - s1) / (w2 - w1),
        "cores": (cpu[generations] - cpu[0]) / (w2 - w1),
        "syncs": max((st.get("syncs", -1) for st in stats), default=-1),
        "dropped": sum(st.get("dropped", 0) for st in stats),
        "released": master.released,
        "timeouts": master.reissued,
    }


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
    args = parser.parse_args()
    if args.single_run:  # the child process of single_process()
        _single_run(args.env, args.single_run, args.generations, args.noise_dir)
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
    names = ["single process", *(f"{n} workers" for n in counts)]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as noise_dir:
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]  # alternate the order between rounds
            for name in order:
                if name == "single process":
                    run = single_process(args.env, cfg_json, args.generations, noise_dir)
                else:
                    n = int(name.split()[0])
                    run = distributed(args.env, cfg, cfg_json, n, args.generations, noise_dir)
                runs[name].append(run)
                loads.append(os.getloadavg()[0])
                print(f"round {r + 1} {name}: {run['rate']:,.0f} steps/s", flush=True)
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
        f"{'':>15} {'steps/s med':>11} {'(min-max)':>17} {'vs single':>9} {'(min-max)':>11} "
        f"{'vs linear':>9} {'cores':>5} {'steps/core-s':>12} {'syncs':>5} {'dropped':>7} "
        f"{'re-issued at once/timeout':>25}"
    )
    rows = []
    for name in names:
        got = runs[name]
        n = 1 if name == "single process" else int(name.split()[0])
        rates = [g["rate"] for g in got]
        ratios = [g["rate"] / b["rate"] for g, b in zip(got, base, strict=True)]  # same round
        used = _median([g["cores"] for g in got])
        rate, ratio = _median(rates), _median(ratios)
        extra = (
            f"{max(g['syncs'] for g in got):>5} {sum(g['dropped'] for g in got):>7} "
            f"{sum(g['released'] for g in got):>14}/{sum(g['timeouts'] for g in got):<10}"
            if name != "single process"
            else ""
        )
        print(
            f"{name:>15} {rate:>11,.0f} {f'({min(rates):,.0f}-{max(rates):,.0f})':>17} "
            f"{ratio:>9.2f} {f'({min(ratios):.2f}-{max(ratios):.2f})':>11} "
            f"{ratio / min(n, cores):>9.2f} {used:>5.2f} {rate / max(used, 1e-9):>12,.0f} {extra}"
        )
        rows.append((name, n, rate, used))
    print(
        "vs single: each run divided by the single-process run of the same round, median; "
        "syncs: most full parameter syncs of any worker (1 = only the join)"
    )
    return rows


def _plot(rows, base: float, cores: int, args, loads: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    dist = [r for r in rows if r[0] != "single process"]
    ns = [r[1] for r in dist]
    ax1.plot(ns, [r[2] for r in dist], "o-", label="master + N workers (measured)")
    ax1.plot(
        ns,
        [base * min(n, cores) for n in ns],
        ":",
        color="black",
        label=f"linear over {cores} cores",
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
