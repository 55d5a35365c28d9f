"""The GPU check of issue 14, one command for a machine with a GPU (and ~16 cores), < 8 minutes:

1. PPO HalfCheetah-v5 throughput: the single-process CleanRL-style loop (CPU) beside `surreal
   launch ppo` with the CPU learner and with the GPU learner (`run.device=cuda`), same run.
2. A 1M-step PPO HalfCheetah-v5 run on the GPU learner: wall time, env steps/s, eval return.
3. TD3 HalfCheetah-v5 (`surreal launch ddpg` with the TD3 options) for the time that is left.

    bash bench/gpu_check.sh                 # the whole check (installs carried wheels from .whl/)
    python bench/gpu_check.py --dry-run     # print the plan and the commands, run nothing
    python bench/gpu_check.py --quick       # every phase for a few seconds (a CPU smoke test)

Writes `gpu_check.json` (every number) and prints the tables; `--out DIR` picks the folder.
PPO on the GPU uses a larger batch than CleanRL's 2048 (docs/surreal.md, "Scaling PPO"):
actors x 8 envs x `--rollout` steps per update, minibatches of `--minibatch-size`, 10 epochs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ppo_throughput  # noqa: E402  (the bench folder's own module)

ENV = "gym:HalfCheetah-v5"
TD3 = ("algo.twin_critics=true", "algo.policy_smoothing=0.2", "algo.actor_delay=2")


def ppo_settings(args: argparse.Namespace, device: str) -> tuple[str, ...]:
    return (
        f"run.device={device}",
        f"algo.minibatch_size={args.minibatch_size}",
        "algo.update_epochs=10",
        "algo.batch_size=0",  # one segment per actor: actors x 8 envs x --rollout steps
    )


def launch_cmd(algo: str, actors: int, steps: int, folder: str, sets: tuple[str, ...]) -> list[str]:
    """`surreal launch ALGO` on HalfCheetah-v5 into FOLDER/check/t1, quiet."""
    cmd = [sys.executable, "-m", "surreal", "launch", algo, "--env", ENV, "--actors", str(actors)]
    cmd += ["--steps", str(steps), "--folder", folder, "--name", "check", "--trial", "t1"]
    cmd += ["--quiet", "--set", "env.num_envs=8", "--set", "eval.episodes=5"]
    return cmd + [arg for item in sets for arg in ("--set", item)]


def run_until(cmd: list[str], run: Path, home: str, deadline: float) -> dict:
    """Run `cmd` until it exits or `deadline` (then Ctrl-C); what the run recorded."""
    env = dict(os.environ, SYMPHONY_HOME=home)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        stopped = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        stopped = True
    wall = time.monotonic() - started
    return {**read_run(run), "wall_s": wall, "stopped_at_deadline": stopped, "rc": proc.returncode}


def read_run(run: Path) -> dict:
    """Global step, learner steps/s and the eval returns (step, value) from a run folder."""
    status, evals, busy = {}, [], 0.0
    if (run / "status.json").is_file():
        status = json.loads((run / "status.json").read_text())
    if (run / "metrics.jsonl").is_file():
        for line in (run / "metrics.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record.get("name") == "charts/eval_return":
                evals.append((record["step"], record["value"]))
            elif record.get("name") == "charts/learn_time":
                busy += record["value"]
    return {
        "global_step": status.get("global_step", 0),
        "sps": status.get("charts/sps", 0.0),
        "eval_returns": evals,
        "learn_s": busy,
    }


def phases(args: argparse.Namespace) -> dict[str, float]:
    """Seconds per phase: throughput windows, the 1M-step PPO cap, the rest for TD3."""
    if args.quick:
        return {"window": 3.0, "warmup": 2.0, "ppo_cap": 60.0, "td3": 20.0}
    return {"window": 30.0, "warmup": 15.0, "ppo_cap": 240.0, "td3": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=470.0, help="whole check, seconds")
    parser.add_argument("--actors", type=int, default=max((os.cpu_count() or 4) - 2, 1))
    parser.add_argument("--rollout", type=int, default=64, help="steps per segment (PPO)")
    parser.add_argument("--minibatch-size", type=int, default=1024)
    parser.add_argument("--ppo-steps", type=int, default=1_000_000)
    parser.add_argument("--device", default="auto", help="the second learner's run.device")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/out")))
    parser.add_argument("--quick", action="store_true", help="seconds per phase (smoke test)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    args = parser.parse_args()
    if args.quick:
        args.actors, args.rollout, args.ppo_steps = min(args.actors, 2), 16, 20_000
    t = phases(args)
    start = time.monotonic()
    end = start + args.budget_s
    gpu = ppo_settings(args, args.device)
    cpu = ppo_settings(args, "cpu")
    batch = args.actors * 8 * args.rollout
    print(
        f"gpu_check: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, {args.actors} actors x "
        f"8 envs x {args.rollout} steps = {batch} per PPO update, minibatch {args.minibatch_size}, "
        f"budget {args.budget_s:.0f} s",
        flush=True,
    )
    if args.dry_run:  # each launch checked by `surreal launch --dry-run` (config, devices)
        print("1. throughput windows of", t["window"], "s; surreal --set", " ".join(gpu))
        plan = {
            "2. PPO": launch_cmd("ppo", args.actors, args.ppo_steps, "RUNS", gpu),
            "3. TD3": launch_cmd("ddpg", args.actors, 10**9, "RUNS", (*TD3, gpu[0])),
        }
        for name, cmd in plan.items():
            check = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True)
            print(name, " ".join(cmd[2:]), "->", "ok" if check.returncode == 0 else "REFUSED")
            if check.returncode:
                sys.exit(f"{name}: {check.stderr.strip().splitlines()[-1]}")
        return
    import torch

    result: dict = {"cores": os.cpu_count(), "actors": args.actors, "batch": batch}
    result["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    base = ppo_throughput.single_process(t["window"])
    window = dict(seconds=t["window"], actors=args.actors, warmup=t["warmup"], rollout=args.rollout)
    rows = {"surreal, CPU learner": ppo_throughput.surreal(**window, overrides=cpu)}
    from surreal.api.device import check_device

    rows[f"surreal, {check_device(args.device)} learner"] = ppo_throughput.surreal(
        **window, overrides=gpu
    )
    result["throughput"] = {"single process": base, **rows}
    print(f"\n{'PPO HalfCheetah-v5':<34} {'env steps/s':>11} {'ratio':>6}  learner busy")
    print(f"{'single process (CleanRL-style)':<34} {base['sps']:>11,.0f} {1.0:>5.2f}x  -")
    for name, row in rows.items():
        ratio = row["sps"] / base["sps"]
        print(f"{name:<34} {row['sps']:>11,.0f} {ratio:>5.2f}x  {row['learn_frac']:.0%}")
    with tempfile.TemporaryDirectory() as tmp:
        cap = min(start + args.budget_s * 0.9, time.monotonic() + t["ppo_cap"])
        cmd = launch_cmd(
            "ppo", args.actors, args.ppo_steps, f"{tmp}/ppo", (*gpu, "eval.every_s=10")
        )
        ppo = run_until(cmd, Path(tmp, "ppo", "check", "t1"), f"{tmp}/home", cap)
        result["ppo"] = ppo
        last = ppo["eval_returns"][-1] if ppo["eval_returns"] else (0, float("nan"))
        print(
            f"\nPPO {ppo['global_step']:,} steps in {ppo['wall_s']:.0f} s (incl. start), learner "
            f"{ppo['sps']:,.0f} steps/s, eval return {last[1]:,.0f} at {last[0]:,}"
            + (" (stopped at its time cap)" if ppo["stopped_at_deadline"] else "")
        )
        td3_end = end - 15 if not args.quick else time.monotonic() + t["td3"]
        if td3_end - time.monotonic() > 30 or args.quick:
            cmd = launch_cmd(
                "ddpg", args.actors, 10**9, f"{tmp}/td3", (*TD3, gpu[0], "eval.every_s=15")
            )
            td3 = run_until(cmd, Path(tmp, "td3", "check", "t1"), f"{tmp}/home", td3_end)
            result["td3"] = td3
            last = td3["eval_returns"][-1] if td3["eval_returns"] else (0, float("nan"))
            print(
                f"TD3 {td3['global_step']:,} steps in {td3['wall_s']:.0f} s, eval return "
                f"{last[1]:,.0f} at {last[0]:,}"
            )
    result["wall_s"] = time.monotonic() - start
    result["load_end"] = os.getloadavg()[0]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwhole check {result['wall_s']:.0f} s; numbers in {args.out / 'gpu_check.json'}")


if __name__ == "__main__":
    main()
