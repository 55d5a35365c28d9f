"""bench/gpu_suite.py's plan (what each phase runs, on the GPU machine or in --dry-run) and its
table (the rows of issue 47's GPU check, a cuda and a cpu column each): split from the suite to
keep each file under ~500 lines."""

from __future__ import annotations

import dataclasses
import statistics
import sys

import learner_step as ls  # bench/ (bench/gpu_suite.py puts it on the path first)
from stats import spread

DRY = "--dry-run" in sys.argv


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the phases run: on the GPU machine (`FULL`) or, with --dry-run, on a CPU (`DRY_RUN`)."""

    gpu: str = "cuda"  # the device of the "cuda" column
    budget_s: float = 470.0
    shares: tuple[int, ...] = (65, 25, 190, 40, 45, 25, 80)  # PHASES' seconds of the budget
    samples: int = 32_768  # PPO's batch in the update-step rows, in minibatches of:
    minibatch: int = 4_096
    rounds: int = 3  # update steps: rounds x window per mode, the order rotated
    window_s: float = 1.0
    actors: int = 64
    ppo_steps: int = 6_000_000  # docs/gpu.md's validated run: its learning-rate schedule
    ppo_sets: tuple[str, ...] = ("eval.every_s=10",)
    skip_s: float = 5.0  # a launch's steady window starts this long after its first update
    stop_s: float = 10.0  # a launch gets Ctrl-C this long before its deadline, a kill after
    min_phase_s: float = 10.0
    sac_actors: int = 14
    sac_steps: int = 100_000
    sac_sets: tuple[str, ...] = ()
    vision_actors: tuple[int, ...] = (1, 8, 16)
    vision_envs: int = 4
    vision_s: float = 4.0  # policy_workers.py's --seconds and --warmup
    vision_warmup: float = 2.0


FULL = Plan()
DRY_RUN = Plan(
    **dict(gpu="cpu", budget_s=98.0, shares=(8, 6, 13, 12, 15, 15, 29), samples=1_024),
    **dict(minibatch=256, rounds=1, window_s=0.2, actors=2, ppo_steps=6_144, skip_s=0.0),
    ppo_sets=(
        *("eval.every_s=2", "eval.episodes=1", "env.max_episode_steps=100"),
        *("algo.batch_size=0", "actor.rollout_length=32", "algo.minibatch_size=256"),
    ),
    **dict(stop_s=3.0, min_phase_s=2.0, sac_actors=2, sac_steps=600),
    sac_sets=("algo.replay_start=300", "algo.hidden=64,64"),
    **dict(vision_actors=(1,), vision_envs=1, vision_s=1.0, vision_warmup=0.5),
)
PLAN = DRY_RUN if DRY else FULL
SIDES = ("cuda", "cpu")
MODES = {"eager": "off", "compiled": "on", "graphs": "graphs"}
NAMES = {"eager": "eager", "compiled": "compiled (run.compile=on)", "graphs": "CUDA graphs"}
STEPS = {"PPO": tuple(MODES), "TD3": ("eager", "graphs"), "SAC": ("eager", "graphs")}
PPO_ROW = f"PPO MLP, minibatch {PLAN.minibatch}"
GOALS = {"ppo_step": 10.0, "sps": 25_000.0, "eval": 5_000.0, "eval_s": 180.0, "graphs": 3.0}


# -- the table -----------------------------------------------------------------------------------


def num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"


def cell(x: float | None, text: str = "") -> dict:
    """A column's cell: a number (and its text), or with x None the text that says why not."""
    return {"value": x, "cell": (text or num(x)).replace("|", "/")}  # no cell splits the row


def measured(x: float | None, text: str, phase: dict, why: str = "budget", part=None) -> dict:
    """cell(x, text) when there is a number x; else why not: its part or its phase skipped or
    failed, else WHY."""
    if x is not None:
        return cell(x, text)
    for got in (part or {}, phase):
        if "error" in got:
            return cell(None, f"failed: {got['error']}")
        if "skipped" in got:
            return cell(None, f"not measured: {got['skipped']}")
    return cell(None, f"not measured: {why}")


def goal(text: str, ok: bool | None = None) -> str:
    if DRY:
        return f"{text} (dry run: not judged)"
    return text if ok is None else f"{text}: {'PASS' if ok else 'FAIL'}"


def row(group: int, what: str, unit: str, cuda: dict, cpu: dict, target: str = "-") -> dict:
    ratio = "-"
    if unit.endswith("/s") and cuda["value"] and cpu["value"]:
        ratio = f"{cuda['value'] / cpu['value']:.2f}x"
    return dict(group=group, row=what, unit=unit, cuda=cuda, cpu=cpu, ratio=ratio, goal=target)


def step_cell(phase: dict, name: str, mode: str) -> dict:
    part = phase.get(name, {})
    got = {**part, **part.get(mode, {})}  # the mode's error before the row's skip
    rates, note = got.get("rates"), ""
    if mode != "eager" and not got.get("still_compiled"):
        note = " (not compiled: ran eagerly)"
    text = f"{spread(rates)}{note}" if rates else ""
    return measured(statistics.median(rates) if rates else None, text, phase, part=got)


