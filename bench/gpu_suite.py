"""Issue 47's GPU rows in one run on a machine with a CUDA GPU and ~16 cores, in <= 8 minutes:
every row measured on the GPU (`run.device=cuda`) beside the same row with `run.device=cpu` on
the same machine; one markdown table (gpu_suite.md) and one JSON file (gpu_suite.json).

1. PPO's update step at the GPU recipe's minibatch (4,096 of a 32,768-sample batch, 1 epoch;
   bench/learner_step.py's `stepper`), samples/s: eager, compiled (`run.compile=on`) and CUDA
   graphs (`run.compile=graphs`); the CPU column on one torch thread (goal: >= 10x one core).
2. `surreal launch ppo --env gym:HalfCheetah-v5 --set run.preset=gpu` with 64 actors and the GPU
   learner: training env steps/s (goal >= 25,000), the periodic evaluator's greedy return (5
   episodes) and the wall time from launch to an eval >= 5,000 (goal <= 180 s; the run stops
   there, `run.stop_at_return`); the same launch with `run.device=cpu` for a shorter window.
3. TD3's and SAC's update steps (batch 256): eager vs CUDA graphs on the GPU (goal >= 3x) beside
   eager on the CPU; and `surreal launch sac` for a window (a whole 100k-step run does not fit
   the budget), graphs on the GPU vs eager on the CPU: learner updates/s.
4. The paper's Fig. 5: ppo-vision's actors on robosuite:Lift from the 84x84 camera (EGL), 1, 8
   and 16 of them sharing one policy worker on the GPU (`actor.inference=remote`,
   `actor.inference_device=cuda`) vs inferring on their own CPU (`local`):
   bench/policy_workers.py, env frames/s in all and per actor.
5. Row 2's 64 actor processes: segments per actor (the last "acted N env steps (K segments, E
   episodes)" line of each RUN/logs/actor-N.log) and restarts (RUN/monitoring/starts).

Phases get shares of --budget-s (what one leaves goes to the next); a phase out of time records
"not measured: budget", one that fails its error's first line, and the suite goes on. The update
steps run in a child process per column, the launches as processes, each stopped at its deadline.

    bash bench/gpu_suite.sh                          # on the GPU machine (carried wheels, EGL)
    python bench/gpu_suite.py --dry-run --out DIR    # the same logic on a CPU in <= 2 minutes:
                                                     # "cuda" is the CPU, tiny runs and windows
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from importlib.util import find_spec
from pathlib import Path
from unittest import mock

import psutil

STARTED = time.monotonic()  # the budget counts from here, imports included
DRY = "--dry-run" in sys.argv
_CACHE = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gpu_check  # noqa: E402  (the bench folder's own modules; bench/peers comes with it)
import learner_step as ls  # noqa: E402  (sets a fresh inductor cache: kept but in a dry run)
import learner_step_cuda as lsc  # noqa: E402
import report  # noqa: E402
import torch  # noqa: E402
from gpu_suite_plan import (  # noqa: E402
    GOALS,
    MODES,
    PLAN,
    PPO_ROW,
    STEPS,
    markdown,
    other_rows,
    ppo_rows,
    step_rows,
)
from stats import steady_rate  # noqa: E402
from systems import _surreal_metrics  # noqa: E402

from surreal.algos.sac.config import SACConfig  # noqa: E402
from surreal.algos.sac.learner import SACLearner  # noqa: E402
from surreal.monitoring import crash  # noqa: E402

if DRY:  # torch's default (warm) inductor cache: the dry run's compiles stay short
    os.rmdir(os.environ.pop("TORCHINDUCTOR_CACHE_DIR"))
    if _CACHE:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE

PHASES = ("steps-cuda", "steps-cpu", "ppo-cuda", "ppo-cpu", "sac-cuda", "sac-cpu", "vision")


TD3_ROW = f"TD3, batch {ls.TD3_BATCH}"
ACTED = re.compile(r"acted ([\d,]+) env steps \(([\d,]+) segments, ([\d,]+) episodes\)")
FRAMES = re.compile(r"^round 1 (local|remote)[^:]*: ([\d,]+) frames/s", re.M)
CAMERA = "env.obs_keys=agentview_image,robot0_proprio-state"


# -- the update steps: one child process per column ----------------------------------------------


def build(row: str, mode: str) -> tuple:
    """bench/learner_step.py's `stepper` for ROW with run.compile=MODES[mode]; SAC is its TD3
    row with SAC's learner and config."""
    if row == "SAC":
        with mock.patch.multiple(ls, TD3Learner=SACLearner, TD3Config=SACConfig):
            return ls.stepper(TD3_ROW, MODES[mode])
    return ls.stepper(PPO_ROW if row == "PPO" else TD3_ROW, MODES[mode])


