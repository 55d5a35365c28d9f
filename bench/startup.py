"""Seconds from `surreal launch` to the learner's first batch, and each process's memory (issue 33,
item 5; goals <= 12 s and an actor <= 120 MB PSS), with the fork server and with Popen.

Each launch runs `python -m surreal launch ppo --env gym:CartPole-v1 --actors 2` (a budget it
never reaches: it is stopped) in a fresh folder with its own SYMPHONY_HOME. The time counts from
starting it to the learner's log line `first batch after` (read from symphony's record as it is
written); `supervisor s` is when the supervisor's state.json appeared (what the launcher itself
took: planning, the launch check, the run folder). SETTLE_S seconds after the first batch every
process of the run (those carrying its SYMPHONY_RUN_ID, the supervisor and the launcher) is read
from /proc/PID/smaps_rollup (PSS: each shared page counted once, split between its sharers) and
/proc/PID/status (RSS, threads); then the launch gets SIGINT (Ctrl-C), and a run that leaves a
process behind or does not stop with 130 is a failure (exit 1). Rounds alternate the two
start-ups, their order swapping each round: the fork server (the default) and Popen
(SYMPHONY_FORKSERVER=0, how every process started before). The 1-minute load average is
recorded at each launch.

    python bench/startup.py [--rounds 5] [--quick] [--out bench/out/startup.md] [--no-plot]
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import report
import yaml

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the plot is optional
    plt = None

GOAL_S, GOAL_MB = 12.0, 120.0
TIMEOUT_S = 240.0
SETTLE_S = 3.0
LAUNCH = ["surreal", "launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "2"]
LAUNCH += ["--steps", "100000000", "--name", "startup", "--trial", "t1", "--quiet"]
MODES = {"fork server": {}, "Popen": {"SYMPHONY_FORKSERVER": "0"}}
FIRST_BATCH = "first batch after"


def launch_once(mode: str) -> dict:
    """One launch of `mode`: its timings, its processes' memory, and what went wrong (None)."""
    with tempfile.TemporaryDirectory(prefix="surreal-startup-") as tmp:
        root = Path(tmp)
        env = dict(os.environ, SYMPHONY_HOME=str(root / "home"), PYTHONUNBUFFERED="1")
        env.pop("SYMPHONY_FORKSERVER", None)
        env.update(MODES[mode])
        record = root / "home" / "experiments" / "startup-t1"
        sample = {"mode": mode, "load": os.getloadavg()[0], "wrong": None}
        t0 = time.perf_counter()
        with open(root / "launch.out", "wb") as out:
            launch = subprocess.Popen(
                [sys.executable, "-m", *LAUNCH, "--folder", str(root / "runs")],
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            sample.update(_watch(launch, record, t0))
            if sample["first_batch_s"] is not None:
                time.sleep(SETTLE_S)  # the measurement's delay, not a synchronization
                sample["processes"] = memory(record, launch.pid)
        finally:
            sample["wrong"] = _stop(launch, record) or sample.get("wrong")
        if sample["wrong"]:
            sample["log"] = (root / "launch.out").read_text(errors="replace")[-2000:]
        return sample


def _watch(launch: subprocess.Popen, record: Path, t0: float) -> dict:
    """Poll the record until the learner's first batch (or the launch's end, or the timeout)."""
    seen = {"supervisor_s": None, "first_batch_s": None, "wrong": None}
    learner = record / "logs" / "learner.log"
    while time.perf_counter() - t0 < TIMEOUT_S:
        now = time.perf_counter() - t0
        if seen["supervisor_s"] is None and (record / "state.json").exists():
            seen["supervisor_s"] = now
        if learner.exists() and FIRST_BATCH in learner.read_text(errors="replace"):
            seen["first_batch_s"] = now
            return seen
        if launch.poll() is not None:
            seen["wrong"] = f"the launch ended with {launch.returncode} before the first batch"
            return seen
        time.sleep(0.05)
    seen["wrong"] = f"no first batch in {TIMEOUT_S:g} s"
    return seen


def memory(record: Path, launcher: int) -> list[dict]:
    """Name, PSS, RSS (MB) and threads of every process of the run."""
    state = json.loads((record / "state.json").read_text())
    run_id = _run_id(record)
    names = {r["pid"]: n for n, r in state["processes"].items() if r.get("pid")}
    names.update({s["pid"]: "fork-server" for s in state.get("fork_servers", []) if s["pid"]})
    names.update({state["supervisor_pid"]: "supervisor", launcher: "launcher"})
    pids = set(names)
    for proc in psutil.process_iter() if run_id else []:
        try:
            if proc.environ().get("SYMPHONY_RUN_ID") == run_id:
                pids.add(proc.pid)
        except psutil.Error:
            continue
    rows = []
    for pid in sorted(pids):
        try:
            rollup = _fields(Path(f"/proc/{pid}/smaps_rollup").read_text())
            status = _fields(Path(f"/proc/{pid}/status").read_text())
            name = names.get(pid) or _helper(pid, names)
        except (OSError, psutil.Error):
            continue
        rows.append(
            {
                "name": name,
                "pid": pid,
                "pss_mb": int(rollup["Pss"].split()[0]) / 1024,
                "rss_mb": int(rollup["Rss"].split()[0]) / 1024,
                "threads": int(status["Threads"]),
            }
        )
    return rows


def _run_id(record: Path) -> str | None:
    """The run id symphony gave the launch (its processes carry it as SYMPHONY_RUN_ID)."""
    try:
        return yaml.safe_load((record / "record.yaml").read_text())["data"]["run_id"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None


def _helper(pid: int, names: dict[int, str]) -> str:
    """`helper of learner`: a process a process of the run started (e.g. the DataFetcher's)."""
    for parent in psutil.Process(pid).parents():
        if parent.pid in names:
            return f"helper of {names[parent.pid]}"
    return "helper"


def _fields(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _stop(launch: subprocess.Popen, record: Path) -> str | None:
    """Ctrl-C the launch; what went wrong (None: it stopped with 130, leaving no process)."""
    run_id = _run_id(record)
    if launch.poll() is None:
        launch.send_signal(signal.SIGINT)
    try:
        code = launch.wait(timeout=120)
    except subprocess.TimeoutExpired:
        launch.kill()
        code = launch.wait()
    left = []
    for proc in psutil.process_iter() if run_id else []:
        try:
            if proc.environ().get("SYMPHONY_RUN_ID") == run_id:
                left.append(proc)
        except psutil.Error:
            continue
    for proc in left:
        proc.kill()
    if left:
        return f"{len(left)} process(es) left after Ctrl-C: {[p.pid for p in left]}"
    return None if code == 130 else f"Ctrl-C: the launch exited with {code}, not 130"


def measure(rounds: int) -> list[dict]:
    samples = []
    for r in range(rounds):
        order = list(MODES) if r % 2 == 0 else list(MODES)[::-1]
        for mode in order:
            samples.append(launch_once(mode) | {"round": r})
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return samples


def spread(values: list[float], digits: int = 1) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def _role(name: str) -> str:
    return "actor" if name.startswith("actor-") else name


def _of(sample: dict, role: str, key: str) -> list[float]:
    return [p[key] for p in sample.get("processes", []) if _role(p["name"]) == role]


def table(samples: list[dict], header: str) -> list[str]:
    lines = [
        header,
        "",
        "| start-up | first batch s | <= 12 s | supervisor s | actor PSS MB | actor RSS MB | "
        "<= 120 MB | learner PSS MB | run's PSS MB | load | ok (k/N) |",
        "|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        runs = [s for s in samples if s["mode"] == mode]
        good = [s for s in runs if not s["wrong"]]
        first = [s["first_batch_s"] for s in good]
        actor_pss = [v for s in good for v in _of(s, "actor", "pss_mb")]
        totals = [sum(p["pss_mb"] for p in s["processes"]) for s in good]
        lines.append(
            f"| {mode} | {spread(first)} | {_goal(first, GOAL_S)} | "
            f"{spread([s['supervisor_s'] for s in good if s['supervisor_s']])} | "
            f"{spread(actor_pss, 0)} | {spread([v for s in good for v in _of(s, 'actor', 'rss_mb')], 0)}"
            f" | {_goal(actor_pss, GOAL_MB)} | "
            f"{spread([v for s in good for v in _of(s, 'learner', 'pss_mb')], 0)} | "
            f"{spread(totals, 0)} | {spread([s['load'] for s in runs], 2)} | {len(good)}/{len(runs)} |"
        )
    lines += ["", "Each process, medians over the launches: PSS / RSS MB (threads).", ""]
    roles = sorted({_role(p["name"]) for s in samples for p in s.get("processes", [])}, key=_order)
    lines += ["| process | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
    for role in roles:
        cells = []
        for mode in MODES:
            good = [s for s in samples if s["mode"] == mode and not s["wrong"]]
            pss = [v for s in good for v in _of(s, role, "pss_mb")]
            rss = [v for s in good for v in _of(s, role, "rss_mb")]
            threads = [v for s in good for v in _of(s, role, "threads")]
            cells.append(
                f"{statistics.median(pss):.0f} / {statistics.median(rss):.0f} "
                f"({statistics.median(threads):.0f})"
                if pss
                else "-"
            )
        lines.append(f"| {role} | " + " | ".join(cells) + " |")
    wrong = [s for s in samples if s["wrong"]]
    if wrong:
        lines += ["", "failed launches:"]
        lines += [f"- round {s['round'] + 1}, {s['mode']}: {s['wrong']}" for s in wrong]
    return lines


def _goal(values: list[float], goal: float) -> str:
    return "-" if not values else ("PASS" if statistics.median(values) <= goal else "FAIL")


def _order(role: str) -> tuple[int, str]:
    known = ["launcher", "supervisor", "fork-server", "metrics", "buffer", "param-server"]
    known += ["learner", "evaluator", "actor"]
    return (known.index(role), role) if role in known else (len(known), role)


def plot(samples: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.6))
    for ax, (key, goal, label) in zip(
        axes,
        [
            ("first", GOAL_S, "seconds to the learner's first batch"),
            ("pss", GOAL_MB, "actor PSS MB"),
        ],
        strict=True,
    ):
        for y, mode in enumerate(MODES):
            good = [s for s in samples if s["mode"] == mode and not s["wrong"]]
            if key == "first":
                xs = [s["first_batch_s"] for s in good]
            else:
                xs = [v for s in good for v in _of(s, "actor", "pss_mb")]
            ax.plot(xs, [y] * len(xs), "o", color=f"C{y}", alpha=0.5)
            if xs:
                ax.plot([statistics.median(xs)], [y], "|", color="k", markersize=16)
        ax.axvline(goal, color="red", linestyle="--", label=f"goal {goal:g}")
        ax.set_yticks(range(len(MODES)), list(MODES))
        ax.set_xlabel(label + " (dots: launches, bar: median)")
        ax.set_xlim(left=0)
        ax.set_ylim(-0.6, len(MODES) - 0.4)
        ax.legend(loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    run = report.start("startup", __doc__)
    samples = measure(run.rounds)
    run.measured()
    lines = table(samples, run.header(f"`{' '.join(LAUNCH)}`", time.strftime("%Y-%m-%d %H:%M")))
    raw = {"command": LAUNCH, "goals": {"first_batch_s": GOAL_S, "actor_pss_mb": GOAL_MB}}
    raw["samples"] = samples
    run.publish(lines, raw, None if plt is None else lambda path: plot(samples, path))
    return 1 if any(s["wrong"] for s in samples) else 0


if __name__ == "__main__":
    sys.exit(main())