def step_rows(res: dict) -> list[dict]:
    """Groups 1 and 3's update steps, and group 1's goal: the best mode of each column."""
    rows = []
    for name, modes in STEPS.items():
        group = 1 if name == "PPO" else 3
        what = f"{name} update step, batch {ls.TD3_BATCH}"
        if group == 1:
            what = f"PPO update step, minibatch {PLAN.minibatch:,} of {PLAN.samples:,}"
        cells = {m: {s: step_cell(res[f"steps-{s}"], name, m) for s in SIDES} for m in modes}
        cells["graphs"]["cpu"] = cell(None, "not measured: CUDA graphs need a GPU")
        for mode in modes:
            aim, x, eager = "-", cells[mode]["cuda"]["value"], cells["eager"]["cuda"]["value"]
            if mode == "graphs" and group == 3:
                aim = f">= {GOALS['graphs']:g}x eager on cuda"
                ok = x / eager >= GOALS["graphs"] if x and eager else None
                aim = goal(aim + (f": {x / eager:.2f}x" if ok is not None else ""), ok)
            rows.append(
                row(group, f"{what}, {NAMES[mode]}", "samples/s", **cells[mode], target=aim)
            )
        if group == 1:
            best = {s: max(c[s]["value"] or 0 for c in cells.values()) for s in SIDES}
            ok = best["cuda"] >= GOALS["ppo_step"] * best["cpu"] if all(best.values()) else None
            cols = {s: measured(best[s] or None, "", res[f"steps-{s}"]) for s in SIDES}
            aim = goal(f">= {GOALS['ppo_step']:g}x one CPU core", ok)
            rows.append(row(1, "PPO update step, the best mode", "samples/s", **cols, target=aim))
    return rows


def ppo_rows(res: dict) -> list[dict]:
    """Group 2, and group 5 from the same launches."""
    ppo = {s: res[f"ppo-{s}"] for s in SIDES}
    cuda, title = ppo["cuda"], f"`surreal launch ppo --set run.preset=gpu`, {PLAN.actors} actors"
    sps = {s: measured(p.get("sps"), "", p, "no steady window") for s, p in ppo.items()}
    rate = sps["cuda"]["value"]
    sps_goal = goal(f">= {GOALS['sps']:,.0f}", rate >= GOALS["sps"] if rate else None)
    evals = [v for _, v in cuda.get("evals", [])]
    text = f"{num(max(evals))} (last {num(evals[-1])} of {len(evals)})" if evals else ""
    best = measured(max(evals) if evals else None, text, cuda, "no evaluation")
    when = cuda.get("reached_s")
    reached = measured(when, "", cuda)
    if when is None and "wall_s" in cuda:  # a result, not a gap
        reached = cell(None, f"not reached in {cuda['wall_s']:.0f} s")
    when_goal = goal(f"<= {GOALS['eval_s']:g} s", when <= GOALS["eval_s"] if when else None)
    cpu_only = cell(None, "not measured: steps/s only (a shorter window)")
    first = f"{title}: wall time from launch to the first eval >= {GOALS['eval']:,.0f}"
    rows = [
        row(2, f"{title}: training env steps/s", "steps/s", **sps, target=sps_goal),
        row(2, f"{title}: greedy eval return (periodic evals), best", "return", best, cpu_only),
        row(2, first, "s", reached, cpu_only, when_goal),
    ]
    segs, counts = {}, {}
    for s, p in ppo.items():
        found = sorted(n for n in p.get("segments") or () if n is not None)
        text = f"{found[0]:,} / {statistics.median(found):,.0f} / {found[-1]:,}" if found else ""
        text += f" ({len(found)} of {PLAN.actors} actors)"
        segs[s] = measured(found[0] if found else None, text, p, "no actor logged its segments")
        text = f"{p.get('restarts')} ({p.get('crashes')} crashes)"
        counts[s] = measured(p.get("restarts"), text, p)
    values = [c["value"] for c in counts.values()]
    none = goal("none", None if None in values else not any(values))
    rows.append(row(5, f"{title}: segments per actor, min / median / max", "segments", **segs))
    return rows + [row(5, f"{title}: restarts", "restarts", **counts, target=none)]


def other_rows(res: dict) -> list[dict]:
    """Group 3's SAC launches and group 4, Fig. 5: remote inference on the GPU's policy worker
    (the cuda column) vs local inference on the actors' own CPUs (the cpu column)."""
    cols = {}
    for s in SIDES:
        its = res[f"sac-{s}"].get("updates_s")
        x = statistics.median(its) if its else None
        cols[s] = measured(x, str(spread(its or [])), res[f"sac-{s}"], "no update after the first")
    wall = max(res[f"sac-{s}"].get("wall_s", 0) for s in SIDES)
    what = f"`surreal launch sac`, {PLAN.sac_actors} actors, graphs on cuda, eager on cpu: "
    what += f"a window of <= {wall:.0f} s, not a whole {PLAN.sac_steps:,}-step run"
    rows, phase = [row(3, what, "updates/s", **cols)], res["vision"]
    for n in PLAN.vision_actors:
        got, cols = phase.get(str(n), {}), {}
        for side, key in (("cuda", "remote"), ("cpu", "local")):
            x = got.get(key)
            cols[side] = measured(
                x, f"{num(x)} ({num(x / n)} per actor)" if x else "", phase, part=got
            )
        what = f"ppo-vision, robosuite:Lift 84x84 camera, {n} actor(s) x {PLAN.vision_envs} envs"
        rows.append(
            row(4, f"{what}, 1 policy worker: env frames/s (per actor)", "frames/s", **cols)
        )
    return rows


def markdown(rows: list[dict], header: str) -> list[str]:
    lines = [header, "", "| # | row | unit | cuda | cpu | cuda / cpu | goal |"]
    lines.append("|---|---|---|---:|---:|---:|---|")
    for r in rows:
        cells = [r["group"], r["row"], r["unit"], r["cuda"]["cell"], r["cpu"]["cell"], r["ratio"]]
        lines.append("| " + " | ".join(map(str, [*cells, r["goal"]])) + " |")
    return lines
