"""TD3 and SAC on MuJoCo through `surreal launch`, side by side with CleanRL's files, in sittings.

For each algorithm, one `surreal launch` part (bench/mujoco_suite.py's, the MuJoCo family's
defaults) and CleanRL's file for it (bench/peers/cleanrl_td3.py, cleanrl_sac.py) run at the same
time on the same machine, for the same env steps and seed, so both see the same load in the same
window. Both resume where they stopped: Ctrl-C (or SIGTERM to this script) stops both with a
checkpoint, and the same command goes on in a later sitting. Each sitting's start, end and the
load average every 30 s are kept in FOLDER/sittings.jsonl; a system's wall time is the sum of its
sittings (the gaps between sittings left out).

    python bench/offpolicy_peers.py --algo td3 --env HalfCheetah-v5 --steps 300000   # a sitting
    python bench/offpolicy_peers.py --report-only                                    # the table

The report (`bench/out/offpolicy_peers.md` and one curve plot per algorithm and env) gives, for
each system: env steps reached, a greedy evaluation at the end (10 episodes: `surreal eval RUN`
of the last checkpoint; the CleanRL file's own `--eval-episodes 10`), the mean training return
over the last 5% of steps, the wall time summed over sittings, and the load average seen.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mujoco_suite  # noqa: E402

HERE = Path(__file__).resolve().parent
ALGOS = ("td3", "sac")
EVAL_EPISODES = mujoco_suite.FINAL_EPISODES
LOAD_EVERY_S = 30.0
STOPPED: list[int] = []
"""The stop signal this script got (it stops both systems and starts no other sitting)."""


def peer_dir(folder: Path, algo: str, env: str, seed: int) -> Path:
    return folder / f"cleanrl-{algo}-{env.lower()}" / f"s{seed}"


def peer_records(run: Path) -> list[dict]:
    path = run / "progress.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def peer_evals(records: list[dict]) -> list[tuple[int, float]]:
    """(env step, greedy return) of each evaluation in a CleanRL file's progress lines (a line
    without its step is at the step printed before it)."""
    found, step = [], 0
    for r in records:
        step = int(r.get("step", step))
        if "eval" in r:
            found.append((step, float(r["eval"])))
    return found


def peer_command(algo: str, env: str, seed: int, steps: int, run: Path) -> list[str] | None:
    """CleanRL's file for ALGO, resuming from RUN/state.pt; None once it has evaluated after
    `steps` env steps (a larger `steps` goes on from there)."""
    if any(at >= steps for at, _ in peer_evals(peer_records(run))):
        return None
    return [
        sys.executable,
        str(HERE / "peers" / f"cleanrl_{algo}.py"),
        *("--env", env, "--total-timesteps", str(steps), "--seconds", "1e9", "--threads", "1"),
        *("--seed", str(seed), "--checkpoint", str(run / "state.pt")),
        *("--eval-episodes", str(EVAL_EPISODES)),
    ]


def sitting(algo: str, env: str, seed: int, steps: int, actors: int, folder: Path, extra: list):
    """Both systems for one algorithm at once, until both finish or a stop signal."""
    surreal_run, surreal_cmd = mujoco_suite.launch_command(
        algo, env, seed, steps, actors, folder, extra
    )
    peer_run = peer_dir(folder, algo, env, seed)
    peer_run.mkdir(parents=True, exist_ok=True)
    cmds = {"surreal": surreal_cmd, "cleanrl": peer_command(algo, env, seed, steps, peer_run)}
    threads = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    procs: dict[str, subprocess.Popen] = {}
    with open(peer_run / "progress.jsonl", "a") as peer_log:
        for system, cmd in cmds.items():
            if cmd is None:
                print(f"{algo} {env} s{seed} {system}: finished before, kept", flush=True)
                continue
            print(" ".join(cmd), flush=True)
            out = peer_log if system == "cleanrl" else None
            procs[system] = subprocess.Popen(cmd, stdout=out, env=threads, start_new_session=True)
        started, loads, codes = time.time(), [], {}

        def forward(signum: int, frame: object) -> None:
            STOPPED.append(signum)
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, forward)
        ended = {}
        while len(codes) < len(procs):
            loads.append(round(os.getloadavg()[0], 2))
            running = [s for s in procs if s not in codes]
            for system in running:
                try:
                    codes[system] = procs[system].wait(timeout=LOAD_EVERY_S / len(running))
                    ended[system] = time.time()
                except subprocess.TimeoutExpired:
                    pass
    key = {"algo": algo, "env": env, "seed": seed}
    with open(folder / "sittings.jsonl", "a") as f:
        for system in procs:
            row = key | {"system": system, "start": started, "end": ended[system]}
            f.write(json.dumps(row | {"code": codes[system], "load": loads}) + "\n")
    print(f"{algo} {env} s{seed}: exit codes {codes}, {time.time() - started:.0f} s", flush=True)
    runs = {"surreal": surreal_run, "cleanrl": peer_run}
    for system in procs:
        found = finished(system, runs[system], steps)
        if codes[system] == 0 and found:
            sits = _sittings(folder, algo, env, seed, system)
            load = [x for r in sits for x in r["load"]]
            found |= {"wall_s": sum(r["end"] - r["start"] for r in sits), "sittings": len(sits)}
            found |= {"load": [min(load), max(load)] if load else None}
            with open(folder / "results.jsonl", "a") as f:
                f.write(json.dumps(key | {"system": system, "budget": steps} | found) + "\n")


def finished(system: str, run: Path, steps: int) -> dict | None:
    """Steps, greedy evaluation and last-5% training return of a system that finished `steps`
    (surreal: `surreal eval RUN` of its last checkpoint), else None."""
    if system == "cleanrl":
        s = peer_summary(run)
        s.pop("curve")
        return s if s["final"] == s["final"] and s["steps"] >= steps else None
    status = (
        json.loads((run / "status.json").read_text()) if (run / "status.json").is_file() else {}
    )
    if not (status.get("finished") and int(status.get("global_step") or 0) >= steps):
        return None
    return mujoco_suite.summary(run) | {"steps": int(status["global_step"])}


def _sittings(folder: Path, algo: str, env: str, seed: int, system: str) -> list[dict]:
    path = folder / "sittings.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    key = {"algo": algo, "env": env, "seed": seed, "system": system}
    return [r for r in rows if all(r[k] == v for k, v in key.items())]


def peer_summary(run: Path) -> dict:
    records = peer_records(run)
    steps = max((int(r["step"]) for r in records if "step" in r), default=0)
    returns = [(int(r["step"]), float(r["return"])) for r in records if "return" in r]
    tail = [v for s, v in returns if s >= 0.95 * steps]
    evals = [value for at, value in peer_evals(records) if at >= steps]
    return {
        "steps": steps,
        "final": evals[-1] if evals else float("nan"),
        "train": sum(tail) / len(tail) if tail else float("nan"),
        "curve": returns,
    }


def _num(value: float) -> str:
    return f"{value:,.0f}" if value == value else "-"  # NaN: none yet


def report(folder: Path, out: Path, seeds: list[int], envs: list[str]) -> str:
    """One row per system and finished budget (FOLDER/results.jsonl), and one for a system still
    short of its next budget (its steps so far, no evaluation yet)."""
    rows = [
        f"| algo | env | seed | system | budget | env steps | greedy eval at the end "
        f"({EVAL_EPISODES} episodes) | train return, last 5% | wall (min, sittings summed) | "
        "sittings | load average |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    path = folder / "results.jsonl"
    results = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    for algo in ALGOS:
        for env in envs:
            for seed in seeds:
                surreal_run = mujoco_suite.part_dir(folder, algo, env) / f"s{seed}"
                now = {}
                if (surreal_run / "metrics.jsonl").is_file():
                    status = json.loads((surreal_run / "status.json").read_text())
                    steps = int(status.get("global_step") or 0)
                    c = mujoco_suite.curves(surreal_run)
                    now["surreal"] = {"steps": steps, "curve": c["train"], "evals": c["eval"]}
                if peer_records(peer_dir(folder, algo, env, seed)):
                    now["cleanrl"] = peer_summary(peer_dir(folder, algo, env, seed))
                marks = {}
                for system, state in now.items():
                    key = {"algo": algo, "env": env, "seed": seed, "system": system}
                    done = [r for r in results if all(r[k] == v for k, v in key.items())]
                    marks[system] = [(r["steps"], r["final"]) for r in done]
                    for r in done:
                        load = f"{r['load'][0]:.1f}-{r['load'][1]:.1f}" if r["load"] else "-"
                        rows.append(
                            f"| {algo} | {env} | {seed} | {system} | {r['budget']:,} | "
                            f"{r['steps']:,} | {_num(r['final'])} | {_num(r['train'])} | "
                            f"{r['wall_s'] / 60:.1f} | {r['sittings']} | {load} |"
                        )
                    if not done or state["steps"] > max(r["steps"] for r in done):
                        sits = _sittings(folder, algo, env, seed, system)
                        wall = sum(r["end"] - r["start"] for r in sits) / 60
                        rows.append(
                            f"| {algo} | {env} | {seed} | {system} | (running) | "
                            f"{state['steps']:,} | - | - | {wall:.1f} | {len(sits)} | - |"
                        )
                if now:
                    _plot(algo, env, seed, now, marks, out)
    return "\n".join(rows) + "\n\n" + seed_summary(results, seeds, envs)


def seed_summary(results: list[dict], seeds: list[int], envs: list[str]) -> str:
    """Per algo, env and budget that both systems finished for the same seeds: each system's
    mean greedy return over those seeds [range], and surreal's mean over CleanRL's."""
    rows = [
        "| algo | env | budget | seeds | surreal greedy, mean [range] | "
        "CleanRL greedy, mean [range] | surreal / CleanRL |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    finals: dict[tuple, dict[str, dict[int, float]]] = {}
    for r in results:
        if r["seed"] in seeds and r["env"] in envs:
            key = (r["algo"], r["env"], r["budget"])
            finals.setdefault(key, {}).setdefault(r["system"], {})[r["seed"]] = r["final"]
    for (algo, env, budget), by_system in sorted(finals.items()):
        both = sorted(set(by_system.get("surreal", {})) & set(by_system.get("cleanrl", {})))
        if not both:
            continue
        cells = []
        for system in ("surreal", "cleanrl"):
            values = [by_system[system][seed] for seed in both]
            mean = sum(values) / len(values)
            cells.append((mean, f"{_num(mean)} [{_num(min(values))}-{_num(max(values))}]"))
        ratio = cells[0][0] / cells[1][0] if cells[1][0] > 0 else float("nan")
        rows.append(
            f"| {algo} | {env} | {budget:,} | {', '.join(map(str, both))} | {cells[0][1]} | "
            f"{cells[1][1]} | {ratio:.2f}x |"
        )
    return "\n".join(rows)


def _plot(algo: str, env: str, seed: int, now: dict, marks: dict, out: Path) -> None:
    """Each system's training return (a 20-episode running mean), surreal's periodic greedy
    evaluations (dots) and each finished budget's greedy evaluation (stars)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, system in enumerate(sorted(now)):
        color = f"C{i}"
        if now[system]["curve"]:
            steps, values = mujoco_suite._smooth(now[system]["curve"], 20)
            ax.plot(steps, values, color=color, label=f"{system} training (20-ep mean)")
        if now[system].get("evals"):
            steps, values = zip(*now[system]["evals"], strict=True)
            ax.plot(steps, values, "o", color=color, ms=3, label=f"{system} greedy eval (5 ep)")
        for step, value in marks.get(system, []):
            ax.plot([step], [value], "*", color=color, ms=11)
    ax.set_xlabel(f"env steps (stars: greedy evaluation, {EVAL_EPISODES} episodes, at the end)")
    ax.set_ylabel("return")
    ax.set_title(f"{algo} {env} seed {seed}: surreal launch and CleanRL's file, same window")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / f"offpolicy_peers_{algo}_{env}_s{seed}.png", dpi=90)
    plt.close(fig)


