"""The systems `bench/peers/run.py` compares: how each is launched and how its own step counter
and episode returns are read back as `(seconds since launch, value)` samples.

Every system gets the same env, the same wall budget, 1 torch thread per process (stated in the
table; OMP/MKL threads pinned to the same number) and, where the system has the knob, CleanRL's
hyperparameters. A system that cannot run here raises `Unavailable` with the reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import venvs

HERE = Path(__file__).resolve().parent
ENV = "HalfCheetah-v5"


class Unavailable(RuntimeError):
    """This system cannot run here (the message goes into the table)."""


@dataclass
class Run:
    """What one launch produced: counter samples, returns, and how it ended."""

    steps: list[tuple[float, float]] = field(default_factory=list)
    returns: list[tuple[float, float]] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class System:
    name: str
    algo: str  # "ppo" or "td3"
    setup: str  # one line for the docs/table: how it was set up
    launch: object  # (seconds, threads, quick) -> Run


def _env(threads: int, **extra: str) -> dict[str, str]:
    pinned = {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    return dict(os.environ, **pinned, **extra)


def _jsonl_run(cmd: list[str], seconds: float, env: dict[str, str], grace: float = 5.0) -> Run:
    """Run a script that prints `{"t", "step"[, "return"]}` lines; it is stopped `seconds` after
    launch (+ `grace` for its last line) like every system, whatever its own clock says."""
    run, launched = Run(), time.time()
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=seconds + grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # lets ray stop its raylet and GCS
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        t = float(rec["t"]) - launched
        if "return" in rec:
            run.returns.append((t, float(rec["return"])))
        elif "event" not in rec:
            run.steps.append((t, float(rec["step"])))
    if not run.steps:
        run.error = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:160]
    return run


def cleanrl_ppo(seconds: float, threads: int, quick: bool) -> Run:
    script = HERE / "cleanrl_ppo_continuous.py"
    cmd = [
        sys.executable,
        str(script),
        "--env",
        ENV,
        "--seconds",
        str(seconds),
        "--threads",
        str(threads),
    ]
    return _jsonl_run(cmd, seconds, _env(threads))


def cleanrl_td3(seconds: float, threads: int, quick: bool) -> Run:
    cmd = [
        sys.executable,
        str(HERE / "cleanrl_td3.py"),
        "--env",
        ENV,
        "--seconds",
        str(seconds),
        "--threads",
        str(threads),
        "--learning-starts",
        str(td3_learning_starts(quick)),
    ]
    return _jsonl_run(cmd, seconds, _env(threads))


def td3_learning_starts(quick: bool) -> int:
    """CleanRL's 25,000 random steps; 5,000 in --quick (for both TD3 systems alike)."""
    return 5_000 if quick else 25_000


def surreal(algo: str, actors: int, sets: dict[str, object]):
    def launch(seconds: float, threads: int, quick: bool) -> Run:
        extra = dict(sets)
        if algo == "td3":
            extra["algo.replay_start"] = td3_learning_starts(quick)
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp) / "runs" / "bench" / "t1"
            cmd = [
                sys.executable,
                "-m",
                "surreal",
                "launch",
                algo,
                "--env",
                f"gym:{ENV}",
                "--actors",
                str(actors),
                "--steps",
                str(10**9),
                "--folder",
                f"{tmp}/runs",
                "--name",
                "bench",
                "--trial",
                "t1",
                "--quiet",
                "--set",
                f"run.torch_threads={threads}",
                "--set",
                "eval.every_s=0",
                *(a for k, v in extra.items() for a in ("--set", f"{k}={v}")),
            ]
            env = _env(threads, SYMPHONY_HOME=f"{tmp}/home")
            launched = time.time()
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.5)  # the run's wall budget, not a synchronization
            early = proc.poll()
            if early is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=15)  # its checkpoint; the window ended at the budget
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            run = _surreal_metrics(run_dir / "metrics.jsonl", launched)
            if early is not None and not run.steps:
                err = proc.stderr.read() if proc.stderr else ""
                run.error = (err.strip().splitlines() or [f"exit {early}"])[-1][:160]
            return run

    return launch


def _surreal_metrics(path: Path, launched: float) -> Run:
    """The learner's global step at each record of metrics.jsonl (sink time), and the returns."""
    run, top = Run(), 0.0
    if not path.exists():
        return run
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        t = float(rec["time"]) - launched
        if rec["name"] == "charts/episodic_return":
            run.returns.append((t, float(rec["value"])))
        elif rec["name"].startswith("charts/") and rec["step"] > top:
            top = float(rec["step"])  # a learner record: the step it reached
            run.steps.append((t, top))
    return run


