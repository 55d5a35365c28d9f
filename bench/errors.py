"""Seconds from a bad input to its one-line error (issue 34, item 3; goal <= 2 s each).

Each input is run through the real CLI (`python -m surreal ...`, `python -m cloudwise ...`) in a
fresh temporary folder (symphony's state in it, no AWS settings, an object-store endpoint nobody
answers on), the same command lines as tests/surreal/test_bad_inputs_early.py and friends. Each
round runs every input next to a baseline `python -m surreal --help`, the pair's order
alternating, so the ratio compares runs made under the same load. Every run is checked: exit 2
and exactly one stderr line starting with `Error:` (the one dry run: exit 0, store not
contacted); a run that is not is counted and printed, and makes the bench exit 1. Timing is
reported (PASS/FAIL against the goal), never a reason to fail.

    python bench/errors.py [--rounds 5] [--quick] [--out bench/out/errors.md] [--no-plot]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import report

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the plot is optional
    plt = None

GOAL_S = 2.0
TIMEOUT_S = 120
LAUNCH = "surreal launch ppo --env gym:CartPole-v1 "
DRY_RUN_SAYS = "object store not contacted: --dry-run"
# row label: what follows `python -m` ({work}, {afile}, {run}: filled in per run); each is to be a
# one-line exit-2 error, but DRY_RUN (a plan that says it did not contact the store, exit 0)
DRY_RUN = "--folder s3://bucket/runs --dry-run (a plan, exit 0)"
CASES = {
    "--folder /proc/surreal-runs": LAUNCH + "--folder /proc/surreal-runs",
    "--folder AFILE/runs (parent is a file)": LAUNCH + "--folder {afile}/runs",
    "--folder AFILE (folder is a file)": LAUNCH + "--folder {afile}",
    "--set algo.lr=banana": LAUNCH + "--set algo.lr=banana",
    "--actors 0": LAUNCH + "--actors 0",
    "--set algo.nosuch=1": LAUNCH + "--set algo.nosuch=1",
    "--backend nosuch": LAUNCH + "--backend nosuch",
    "--folder s3:// --dry-run": LAUNCH + "--folder s3:// --dry-run",
    DRY_RUN: LAUNCH + "--folder s3://bucket/runs --dry-run",
    "eval RUN --video out.xyz": "surreal eval {run} --episodes 1 --video out.xyz",
    "cloudwise init --pool gpu_type=banana --no-input": "cloudwise -C {work} init --provider aws "
    "--no-input --pool name=learner,cpu=8,gpu=1,gpu_type=banana",
}
BASELINE = "surreal --help"


def run_once(line: str, expect: str) -> tuple[float, str | None]:
    """One run in a fresh folder: (wall seconds, None if its outcome was the expected one, else
    what was wrong)."""
    with tempfile.TemporaryDirectory(prefix="surreal-errors-") as tmp:
        root = Path(tmp)
        work, afile = root / "work", root / "afile"
        run = work / "runs" / "ppo-cartpole-v1" / "t1"
        run.mkdir(parents=True)
        for name in ("config.json", "run.json"):  # a run folder whose files would not load
            (run / name).write_text("{}\n")
        afile.write_text("not a folder\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            SYMPHONY_HOME=str(root / "home"),
            SURREAL_MIRROR_DIR=str(root / "mirror"),
            AWS_CONFIG_FILE=str(root / "no-aws-config"),
            AWS_SHARED_CREDENTIALS_FILE=str(root / "no-aws-credentials"),
            AWS_ENDPOINT_URL="http://127.0.0.1:9",
            PYTHONUNBUFFERED="1",
        )
        args = [t.format(work=work, afile=afile, run=run) for t in line.split()]
        cmd = [sys.executable, "-m", *args]
        t0 = time.perf_counter()
        try:
            kw = dict(cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            done = subprocess.run(cmd, timeout=TIMEOUT_S, **kw)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - t0, f"no answer in {TIMEOUT_S} s"
        seconds = time.perf_counter() - t0
    return seconds, check(done, expect)


def check(done: subprocess.CompletedProcess, expect: str) -> str | None:
    lines = done.stderr.splitlines()
    said = f"exit {done.returncode}, stderr {lines[:3]!r}"
    if expect == "help":
        return None if done.returncode == 0 and "Usage" in done.stdout else said
    if expect == "dry-run":
        first = (done.stdout.splitlines() or [""])[0]
        ok = done.returncode == 0 and DRY_RUN_SAYS in first and "Traceback" not in done.stderr
        return None if ok else f"{said}, stdout starts {first!r}"
    ok = done.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: ")
    return None if ok and "Traceback" not in done.stdout else said


def measure(rounds: int) -> tuple[list[dict], list[float]]:
    rows = [
        {"input": name, "command": line, "expect": "dry-run" if name == DRY_RUN else "error"}
        | {"samples": [], "baseline": [], "failures": []}
        for name, line in CASES.items()
    ]
    for r in range(rounds):
        for i, row in enumerate(rows):
            for case in (True, False) if (r + i) % 2 == 0 else (False, True):
                line, expect = (row["command"], row["expect"]) if case else (BASELINE, "help")
                seconds, wrong = run_once(line, expect)
                row["samples" if case else "baseline"].append(seconds)
                if wrong and not case:
                    sys.exit(f"the baseline `surreal --help` failed: {wrong}")
                if wrong:
                    row["failures"].append({"round": r, "seconds": seconds, "wrong": wrong})
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return rows, [s for row in rows for s in row["baseline"]]


def table(rows: list[dict], baseline: list[float], header: str) -> list[str]:
    lines = [
        header,
        "",
        "| input | median s | [min-max] | median / baseline --help | exit-2 one-line ok "
        "(k/N) | <= 2 s |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        med, base = statistics.median(row["samples"]), statistics.median(row["baseline"])
        n = len(row["samples"])
        ok = n - len(row["failures"])
        lines.append(
            f"| {row['input']} | {med:.2f} | [{min(row['samples']):.2f}-{max(row['samples']):.2f}]"
            f" | {med / base:.2f}x | {ok}/{n} | {'PASS' if med <= GOAL_S else 'FAIL'} |"
        )
    lines += [
        "",
        f"baseline `python -m surreal --help`: median {statistics.median(baseline):.2f}"
        f" s [{min(baseline):.2f}-{max(baseline):.2f}], {len(baseline)} runs "
        "(the ratio uses each row's own paired baseline runs)",
    ]
    failures = [(row["input"], f) for row in rows for f in row["failures"]]
    if failures:
        lines += ["", "not the expected one-line outcome:"]
        lines += [
            f"- {name}, round {f['round'] + 1} ({f['seconds']:.2f} s): {f['wrong']}"
            for name, f in failures
        ]
    return lines


def plot(rows: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10, 0.4 * len(rows) + 1.5))
    for y, row in enumerate(rows):
        ax.plot(row["samples"], [y] * len(row["samples"]), "o", color="C0", alpha=0.5)
        ax.plot([statistics.median(row["samples"])], [y], "|", color="k", markersize=14)
    ax.set_yticks(range(len(rows)), [row["input"] for row in rows])
    ax.axvline(GOAL_S, color="red", linestyle="--", label=f"goal {GOAL_S:g} s")
    ax.set_xlabel("seconds to the answer (dots: runs, bar: median)")
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    run = report.start("errors", __doc__)
    rows, baseline = measure(run.rounds)
    run.measured()
    lines = table(rows, baseline, run.header())
    raw = {"goal_s": GOAL_S, "baseline": baseline, "rows": rows}
    run.publish(lines, raw, None if plt is None else lambda path: plot(rows, path))
    return 1 if any(row["failures"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
