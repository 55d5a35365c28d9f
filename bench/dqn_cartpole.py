"""DQN on CartPole-v1: surreal's `dqn` beside CleanRL's `dqn.py` (bench/peers/cleanrl_dqn.py) on
this machine, seed by seed, alternating which goes first: env steps to a greedy evaluation of
475, the wall time to it, and the best evaluation within the budget.

Both stop at the first evaluation >= 475 or at 500k env steps (issue 48's budget). surreal:
`surreal launch dqn --env gym:CartPole-v1 --actors 2 --steps 500000 --set run.seed=S --set
run.stop_at_return=475` (its evaluator: 5 greedy episodes every 5 s, in its own process); CleanRL:
5 greedy episodes every 10k env steps. Wall time is from the process's start to the evaluation
that reached 475 (surreal's includes its ~6 s of process start-up).

    python bench/dqn_cartpole.py            # 3 seeds (--rounds N), ~10 minutes on 2 cores
    python bench/dqn_cartpole.py --quick    # one seed, 30k steps: the harness only
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report

HERE = Path(__file__).resolve().parent
GOAL, BUDGET = 475.0, 500_000


def surreal_run(seed: int, steps: int, folder: Path) -> dict:
    """One `surreal launch dqn` run: (step, eval, seconds since start) of every evaluation."""
    cmd = [sys.executable, "-m", "surreal", "launch", "dqn", "--env", "gym:CartPole-v1"]
    cmd += ["--actors", "2", "--steps", str(steps), "--folder", str(folder), "--quiet"]
    cmd += ["--name", "dqn", "--trial", f"s{seed}", "--set", f"run.seed={seed}"]
    cmd += ["--set", f"run.stop_at_return={GOAL}"]
    env = dict(os.environ, SYMPHONY_HOME=str(folder / "home"))
    start = time.time()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True, timeout=1800)
    wall = time.time() - start
    evals = []
    for line in (folder / "dqn" / f"s{seed}" / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("name") == "charts/eval_return":
            evals.append((record["step"], record["value"], record["time"] - start))
    return {"evals": evals, "wall_s": wall}


def cleanrl_run(seed: int, steps: int) -> dict:
    """One run of bench/peers/cleanrl_dqn.py, the same way."""
    cmd = [sys.executable, str(HERE / "peers" / "cleanrl_dqn.py"), "--seed", str(seed)]
    cmd += ["--total-timesteps", str(steps), "--stop-at", str(GOAL)]
    if steps < 50_000:  # --quick: learn (and evaluate) within the short budget
        cmd += ["--eval-every", "5000"]
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600).stdout
    wall = time.time() - start
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    evals = [(r["step"], r["eval"], r["t"] - start) for r in records if "eval" in r]
    return {"evals": evals, "wall_s": wall}


def summary(run: dict) -> dict:
    """Steps and seconds to the first evaluation >= GOAL (None: not reached), the best one."""
    reached = next(((s, t) for s, v, t in run["evals"] if v >= GOAL), (None, None))
    best = max((v for _, v, _ in run["evals"]), default=float("nan"))
    return {"steps_to_goal": reached[0], "s_to_goal": reached[1], "best": best, **run}


def cell(values: list, fmt: str) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "not reached"
    text = f"{fmt.format(statistics.median(got))} [{fmt.format(min(got))}-{fmt.format(max(got))}]"
    return text if len(got) == len(values) else f"{text} ({len(got)} of {len(values)})"


def table(results: dict[str, list[dict]], header: str) -> list[str]:
    lines = [
        header,
        "",
        f"| system | seeds reaching {GOAL:.0f} | env steps to {GOAL:.0f}, median [range] | wall s to {GOAL:.0f} | best eval | per seed (steps, s) |",
    ]
    lines.append("|---|---:|---:|---:|---:|---|")
    for name, runs in results.items():
        per = ", ".join(
            f"s{i + 1}: {r['steps_to_goal'] or '-'}, {r['s_to_goal'] or 0:.0f}"
            for i, r in enumerate(runs)
        )
        reached = sum(r["steps_to_goal"] is not None for r in runs)
        lines.append(
            f"| {name} | {reached} of {len(runs)} | {cell([r['steps_to_goal'] for r in runs], '{:,.0f}')} "
            f"| {cell([r['s_to_goal'] for r in runs], '{:.0f}')} | {cell([r['best'] for r in runs], '{:.0f}')} | {per} |"
        )
    return lines


def main() -> None:
    run = report.start("dqn_cartpole", __doc__)
    steps = 30_000 if run.rounds == 1 and "--quick" in sys.argv else BUDGET
    results: dict[str, list[dict]] = {
        "surreal dqn (2 actors x 8 envs)": [],
        "CleanRL dqn.py (1 env)": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, run.rounds + 1):
            order = list(results) if seed % 2 else list(results)[::-1]
            for name in order:
                if name.startswith("surreal"):
                    result = surreal_run(seed, steps, Path(tmp))
                else:
                    result = cleanrl_run(seed, steps)
                results[name].append(summary(result))
    run.measured()
    stamp = time.strftime("%Y-%m-%d %H:%M")
    lines = table(results, run.header(f"budget {steps:,} env steps, goal {GOAL:.0f}", stamp))
    run.publish(lines, {"results": results, "budget": steps}, None)


if __name__ == "__main__":
    main()