def window(update, sync) -> float:
    """Sample-passes per wall second of `update` over one window, the GPU synchronized."""
    sync()
    start, passes = time.perf_counter(), 0
    while time.perf_counter() - start < PLAN.window_s:
        passes += update()
    sync()
    return passes / (time.perf_counter() - start)


def measure(row: str, modes: tuple[str, ...], sync, until: float, emit) -> None:
    """Each mode's first updates (the compile, in the first round) and its rate over one window
    per round, PLAN.rounds rounds in rotated order; `emit(results)` after each window, so that a
    child stopped at its deadline leaves what it measured (eager first)."""
    steps, got = {}, {}
    for r in range(PLAN.rounds):
        if r and time.time() > until:
            return
        for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
            try:
                if mode not in got:
                    steps[mode] = build(row, mode)
                    sync()
                    start, first = time.perf_counter(), steps[mode][2]
                    for update in first + first:  # CUDA graphs record on a later call
                        update()
                    sync()
                    got[mode] = {"first_s": time.perf_counter() - start, "rates": []}
                if "error" not in got[mode]:
                    got[mode]["rates"].append(window(steps[mode][0], sync))
                    got[mode]["still_compiled"] = steps[mode][1]()
            except Exception as err:  # noqa: BLE001 - a failing mode is a result
                got[mode] = {"error": lsc.why(err)}
            emit(got)


def child(side: str, into: Path, until: float) -> None:
    """The update-step rows of one column, appended to INTO as JSON lines (a row's last line
    holds all it measured)."""
    on_gpu = side == "cuda" and PLAN.gpu == "cuda"
    if on_gpu:
        lsc.on_cuda()
    else:  # a column on the CPU: one core's (the dry run's cuda column too)
        torch.set_num_threads(1)
    ls.SAMPLES, ls.ROWS[PPO_ROW] = PLAN.samples, PLAN.minibatch
    sync = torch.cuda.synchronize if on_gpu else lambda: None
    with into.open("a") as out:

        def emit(row: str, got: dict) -> None:
            out.write(json.dumps({"row": row, **got}) + "\n")
            out.flush()

        for row, modes in STEPS.items():
            modes = modes if side == "cuda" else tuple(m for m in modes if m != "graphs")
            if time.time() > until:
                emit(row, {"skipped": "budget"})
            else:
                measure(row, modes, sync, until, lambda got, row=row: emit(row, got))


