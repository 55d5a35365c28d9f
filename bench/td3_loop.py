"""surreal's single-process TD3 loop on MuJoCo with the MuJoCo recipe, one run per seed (issue 49).

`surreal.algos.ddpg.loop.train` is CleanRL's TD3 step for step (tests/surreal/test_td3_loop.py):
given the same random draws it takes the file's steps. Its runs are therefore samples of what
the algorithm does without any of the distributed run's additions (actors, policy lag, replay
and parameter hops), to set beside the distributed runs and CleanRL's file
(bench/reports/offpolicy.md). The recipe is the MuJoCo family's for TD3: lr 3e-4, 10k random
steps, 1-step returns, noise 0.1, 256x256, batch 256, one update per env step, 1 torch thread.

    python bench/td3_loop.py --seed 3 --steps 300000 --out runs/td3-loop   # ~30 min a 300k seed
                                                       # on a fast core; ~2 h on a 2-core CI box
    python bench/td3_loop.py --report --out runs/td3-loop                  # the table and plot

Each seed appends its greedy evaluations (5 episodes every `--eval-every` steps, with the wall
time and the 1-minute load average) to OUT/s{seed}.jsonl as they come, and ends with a
10-episode greedy evaluation. The table (OUT/td3_loop.md) sets each seed's final evaluation
beside CleanRL's file's on that seed at 300k as bench/offpolicy_peers.py measured it earlier
(bench/reports/offpolicy.md; recorded figures, not measured by this script: the file is
deterministic on the CPU build it ran on); OUT/td3_loop.png draws the evaluations. The loop
keeps no checkpoint: a stopped seed starts over. `--quick` (1,200 steps, 1,000 random ones) only
shows the script works.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from surreal.algos.ddpg.config import TD3Config
from surreal.algos.ddpg.loop import evaluate, make_gym_env, train

FINAL_EPISODES = 10
CLEANRL_300K = {1: 7_523, 2: 8_355, 3: 7_790, 4: 7_667}
"""CleanRL's TD3 file on HalfCheetah-v5 at 300k, greedy over 10 episodes, by seed: recorded by
bench/offpolicy_peers.py on 2026-12-05 (bench/reports/offpolicy.md), not measured here."""


def recipe(replay_start: int | None = None) -> TD3Config:
    """TD3 with the MuJoCo family's algorithm settings, as `surreal launch td3` applies them
    (`DDPGConfig.family_defaults('mujoco')`); `replay_start` overrides the warm-up."""
    family = TD3Config.family_defaults("mujoco")
    algo = {k.removeprefix("algo."): v for k, v in family.items() if k.startswith("algo.")}
    if replay_start is not None:
        algo["replay_start"] = replay_start
    return TD3Config(**algo)


def run_seed(
    env_id: str, seed: int, steps: int, eval_every: int, out: Path, replay_start: int | None = None
) -> dict:
    path = out / f"s{seed}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")  # the loop keeps no checkpoint: a seed run again starts over
    start = time.time()

    def log(row: dict) -> None:
        row = {"seed": seed, "wall_s": round(time.time() - start, 1), **row}
        row["load"] = round(os.getloadavg()[0], 2)
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    config = recipe(replay_start)
    algo, result = train(env_id, config, steps, seed=seed, eval_every=eval_every, log=log)
    final = evaluate(make_gym_env(env_id, seed + 1000), algo.act, FINAL_EPISODES, seed + 20_000)
    row = {"final_eval": final, "env_steps": result.env_steps, "updates": result.updates}
    log(row | {"episodes": FINAL_EPISODES})
    return row


def seed_rows(out: Path) -> dict[int, list[dict]]:
    """Each seed's lines in OUT/s{seed}.jsonl."""
    found = {}
    for path in sorted(out.glob("s*.jsonl"), key=lambda p: int(p.stem[1:])):
        found[int(path.stem[1:])] = [
            json.loads(line) for line in path.read_text().splitlines() if line.strip()
        ]
    return found


def report(out: Path, env_id: str) -> str:
    """The folder's seeds: evaluations along the way, the final one beside CleanRL's file's
    (recorded), the wall time and the load seen; and the mean over the seeds that finished."""
    cleanrl = CLEANRL_300K if env_id == "HalfCheetah-v5" else {}
    lines = [
        f"surreal's single-process TD3 loop, {env_id}, 1 torch thread, {os.cpu_count()} cores",
        "",
        "| seed | env steps | greedy evals (5 ep) | final greedy (10 ep) | CleanRL's file at 300k "
        "(recorded) | ratio | wall | load (1-min avg) |",
        "|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    pairs = []
    for seed, rows in seed_rows(out).items():
        evals = [
            f"{r['charts/eval_return']:,.0f} at {r['global_step'] / 1000:g}k"
            for r in rows
            if "charts/eval_return" in r
        ]
        final = next((r for r in rows if "final_eval" in r), None)
        steps = (
            final["env_steps"] if final else max((r.get("global_step", 0) for r in rows), default=0)
        )
        peer = cleanrl.get(seed) if steps == 300_000 else None
        ratio = "-"
        if final and peer:
            pairs.append((final["final_eval"], peer))
            ratio = f"{final['final_eval'] / peer:.2f}x"
        loads = [r["load"] for r in rows if "load" in r]
        load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
        final_cell = f"{final['final_eval']:,.0f}" if final else "-"
        lines.append(
            f"| {seed} | {steps:,} | {' / '.join(evals) or '-'} "
            f"| {final_cell} | {f'{peer:,}' if peer else '-'} "
            f"| {ratio} | {rows[-1]['wall_s'] / 60 if rows else 0:.1f} min | {load} |"
        )
    if pairs:
        ours, theirs = sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs)
        lines.append(
            f"| mean of {len(pairs)} | | | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f}x | | |"
        )
    return "\n".join(lines)


def plot(out: Path, env_id: str) -> Path | None:
    """OUT/td3_loop.png: each seed's greedy evaluations by env step (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for seed, rows in seed_rows(out).items():
        points = [
            (r["global_step"], r["charts/eval_return"]) for r in rows if "charts/eval_return" in r
        ]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", label=f"seed {seed}")
    ax.set(xlabel="env steps", ylabel="greedy return (5 episodes)", title=f"TD3 loop, {env_id}")
    ax.legend()
    path = out / "td3_loop.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--seed", nargs="+", type=int, default=[1])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=25_000)
    parser.add_argument("--out", type=Path, default=Path("runs/td3-loop"))
    parser.add_argument("--report", action="store_true", help="print the folder's table and stop")
    parser.add_argument("--quick", action="store_true", help="1,200 steps (1,000 random): a check")
    parser.add_argument("--no-plot", action="store_true", help="write no td3_loop.png")
    args = parser.parse_args()
    replay_start = None  # the recipe's
    if args.quick:
        args.steps, args.eval_every, replay_start = 1_200, 600, 1_000
    if not args.report:
        for seed in args.seed:
            run_seed(args.env, seed, args.steps, args.eval_every, args.out, replay_start)
    table = report(args.out, args.env)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "td3_loop.md").write_text(table + "\n")
    print(table)
    if not args.no_plot and (drawn := plot(args.out, args.env)) is not None:
        print(f"plot: {drawn}")


if __name__ == "__main__":
    main()
