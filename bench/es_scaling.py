"""ES scaling: environment interactions per second against the number of ES workers.

The Surreal paper's Fig. 4 shows near-linear growth of ES throughput with the number of actors.
Here the real master (caraml request-reply, seeds and returns only) runs in this process and N
worker processes share one noise table in /dev/shm; beside them, in the same run, the
single-process ES loop with the same config. Ratios are to the single-process loop and to linear
scaling over the cores present (N workers cannot beat min(N, cores) x one loop).

    .venv/bin/python bench/es_scaling.py [--env gym:HalfCheetah-v5] [--workers 1,2,4] [--generations 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
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


def single_process(env_id: str, cfg, generations: int, noise_dir: str) -> tuple[float, float]:
    """(env steps per second, cores used) of the single-process ES loop (after a warm-up)."""
    from surreal.algos.es.loop import train

    train(env_id, cfg, 1, seed=0, noise_dir=noise_dir)  # warm-up (imports, noise table)
    cpu0 = _cpu_seconds([os.getpid()])
    _, res = train(env_id, cfg, generations, seed=0, noise_dir=noise_dir)
    return res.env_steps / res.wall_s, (_cpu_seconds([os.getpid()]) - cpu0) / res.wall_s


def distributed(
    env_id: str, cfg, cfg_json: str, workers: int, generations: int, noise_dir: str
) -> tuple[float, float]:
    """(env steps per second, cores used) of master + workers, from the end of generation 1 on."""
    from caraml.testing import free_port
    from surreal.algos.es.loop import build
    from surreal.algos.es.master import ESMaster, serve

    _, policy, state, noise = build(env_id, cfg, 0, noise_dir)
    master = ESMaster(policy, state, noise, cfg, generations=generations + 1, seed=0)
    address = f"tcp://127.0.0.1:{free_port()}"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "surreal.algos.es.worker",
                "--env",
                env_id,
                "--master",
                address,
                "--name",
                f"w{i}",
                "--noise-dir",
                noise_dir,
                "--config",
                cfg_json,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    pids, cpu = [os.getpid(), *(p.pid for p in procs)], {}

    def on_generation(m, i: int) -> bool:
        if i in (0, generations):
            cpu[i] = _cpu_seconds(pids)
        return False

    try:
        serve(master, address, on_generation, timeout=600)
    finally:
        for p in procs:
            if p.wait(timeout=30) != 0:
                print(f"worker exited with {p.returncode}", file=sys.stderr)
    (_, s1, w1, _), (_, s2, w2, _) = master.finished[0], master.finished[-1]
    return (s2 - s1) / (w2 - w1), (cpu[generations] - cpu[0]) / (w2 - w1)


def main() -> None:
    from surreal.algos.es.config import ESConfig

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="gym:HalfCheetah-v5")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--population", type=int, default=16)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "es_scaling.png"))
    args = parser.parse_args()
    fields = {
        "hidden": [64, 64],
        "population": args.population,
        "noise_size": 5_000_000,
        "eval_every": 0,
    }
    cfg, cfg_json = ESConfig(**fields), json.dumps(fields)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as noise_dir:
        base, base_cores = single_process(args.env, cfg, args.generations, noise_dir)
        rows = [("single process", 1, base, base_cores)]
        for n in (int(w) for w in args.workers.split(",")):
            rows.append(
                (
                    f"{n} workers",
                    n,
                    *distributed(args.env, cfg, cfg_json, n, args.generations, noise_dir),
                )
            )
    print(
        f"\nES throughput on {args.env}, population {args.population} pairs, {cores} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'':>16} {'env steps/s':>12} {'vs single':>10} {'vs linear':>10} {'cores used':>11} "
        f"{'steps/core-s':>13}"
    )
    for name, n, rate, used in rows:
        linear = base * min(n, cores)
        print(
            f"{name:>16} {rate:>12,.0f} {rate / base:>10.2f} {rate / linear:>10.2f} {used:>11.2f} "
            f"{rate / max(used, 1e-9):>13,.0f}"
        )
    _plot(rows, base, cores, args)


def _plot(rows, base: float, cores: int, args) -> None:
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
    fig.suptitle(f"ES scaling on {args.env} ({cores} cores, load average {os.getloadavg()[0]:.0f})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