def bounded(cmd: list[str], deadline: float) -> tuple[int | None, str]:
    """Run CMD in its own session until it exits or `deadline`, then stop its whole process
    group: (its exit status, None if stopped; its output)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out = proc.communicate(timeout=max(deadline - time.monotonic(), 1))[0]
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                return None, proc.communicate(timeout=5)[0]
        return None, ""


def last_line(out: str, rc: int) -> str:
    return (out.strip().splitlines() or [f"exit status {rc}"])[-1][:200]


def steps_phase(side: str, deadline: float, tmp: Path) -> dict:
    into = tmp / f"steps-{side}.jsonl"
    until = time.time() + deadline - time.monotonic()
    cmd = [sys.executable, __file__, "--child", side, "--into", str(into), "--until", str(until)]
    rc, out = bounded(cmd + ["--dry-run"] * DRY, deadline + PLAN.stop_s)
    got = {}  # each row's last line: all it measured (a line cut short by a kill is left out)
    for line in into.read_text().splitlines() if into.exists() else []:
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            got[rec.pop("row")] = rec
    return {**got, "error": last_line(out, rc)} if rc else got


# -- whole launches ------------------------------------------------------------------------------


def reap(folder: Path) -> None:
    """Kill what is left of a launch into FOLDER (one that did not stop): the processes whose
    command line names it."""
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid != os.getpid() and any(str(folder) in a for a in proc.info["cmdline"] or ()):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def launch(algo: str, side: str, deadline: float, tmp: Path, sets: tuple, actors: int, steps: int):
    """`surreal launch ALGO` until it ends or `deadline`: (bench/gpu_check.py's `run_until`
    result with the learner's step samples, the run folder, its metrics as {name: [(seconds
    since launch, value)]})."""
    folder = tmp / f"{algo}-{side}"
    run, path = folder / "check" / "t1", folder / "check" / "t1" / "metrics.jsonl"
    cmd = gpu_check.launch_cmd(algo, actors, steps, str(folder), sets)
    launched = time.time()  # Ctrl-C stop_s before the deadline; a kill stop_s after it
    killer = threading.Timer(deadline + PLAN.stop_s - time.monotonic(), reap, [folder])
    killer.start()
    with tempfile.TemporaryFile("w+") as err:  # the launch's stderr, for its error's last line
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            got = gpu_check.run_until(cmd, run, str(folder / "home"), deadline - PLAN.stop_s)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            killer.cancel()
            reap(folder)
        err.seek(0)
        text = err.read()
    sys.stderr.write(text)
    if got["rc"] and not got["stopped_at_deadline"]:
        raise RuntimeError(f"surreal launch {algo}: {last_line(text, got['rc'])}")
    series: dict[str, list] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(ValueError, KeyError):
            rec = json.loads(line)
            series.setdefault(rec["name"], []).append((rec["time"] - launched, rec["value"]))
    return {**got, "samples": _surreal_metrics(path, launched).steps}, run, series


def actor_counts(run: Path, actors: int) -> dict:
    """Segments of each actor (its log's last "acted" line; None: no such line) and restarts."""
    segments = []
    for i in range(actors):
        log = run / "logs" / f"actor-{i}.log"
        acted = ACTED.findall(log.read_text(errors="replace")) if log.exists() else []
        segments.append(int(acted[-1][1].replace(",", "")) if acted else None)
    starts = (run / "monitoring" / "starts").glob("*")
    restarts = sum(max(int(p.read_text() or 1) - 1, 0) for p in starts)
    return {"segments": segments, "restarts": restarts, "crashes": len(crash.read(run))}


def ppo_phase(side: str, deadline: float, tmp: Path) -> dict:
    sets = ("run.preset=gpu", f"run.device={PLAN.gpu if side == 'cuda' else 'cpu'}")
    sets += (f"run.stop_at_return={GOALS['eval']:g}",) * (side == "cuda") + PLAN.ppo_sets
    got, run, series = launch("ppo", side, deadline, tmp, sets, PLAN.actors, PLAN.ppo_steps)
    steady = steady_rate(got.pop("samples"), PLAN.skip_s)
    evals = series.get("charts/eval_return", [])
    reached = [t for t, v in evals if v >= GOALS["eval"]]
    return {
        **got,
        "sps": steady.rate if steady else None,
        "window_s": steady.seconds if steady else None,
        "evals": evals,
        "reached_s": reached[0] if reached else None,
        **actor_counts(run, PLAN.actors),
    }


def sac_phase(side: str, deadline: float, tmp: Path) -> dict:
    sets = (f"run.device={PLAN.gpu}", "run.compile=graphs") if side == "cuda" else ()
    sets = sets or ("run.device=cpu", "run.compile=off")
    sets += ("eval.every_s=0", *PLAN.sac_sets)
    got, _, series = launch("sac", side, deadline, tmp, sets, PLAN.sac_actors, PLAN.sac_steps)
    its = series.get("charts/learner_its", [])  # the first one's interval holds the compile
    inside = [v for t, v in its[1:] if t >= its[0][0] + PLAN.skip_s] if its else []
    del got["samples"]
    return {**got, "updates_s": inside, "first_update_s": its[0][0] if its else None}


def vision_phase(_: str, deadline: float, tmp: Path) -> dict:
    """bench/policy_workers.py per actor count: one round of local inference and 1 worker."""
    if find_spec("robosuite") is None:
        return {"skipped": "robosuite not installed"}
    got = {}
    for k, n in enumerate(PLAN.vision_actors):
        end = time.monotonic() + (deadline - time.monotonic()) / (len(PLAN.vision_actors) - k)
        cmd = [sys.executable, str(BENCH / "policy_workers.py"), "--algo", "ppo-vision"]
        cmd += ["--env", "robosuite:Lift", "--set", CAMERA, "--actors", str(n), "--workers", "1"]
        cmd += ["--num-envs", str(PLAN.vision_envs), "--rollout-length", "8", "--rounds", "1"]
        cmd += ["--seconds", str(PLAN.vision_s), "--warmup", str(PLAN.vision_warmup)]
        rc, out = bounded([*cmd, "--device", PLAN.gpu], end)
        got[str(n)] = {key: float(v.replace(",", "")) for key, v in FRAMES.findall(out)}
        if rc is None:
            got[str(n)]["skipped"] = "budget"
        elif rc:
            got[str(n)]["error"] = last_line(out, rc)
    return got


def run_phases(budget_s: float, tmp: Path) -> dict:
    """Each phase with its share of what is left of the budget (what one leaves goes to the
    phases after it); a phase that fails records its error's first line."""
    end, results = STARTED + budget_s, {}
    runners = {"steps": steps_phase, "ppo": ppo_phase, "sac": sac_phase, "vision": vision_phase}
    for k, name in enumerate(PHASES):
        now = time.monotonic()
        deadline = now + max(end - now, 0) * PLAN.shares[k] / sum(PLAN.shares[k:])
        print(f"[{now - STARTED:4.0f} s] {name}: {deadline - now:.0f} s", file=sys.stderr)
        if deadline - now < PLAN.min_phase_s:
            results[name] = {"skipped": "budget"}
            continue
        kind, _, side = name.partition("-")
        try:
            results[name] = runners[kind](side, deadline, tmp)
        except Exception as err:  # noqa: BLE001 - a failing phase is a result; the suite goes on
            results[name] = {"error": lsc.why(err)}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=PLAN.budget_s, help="the whole suite, s")
    out = Path(os.environ.get("OUT") or report.OUT)
    parser.add_argument("--out", type=Path, default=out, help="folder ($OUT, else bench/out)")
    parser.add_argument("--dry-run", action="store_true", help="the same logic on a CPU, ~2 min")
    for hidden in ("--child", "--into", "--until"):  # an update-step column's child process
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, Path(args.into), float(args.until))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    run = report.Run("gpu_suite", PLAN.rounds, args.out / "gpu_suite.md", plot=False)
    with tempfile.TemporaryDirectory(prefix="gpu-suite-") as tmp:
        results = run_phases(args.budget_s, Path(tmp))
    run.measured()
    results = {name: results.get(name, {"skipped": "budget"}) for name in PHASES}
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA GPU"
    threads = torch.get_num_threads() if PLAN.gpu == "cuda" else 1
    steps = f"update steps: torch threads {threads} (cuda column) and 1 (cpu "
    steps += f"column), wall time, {PLAN.rounds} round(s) x {PLAN.window_s:g} s per mode"
    header = run.header(
        f"torch {torch.__version__}, {device}, budget {args.budget_s:.0f} s",
        steps + f", inductor cache {'torch default' if DRY else 'cold'}",
        "launches: 1 torch thread per actor, the learner's run.torch_threads=0 (the cores left)",
        *["DRY RUN: the cuda column ran on the CPU (cuda replaced by cpu), tiny runs"] * DRY,
    )
    rows = step_rows(results) + ppo_rows(results) + other_rows(results)
    rows.sort(key=lambda r: r["group"])  # stable: each group's rows in their order
    raw = {"dry_run": DRY, "device": device, "plan": dataclasses.asdict(PLAN), "rows": rows}
    run.publish(markdown(rows, header), {**raw, "phases": results}, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
