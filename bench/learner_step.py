"""Learner sample-passes per CPU-second, eager vs `run.compile=on` (issue 36).

Each row builds two learners with the same seed through `Learner.create` (run.compile=off and
on, run.device=cpu, 1 torch thread) and runs their real update on one fixed synthetic batch shaped
like HalfCheetah's (obs 17, action 6): PPO's update loop (`PPOLearner._update`: shuffle,
minibatches, loss, backward, grad clip, Adam; 1 epoch over 2,048 samples), TD3's `learn` (critic
step, and every 2nd call the actor's and the targets'; 256x256 MLPs, batch 256), and ppo-vision's
(`RecurrentPPOLearner._update`, the conv encoder and LSTM of `algo.lstm_size=100` unrolled over
whole 32-step segments: 8 of them of 84x84 camera images + 32 proprio entries, action 7, 1 epoch
in minibatches of 2 segments; samples are its env steps, 256 per update). Each round measures
both, the order swapped every round, each for the same window of CPU time (`time.process_time`);
the table gives medians and [min-max] of sample-passes per CPU-second, the ratio of the medians,
and the wall seconds of each learner's first update (TD3: first 2, the actor's step runs every
2nd; the compiled one's is the compile) and the compiled one's CPU seconds, its compile workers'
included (what `surreal.api.compiling.PAYS_AFTER_STEPS` is derived
from). Compiling uses a fresh inductor cache folder (what a run sees the first time), except with
--quick (torch's default cache, so the test's round stays short).

    python bench/learner_step.py [--rounds 5] [--quick] [--out bench/out/learner_step.md]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

if "--quick" not in sys.argv:  # before torch is imported: a cold compile, as a first run's
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="learner-step-inductor-")

import numpy as np
import psutil
import report
import torch

from surreal.algos.ddpg.td3 import TD3Config, TD3Learner
from surreal.algos.ppo.config import PPOConfig, VisionPPOConfig
from surreal.algos.ppo.learner import PPOLearner
from surreal.algos.ppo.vision_learner import RecurrentPPOLearner
from surreal.api.config import Config, RunConfig
from surreal.api.spaces import EnvInfo
from surreal.testing import fake_segment_batch

GOAL = 1.4
"""compiled / eager at PPO MLP minibatch 64 (issue 36)."""
SAMPLES = 2048
TD3_BATCH = 256
VISION = (84, 32, 7, 8, 32) if "--quick" not in sys.argv else (32, 32, 7, 4, 8)
"""ppo-vision's row: image size (robosuite's camera_size), proprio entries, action dims, segments,
steps per segment (actor.rollout_length; one env per segment, bptt over the whole segment).
--quick: 32x32 images in 4 segments of 8 steps (the compile grows with the unrolled steps)."""
VISION_MINIBATCH = 2
"""ppo-vision's minibatch: sub-trajectories (whole segments) of VISION's 32 steps."""
ROWS = {
    "PPO MLP, minibatch 64": 64,
    "PPO MLP, minibatch 512": 512,
    "TD3, batch 256": TD3_BATCH,
    "PPO conv+LSTM": VISION_MINIBATCH,
}
"""row -> minibatch size (ppo-vision's: in sub-trajectories)."""
GOAL_ROW = "PPO MLP, minibatch 64"
HALFCHEETAH = EnvInfo(
    (17,), False, action_shape=(6,), action_low=(-1.0,) * 6, action_high=(1.0,) * 6
)


def flat_batch() -> dict[str, torch.Tensor]:
    """The fixed batch `_update` takes: SAMPLES samples after GAE, flattened."""
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> torch.Tensor:
        return torch.from_numpy(rng.normal(size=(SAMPLES, *shape)).astype(np.float32))

    return {
        "obs": normal(17),
        "actions": normal(6),
        "logprobs": normal() - 8.0,
        "values": normal(),
        "advantages": normal(),
        "returns": normal(),
    }


def td3_batch() -> dict[str, np.ndarray]:
    """A fixed replay sample of TD3_BATCH transitions (what `TD3Learner.learn` takes)."""
    rng = np.random.default_rng(0)
    return {
        "obs": rng.normal(size=(TD3_BATCH, 17)).astype(np.float32),
        "act": rng.uniform(-1, 1, (TD3_BATCH, 6)).astype(np.float32),
        "rew": rng.normal(size=TD3_BATCH).astype(np.float32),
        "next_obs": rng.normal(size=(TD3_BATCH, 17)).astype(np.float32),
        "discount": np.full(TD3_BATCH, 0.99, np.float32),
    }


def vision_stepper(mode: str) -> tuple[Callable[[], int], Callable[[], bool], list]:
    """`stepper` for the ppo-vision row: its `_update` on one fixed batch of sub-trajectories
    (`sub_trajectories` of a synthetic batch of VISION's shape: pixels 0-255, stored LSTM
    states)."""
    torch.manual_seed(1)
    size, proprio, action, segments, steps = VISION
    info = EnvInfo(
        (size * size * 3 + proprio,),
        False,
        action_shape=(action,),
        action_low=(-1.0,) * action,
        action_high=(1.0,) * action,
    )
    algo = VisionPPOConfig(
        update_epochs=1, minibatch_size=VISION_MINIBATCH, target_kl=None, image_size=size
    )
    run = RunConfig(compile=mode, device="cpu")
    ppo = RecurrentPPOLearner.create(Config(algo=algo, run=run), info)
    ppo.iterations = 1  # as after the first batch, which ppo-vision learns eagerly
    batch = fake_segment_batch(info, segments=segments, steps=steps, envs=1)
    rng = np.random.default_rng(0)
    batch["obs"][..., : size * size * 3] = rng.integers(0, 256, (segments, steps, 1, size**2 * 3))
    for key in ("lstm_h", "lstm_c"):
        batch[key] = rng.normal(0, 0.1, (segments, steps, 1, algo.lstm_size)).astype(np.float32)
    seq = ppo.sub_trajectories(batch)

    def vision_update() -> int:
        ppo._update(seq)
        return segments * steps

    return vision_update, lambda: getattr(ppo._step, "active", False), [vision_update]


def stepper(name: str, mode: str) -> tuple[Callable[[], int], Callable[[], bool], list]:
    """Row NAME's learner with run.compile=MODE: (one update -> its sample-passes, whether the
    compiled step is still in use, the first updates: until each compiled step ran once)."""
    if name == "PPO conv+LSTM":
        return vision_stepper(mode)
    torch.manual_seed(1)
    run = RunConfig(compile=mode, device="cpu")
    if name.startswith("TD3"):  # TD3's defaults: 256x256 MLPs, twin critics, actor every 2
        td3 = TD3Learner.create(Config(algo=TD3Config(batch_size=TD3_BATCH), run=run), HALFCHEETAH)
        batch, compiled = td3_batch(), td3.algo._compiled or ()

        def td3_update() -> int:
            td3.learn(batch)
            return TD3_BATCH

        first = [td3_update] * td3.config.actor_delay  # the critic's steps, then the actor's too

        return td3_update, lambda: bool(compiled) and all(c.active for c in compiled), first
    algo = PPOConfig(update_epochs=1, minibatch_size=ROWS[name], target_kl=None)
    ppo = PPOLearner.create(Config(algo=algo, run=run), HALFCHEETAH)
    ppo.iterations = 1  # as after the first batch, which PPOLearner learns eagerly
    flat = flat_batch()

    def ppo_update() -> int:
        ppo._update(flat)
        return SAMPLES

    return ppo_update, lambda: getattr(ppo._step, "active", False), [ppo_update]


def cpu_seconds() -> float:
    """CPU seconds of this process and its children so far (inductor's compile workers)."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:4])  # user, system, children_user, children_system
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:  # ended meanwhile: counted in children_* once reaped
            pass
    return total


def measure(rounds: int, window: float) -> list[dict]:
    rows = []
    for name, minibatch in ROWS.items():
        row = {"step": name, "minibatch": minibatch, "eager": [], "compiled": []}
        steps = {"eager": stepper(name, "off"), "compiled": stepper(name, "on")}
        for mode, (_, _, first) in steps.items():  # the first update(s): compiled, they compile
            t0, cpu0 = time.perf_counter(), cpu_seconds()
            for update in first:
                update()
            row[f"first_s_{mode}"] = time.perf_counter() - t0
            row[f"first_cpu_s_{mode}"] = cpu_seconds() - cpu0
        for r in range(rounds):
            for mode in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
                update, passes, t0 = steps[mode][0], 0, time.process_time()
                while (spent := time.process_time() - t0) < window:
                    passes += update()
                row[mode].append(passes / spent)
        row["still_compiled"] = steps["compiled"][1]()
        rows.append(row)
        print(f"{name} done", file=sys.stderr, flush=True)
    return rows


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def table(rows: list[dict], header: str) -> list[str]:
    lines = [
        header,
        "",
        "| step | eager samples/CPU-s | compiled samples/CPU-s | compiled / eager | "
        "per-round ratio [min-max] | first update s, eager | first update s, compiled | "
        f"first update CPU-s, compiled | goal >= {GOAL}x |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        ratio = statistics.median(row["compiled"]) / statistics.median(row["eager"])
        rounds = [c / e for c, e in zip(row["compiled"], row["eager"], strict=True)]
        goal = ("PASS" if ratio >= GOAL else "FAIL") if row["step"] == GOAL_ROW else "-"
        if not row["still_compiled"]:
            goal += " (fell back to eager)"
        lines.append(
            f"| {row['step']} | {spread(row['eager'])} | {spread(row['compiled'])} | "
            f"{ratio:.2f}x | [{min(rounds):.2f}-{max(rounds):.2f}] | {row['first_s_eager']:.2f} | "
            f"{row['first_s_compiled']:.1f} | {row['first_cpu_s_compiled']:.1f} | {goal} |"
        )
    return lines


def main() -> int:
    run = report.start("learner_step", __doc__)
    torch.set_num_threads(1)
    window = 0.3 if run.rounds == 1 else 2.0
    rows = measure(run.rounds, window)
    run.measured()
    cache = "torch's default" if run.rounds == 1 else "fresh (cold)"
    header = run.header(
        f"torch {torch.__version__}, 1 torch thread, {window:g} CPU-s per measurement, "
        f"PPO {SAMPLES} samples x 1 epoch per update, TD3 batch {TD3_BATCH}, "
        f"inductor cache {cache}",
        f"PPO conv+LSTM {VISION[3]} x {VISION[4]} steps of {VISION[0]}x{VISION[0]} images "
        "x 1 epoch",
    )
    raw = {"goal": GOAL, "window_s": window, "samples": SAMPLES, "rows": rows}
    run.publish(table(rows, header), raw, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