SF_FRAMES = re.compile(r"Total num frames: (\d+)")
SF_REWARD = re.compile(r"Avg episode reward: \[\(0, '(-?[\d.]+)'\)\]")


def sample_factory(seconds: float, threads: int, quick: bool) -> Run:
    try:
        python = venvs.ensure("sample-factory")
    except venvs.PeerUnavailable as e:
        raise Unavailable(str(e)) from None
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            str(python),
            "-m",
            "sf_examples.mujoco.train_mujoco",
            "--env",
            "mujoco_halfcheetah",
            "--experiment",
            "bench",
            "--train_dir",
            tmp,
            "--device",
            "cpu",
            "--num_workers",
            "2",
            "--num_envs_per_worker",
            "8",
            "--rollout",
            "64",
            "--batch_size",
            "64",
            "--num_batches_per_epoch",
            "32",
            "--num_epochs",
            "10",
            "--learning_rate",
            "3e-4",
            "--max_grad_norm",
            "0.5",
            "--value_loss_coeff",
            "0.5",
            "--kl_loss_coeff",
            "0",
            "--train_for_seconds",
            str(int(seconds)),
            "--save_every_sec",
            "100000",
            "--with_wandb",
            "False",
            "--seed",
            "1",
        ]
        run, launched = Run(), time.time()
        proc = subprocess.Popen(
            cmd,
            env=_env(threads),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        tail: list[str] = []

        def read() -> None:
            for line in proc.stdout:
                t = time.time() - launched
                tail[:] = [*tail[-3:], line.strip()]
                if m := SF_FRAMES.search(line):
                    run.steps.append((t, float(m.group(1))))
                if m := SF_REWARD.search(line):
                    run.returns.append((t, float(m.group(1))))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=seconds + 5)  # SF's own clock starts after its start-up
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=10)
        if not run.steps:
            run.error = (tail[-1] if tail else f"exit {proc.returncode}")[:160]
        return run


def rllib(seconds: float, threads: int, quick: bool) -> Run:
    try:
        python = venvs.ensure("rllib")
    except venvs.PeerUnavailable as e:
        raise Unavailable(str(e)) from None
    cmd = [
        str(python),
        str(HERE / "rllib_ppo.py"),
        "--env",
        ENV,
        "--seconds",
        str(seconds),
        "--threads",
        str(threads),
        "--runners",
        "2",
        "--envs",
        "8",
    ]
    return _jsonl_run(cmd, seconds, _env(threads))


PPO_SETS = {
    "env.num_envs": 8,
    "actor.rollout_length": 128,  # 2 actors x 8 envs x 128 = CleanRL's 2048 per update
    "algo.update_epochs": 10,
    "algo.num_minibatches": 32,
    "env.normalize_reward": "true",
}
TD3_SETS = {
    "env.num_envs": 1,
    "algo.hidden": "256,256",
    "algo.batch_size": 256,
    "algo.lr": 3e-4,
    "algo.n_step": 1,
    "algo.sigma": 0.1,
    "algo.updates_per_step": 1,
}

SYSTEMS = {
    s.name: s
    for s in (
        System(
            "surreal-ppo",
            "ppo",
            "surreal launch ppo, 2 actors x 8 envs x 128 steps, 10 epochs x 32 minibatches",
            surreal("ppo", 2, PPO_SETS),
        ),
        System(
            "cleanrl-ppo",
            "ppo",
            "CleanRL ppo_continuous_action (bench/peers/cleanrl_ppo_continuous.py), 1 env x 2048 steps",
            cleanrl_ppo,
        ),
        System(
            "sample-factory-ppo",
            "ppo",
            "Sample Factory 2.1.1 sf_examples.mujoco (HalfCheetah-v4), 2 workers x 8 envs x 64 steps x 2, 10 epochs x 32 minibatches of 64",
            sample_factory,
        ),
        System(
            "rllib-ppo",
            "ppo",
            "RLlib 2.60 PPO (bench/peers/rllib_ppo.py), 2 env runners x 8 envs, 2048/iter, 10 epochs x 64",
            rllib,
        ),
        System(
            "surreal-td3",
            "td3",
            "surreal launch td3, 1 actor x 1 env, 1 update per env step, n_step 1",
            surreal("td3", 1, TD3_SETS),
        ),
        System(
            "cleanrl-td3",
            "td3",
            "CleanRL td3_continuous_action (bench/peers/cleanrl_td3.py), 1 env, 1 update per step",
            cleanrl_td3,
        ),
    )
}
BASELINE = {"ppo": "cleanrl-ppo", "td3": "cleanrl-td3"}