def use_eval_episodes(episodes: int) -> None:
    """Both systems' evaluation at the end of a budget takes `episodes` greedy episodes (this
    script's CleanRL `--eval-episodes` and `surreal eval --episodes`, and the tables' headers)."""
    global EVAL_EPISODES
    EVAL_EPISODES = mujoco_suite.FINAL_EPISODES = max(1, episodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", nargs="+", default=list(ALGOS), choices=ALGOS)
    parser.add_argument("--env", nargs="+", default=["HalfCheetah-v5"], choices=mujoco_suite.ENVS)
    parser.add_argument("--seed", nargs="+", type=int, default=[1])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--folder", type=Path, default=Path("runs/offpolicy-peers"))
    parser.add_argument("--set", action="append", default=[], dest="extra", help="KEY=VALUE")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--out", type=Path, default=mujoco_suite.OUT)
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=EVAL_EPISODES,
        help=f"greedy episodes of each system's evaluation at the end (default {EVAL_EPISODES})",
    )
    args = parser.parse_args()
    use_eval_episodes(args.eval_episodes)
    args.folder.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for algo in args.algo:
            for env in args.env:
                for seed in args.seed:
                    if not STOPPED:
                        sitting(algo, env, seed, args.steps, args.actors, args.folder, args.extra)
    table = report(args.folder, args.out, args.seed, args.env)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "offpolicy_peers.md").write_text(table + "\n")
    print(table)
    print(f"table: {args.out / 'offpolicy_peers.md'}")


if __name__ == "__main__":
    main()
