"""Surreal against the real peers on HalfCheetah-v5: PPO (CleanRL, Sample Factory, RLlib) and TD3
(CleanRL), in alternating rounds, every system measured the same way from its own step counter.

    /work/main/.venv/bin/python bench/peers/run.py --quick        # 2 rounds, < 20 min on 2 cores
    /work/main/.venv/bin/python bench/peers/run.py --rounds 3 --seconds 300 --systems surreal-ppo,cleanrl-ppo

Each round launches every system once, in an order that alternates between rounds (round 2 runs
the list reversed), with the same wall budget. From each system's own counter (env steps consumed
by its learner: surreal's global step, CleanRL's global_step after each update, Sample Factory's
"Total num frames", RLlib's num_env_steps_sampled_lifetime) the table reports start-up (launch to
the first counted step) and the steady rate over the window that starts `--skip` seconds later
and ends at the wall budget (counts after it, e.g. during a slow shutdown, are ignored), the
training return each system last reported by the budget (TD3 systems: the window starts after
their random-action warm-up, `learning_starts`); medians and [min-max] over rounds, ratios to the CleanRL file of the same algorithm paired round
by round, torch threads, and the load average before and after every run. Peers that cannot be
installed or run here are listed with the reason, never with a number. Plots go to bench/out/:
peers_throughput.png and peers_learning.png (return vs wall-clock, every system, every round),
and the raw samples to peers.json (`--table-from bench/out/peers.json` re-prints the table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stats  # noqa: E402
from systems import BASELINE, SYSTEMS, Run, Unavailable, td3_learning_starts  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 rounds x 70 s per system (< 20 min for all six)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=180.0, help="wall budget per launch")
    parser.add_argument(
        "--skip", type=float, default=15.0, help="s after the first step before the window"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads in every process")
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help="comma-separated: " + ",".join(SYSTEMS)
    )
    parser.add_argument(
        "--table-from", type=Path, help="re-print the table and plots of a saved peers.json"
    )
    args = parser.parse_args()
    if args.table_from:
        return _replay(args.table_from)
    if args.quick:
        args.rounds, args.seconds, args.skip = 2, 70.0, 10.0
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {unknown}; choose from {','.join(SYSTEMS)}")
    results: dict[str, list] = {n: [] for n in names}
    unavailable: dict[str, str] = {}
    loads: list[float] = []
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            if name in unavailable:
                continue
            loads.append(os.getloadavg()[0])
            try:
                run = SYSTEMS[name].launch(args.seconds, args.threads, args.quick)
            except Unavailable as e:
                unavailable[name] = str(e)
                print(f"round {r + 1} {name}: unavailable: {e}", flush=True)
                continue
            loads.append(os.getloadavg()[0])
            results[name].append(run)
            window = _window(name, run, args)
            print(
                f"round {r + 1} {name}: {window.rate if window else float('nan'):,.0f} steps/s "
                f"(start-up {window.startup_s if window else float('nan'):.0f} s) {run.error}",
                flush=True,
            )
    _table(names, results, unavailable, loads, args)
    OUT.mkdir(parents=True, exist_ok=True)
    saved = {
        "args": {k: v for k, v in vars(args).items() if k != "table_from"},
        "names": names,
        "unavailable": unavailable,
        "loads": loads,
        "runs": {n: [vars(run) for run in runs] for n, runs in results.items()},
    }
    (OUT / "peers.json").write_text(json.dumps(saved, indent=1))
    _plots(names, results, args)


def _replay(path: Path) -> None:
    """The table and plots of a run saved in `path` (no system is launched)."""
    saved = json.loads(path.read_text())
    args = argparse.Namespace(**saved["args"])
    results = {n: [Run(**run) for run in runs] for n, runs in saved["runs"].items()}
    _table(saved["names"], results, saved["unavailable"], saved["loads"], args)
    _plots(saved["names"], results, args, out=path.parent)  # beside the saved run


def _window(name: str, run, args) -> stats.Window | None:
    floor = td3_learning_starts(args.quick) if SYSTEMS[name].algo == "td3" else 0
    # the same wall budget for everyone: samples after it (a slow shutdown) do not count
    inside = [(t, steps) for t, steps in run.steps if t <= args.seconds]
    return stats.steady_rate(inside, args.skip, min_steps=floor)


def _table(names, results, unavailable, loads, args) -> None:
    print(
        f"\nHalfCheetah-v5, {os.cpu_count()} cores, {args.rounds} alternating rounds, {args.seconds:.0f} s per "
        f"launch, window from {args.skip:.0f} s after the first counted step to the budget, "
        f"torch threads {args.threads} per process (OMP/MKL {args.threads}), "
        f"load average {min(loads, default=0):.1f}-{max(loads, default=0):.1f}"
    )
    print(
        f"{'system':<20} {'steady env steps/s':>22} {'start-up s':>16} {'ratio to CleanRL':>22} "
        f"{'return at budget':>20}"
    )
    for name in names:
        if name in unavailable:
            print(f"{name:<20} not run: {unavailable[name]}")
            continue
        windows = [_window(name, run, args) for run in results[name]]
        rates = [w.rate if w else None for w in windows]
        base = BASELINE[SYSTEMS[name].algo]
        ratio = "-"
        if base in results and base != name and base not in unavailable:
            base_rates = [
                w.rate if w else None for w in (_window(base, r, args) for r in results[base])
            ]
            paired = stats.spread(stats.paired_ratios(rates, base_rates))
            ratio = f"{paired}x" if paired.n else "-"
        final = [stats.value_at(run.returns, args.seconds) for run in results[name]]
        errors = {run.error for run in results[name] if run.error}
        note = (
            f"  no steady window: {'; '.join(errors) or 'too few counter samples'}"
            if not any(rates)
            else ""
        )
        print(
            f"{name:<20} {str(stats.spread(rates)):>22} "
            f"{str(stats.spread([w.startup_s if w else None for w in windows])):>16} "
            f"{ratio:>22} {str(stats.spread(final)):>20}{note}"
        )
    for name in names:
        print(f"  {name}: {SYSTEMS[name].setup}")


def _plots(names, results, args, out: Path = OUT) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    measured = [n for n in names if results[n]]
    for i, name in enumerate(measured):
        rates = [w.rate for w in (_window(name, r, args) for r in results[name]) if w]
        if rates:
            ax.scatter([i] * len(rates), rates, color=f"C{i}")
            ax.hlines(stats.spread(rates).median, i - 0.3, i + 0.3, color=f"C{i}")
    ax.set_xticks(range(len(measured)), measured, rotation=20)
    ax.set_ylabel("steady env steps/s (each round, median bar)")
    ax.set_title(f"HalfCheetah, {os.cpu_count()} cores, {args.threads} torch thread/process")
    fig.tight_layout()
    fig.savefig(out / "peers_throughput.png", dpi=100)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, name in enumerate(names):
        ax = axes[0 if SYSTEMS[name].algo == "ppo" else 1]
        for j, run in enumerate(results[name]):
            curve = [(t, v) for t, v in run.returns if t <= args.seconds]
            if curve:
                ts, vs = zip(*curve, strict=True)
                ax.plot(ts, vs, color=f"C{i}", alpha=0.8, label=name if j == 0 else None)
    for ax, algo in zip(axes, ("PPO", "TD3"), strict=True):
        ax.set_xlabel("wall-clock s since launch")
        ax.set_ylabel("training episode return")
        ax.set_title(f"{algo} HalfCheetah at equal wall time")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "peers_learning.png", dpi=100)
    print(f"plots: {out / 'peers_throughput.png'}, {out / 'peers_learning.png'}")


if __name__ == "__main__":
    main()
