"""Seconds and bytes of a 1,024-actor run's control plane without a cluster (issue 33, item 3;
goals: the kube dry run <= 10 s and <= 2 MB, objects <= 2 x (groups + Services)).

Each row runs a real CLI dry run in a fresh folder (its own SYMPHONY_HOME, no config file, no
credentials, no network): `surreal launch ppo --env gym:HalfCheetah-v5 --actors N --dry-run` on
the kube backend (manifests written with `-o DIR`) and on the slurm backend (batch scripts
printed), and `symphony launch SPEC --dry-run` of an N-process experiment (a server and N
workers in groups of 8, the YAML spec written by this script) on both. Each round runs the row
at N = 1,024 and at N = 16 (the baseline), the pair's order alternating, so their ratio compares
runs made under the same load: a ratio near 1 means the plan does not cost O(N). Every run is
checked (exit 0, the objects or scripts it is to make); a run that is not is printed and makes
the bench exit 1. Timing is reported (PASS/FAIL), never a reason to fail.

    python bench/control_plane.py [--rounds 5] [--quick] [--out bench/out/control_plane.md]
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
import yaml

from symphony import Experiment, Process, ProcessGroup

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the plot is optional
    plt = None

GOAL_S, GOAL_MB = 10.0, 2.0
N, BASE_N, GROUP = 1024, 16, 8
TIMEOUT_S = 300
IMAGE = "registry.example.com/surreal/cpu:1"
SURREAL = ["surreal", "launch", "ppo", "--env", "gym:HalfCheetah-v5", "--dry-run", "--actors"]
ROWS = {
    "surreal kube": (SURREAL, ["--backend", "kube", "--image", IMAGE, "-o", "{out}"]),
    "surreal slurm": (SURREAL, ["--backend", "slurm"]),
    "symphony kube": (["symphony", "launch", "{spec}", "--dry-run"], ["-b", "kube", "-o", "{out}"]),
    "symphony slurm": (["symphony", "launch", "{spec}", "--dry-run"], ["-b", "slurm"]),
}
SLURM_JOB = "# --- job for group "


def experiment(n: int) -> Experiment:
    """A server and `n` workers that connect to it, `GROUP` to a group (one node each)."""
    exp = Experiment("many", image=IMAGE).add(Process("server", ["serve"]).binds("data"))
    for g in range(0, n, GROUP):
        group = ProcessGroup(f"workers-{g // GROUP}")
        for i in range(g, min(g + GROUP, n)):
            group.add(Process(f"w-{i}", ["work", "--index", str(i)]).connects("data"))
        exp.add(group)
    return exp


def run_once(row: str, n: int) -> dict:
    """One dry run of `row` at `n` actors/workers: seconds, MB, objects, and what was wrong."""
    head, tail = ROWS[row]
    with tempfile.TemporaryDirectory(prefix="surreal-control-plane-") as tmp:
        root = Path(tmp)
        spec, out = root / "spec.yaml", root / "out"
        if head[0] == "symphony":
            spec.write_text(experiment(n).to_yaml())
            args = [a.format(spec=spec) for a in head]
        else:
            args = [*head, str(n), "--folder", str(root / "runs")]
        args += [a.format(out=out) for a in tail]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
        env.update(
            SYMPHONY_HOME=str(root / "home"),
            SYMPHONY_CONFIG=str(root / "no-config.yaml"),
            KUBECONFIG=str(root / "no-kubeconfig"),
        )
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-m", *args],
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return {"seconds": time.perf_counter() - t0, "wrong": f"no answer in {TIMEOUT_S} s"}
        sample = {"seconds": time.perf_counter() - t0, "wrong": None}
        sample.update(_output(row, n, done, out))
    return sample


def _output(row: str, n: int, done: subprocess.CompletedProcess, out: Path) -> dict:
    """What the dry run made: MB, objects (kube) or batch scripts (slurm), and what was wrong."""
    groups = n // GROUP + (5 if row.startswith("surreal") else 1)
    if done.returncode != 0:
        return {"wrong": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    if row.endswith("slurm"):
        jobs = done.stdout.count(SLURM_JOB)
        wrong = None if jobs == groups else f"{jobs} batch scripts for {groups} groups"
        return {"mb": len(done.stdout.encode()) / 1e6, "objects": jobs, "wrong": wrong}
    files = sorted(out.iterdir())
    objects = [yaml.safe_load(p.read_text()) for p in files]
    kinds = [o["kind"] for o in objects]
    workloads, services = sum(k in ("Job", "Deployment") for k in kinds), kinds.count("Service")
    wrong = None
    if workloads != groups:
        wrong = f"{workloads} workloads for {groups} groups"
    elif len(objects) > 2 * (workloads + services):
        wrong = f"{len(objects)} objects > 2 x ({workloads} groups + {services} Services)"
    mb = sum(p.stat().st_size for p in files) / 1e6
    return {"mb": mb, "objects": len(objects), "services": services, "wrong": wrong}


def measure(rounds: int) -> list[dict]:
    rows = [{"row": name, "at_n": [], "at_base": []} for name in ROWS]
    for r in range(rounds):
        for i, row in enumerate(rows):
            for n in (N, BASE_N) if (r + i) % 2 == 0 else (BASE_N, N):
                sample = run_once(row["row"], n) | {"round": r}
                row["at_n" if n == N else "at_base"].append(sample)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return rows


def _spread(samples: list[dict], key: str, digits: int) -> str:
    xs = [s[key] for s in samples if key in s]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f}-{max(xs):.{digits}f}]"


def table(rows: list[dict], header: str) -> list[str]:
    lines = [
        header,
        "",
        f"| dry run | s at {N:,} | <= {GOAL_S:g} s | s at {BASE_N} | {N:,} / {BASE_N} | "
        f"MB at {N:,} | <= {GOAL_MB:g} MB | objects at {N:,} | ok (k/N) |",
        "|---|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        big, base = row["at_n"], row["at_base"]
        med = statistics.median(s["seconds"] for s in big)
        ratio = med / statistics.median(s["seconds"] for s in base)
        mb = max((s.get("mb", 0.0) for s in big), default=0.0)
        kube = row["row"].endswith("kube")
        ok = sum(s["wrong"] is None for s in big + base)
        lines.append(
            f"| {row['row']} | {_spread(big, 'seconds', 2)} | {'PASS' if med <= GOAL_S else 'FAIL'}"
            f" | {_spread(base, 'seconds', 2)} | {ratio:.2f}x | {mb:.2f} | "
            f"{('PASS' if mb <= GOAL_MB else 'FAIL') if kube else '-'} | "
            f"{_spread(big, 'objects', 0)} | {ok}/{len(big) + len(base)} |"
        )
    wrong = [(row["row"], s) for row in rows for s in row["at_n"] + row["at_base"] if s["wrong"]]
    if wrong:
        lines += ["", "runs that did not make what they should:"]
        lines += [f"- {name}, round {s['round'] + 1}: {s['wrong']}" for name, s in wrong]
    return lines


def plot(rows: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(rows) + 1.5))
    for y, row in enumerate(rows):
        for key, color, shift in (("at_n", "C0", 0.12), ("at_base", "C7", -0.12)):
            xs = [s["seconds"] for s in row[key]]
            label = (f"{N:,}" if key == "at_n" else f"{BASE_N}") if y == 0 else None
            ax.plot(xs, [y + shift] * len(xs), "o", color=color, alpha=0.6, label=label)
    ax.axvline(GOAL_S, color="red", linestyle="--", label=f"goal {GOAL_S:g} s")
    ax.set_yticks(range(len(rows)), [row["row"] for row in rows])
    ax.set_xlabel("seconds of the dry run (dots: runs)")
    ax.set_xlim(left=0)
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    run = report.start("control_plane", __doc__)
    rows = measure(run.rounds)
    run.measured()
    lines = table(rows, run.header(f"N = {N:,} and {BASE_N}, {GROUP} per group"))
    raw = {"goal_s": GOAL_S, "goal_mb": GOAL_MB, "n": N, "base_n": BASE_N, "rows": rows}
    run.publish(lines, raw, None if plt is None else lambda path: plot(rows, path))
    wrong = any(s["wrong"] for row in rows for s in row["at_n"] + row["at_base"])
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
