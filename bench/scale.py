"""Scale harness: the real server side of a run under N stand-in actors (N = 16 ... 1,024).

What runs: the server processes of `surreal launch ppo --actors N` (buffer, learner, parameter
server, metrics sink; the evaluator is left out: eval.every_s=0), or of `surreal launch ddpg` (replay
proxy, K replay shards, learner, parameter-server proxy and shard, metrics), started from the run's
own launch plan with the SYMPH_* addresses symphony would set (bench/scale_servers.py). The actors
are replaced by stand-ins (bench/scale_clients.py): hundreds per process, each with the actor's own
three connections, messages, schemas and pacing rule, sending a segment cut by a real rollout of the
run's env and policy (HalfCheetah-v5: 8 envs x 32 steps) or a real DDPG n-step chunk.

The comparison. A stand-in replaces only the env and the policy; so that the harness measures the
servers, not the clients, the aggregate offered load is fixed (`--rate` segments/s over all
stand-ins: each sends one every N/rate s, from a random phase) and so is the learner's work per
update (`algo.batch_size` = `--per-batch` segments whatever N): from N = 16 to 1,024 only the number
of connected actors changes, and the question is whether the servers keep up with the same work
spread over 64x the connections. Each stand-in still follows `actor.max_ahead` (phase `paced:1`,
the default and what real actors do; `paced:none` never waits) and so waits for newer parameters
while it is ahead, exactly as an actor does (a long poll that the parameter server answers when the
version arrives; it polled every 20 ms until issue 33's fix). Phase `max:1` drops the rollout wait
(infinitely fast envs): only the pacing rule and the sockets' back-pressure hold stand-ins back,
which measures what the whole loop sustains at N. The checks compare N = 1,024 with N = 16 in the
first phase. On 2 cores the stand-in processes share the CPU with the servers, so their CPU use is
printed too ("client cores").

DDPG (the Surreal paper's Table 2 shape): `--ddpg-actors` stand-ins (128) with 1, 2 and 3 replay
shards, pushing chunks as fast as the replay takes them (`max`; algo.updates_per_step=0, so the
Pacer never holds them, as in Ape-X), and with `--ddpg-phases paced,max` first at a fixed offered
load (`--ddpg-rate` transitions/s).

Straggler/churn: `--churn-actors` (256) stand-ins in `--churn-procs` processes. The run is
learner-bound, as a run whose actors outpace the learner is (otherwise stopping 10% of the actors
removes 10% of the data whatever the servers do): 20 epochs per batch (`--churn-epochs`; the
learner takes ~75 segments/s here), and the stand-ins offer about twice that (`--churn-rate` 160
segments/s in phase `--churn-phase`, paced:1), so the pacing rule decides whether the live stand-ins take over the share
of the stopped ones, while the stand-ins leave the learner its CPU (in `max` mode they and the
restarts compete with it for the 2 cores). After a `before` span, 10% of the client processes are
stopped (SIGSTOP) for `--pause-s`, then resumed; then the same 10% are killed and restarted every
`--churn-every` s for `--churn-s`. Learner updates/s per span, against `before`.

Numbers: medians [min-max] over `--windows` consecutive windows of `--window-s` s per phase, after a
warm-up of `--warm-s`, in a paced phase at least one stand-in period (every stand-in has sent in
the phase's own schedule). "client lag p99" is how late the stand-in processes ran their scheduled actions: when it
is large, the clients were starved of CPU and the latencies include that. Threads: every server
process runs with one OpenMP thread (the learner: run.torch_threads=1), each stand-in process with
one thread (`--per-proc` stand-ins each). The load average is recorded before and after.

    .venv/bin/python bench/scale.py            # the full run (<= 10 min on 2 cores)
    .venv/bin/python bench/scale.py --quick    # N = 4, 32; short spans (CI-sized)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scale_report import (
    checks,
    churn_checks,
    churn_rates,
    plot,
    pooled,
    print_checks,
    print_table,
    resource_rows,
    summarize,
    throughput_rows,
    window,
)
from scale_servers import Clients, ServerRun, ddpg_chunk, ppo_segment, sleep_until, wait_until

from surreal.api.recipe import recipe_of

OUT = Path(__file__).resolve().parent / "out"
SEGMENT = {"num_envs": 8, "rollout_length": 32}


def parse_phases(text: str) -> list[dict]:
    """ "paced:1,paced:none,max:1" -> [{"mode": "paced", "max_ahead": 1}, ...]."""
    out = []
    for item in text.split(","):
        mode, _, ahead = item.partition(":")
        ahead = ahead or "1"
        out.append({"mode": mode, "max_ahead": None if ahead == "none" else int(ahead)})
    return out


def snapshot(run: ServerRun, clients: Clients, t: float, shards: int = 0) -> dict:
    """The servers' counters and resources, and the stand-ins' CPU, at whole second `t`."""
    mono = time.monotonic()
    snap = {
        "t": int(t),
        "mono": mono,
        "prom": {p.name: run.scrape(p.name, required=True) for p in run.servers},
        "res": run.resources(),
        "client_cpu": clients.cpu(),
    }
    if shards:
        snap["replay"] = run.replay_stats(shards)
    return snap


def measure(run: ServerRun, clients: Clients, args, warm_s: float, shards: int = 0) -> list[dict]:
    """Snapshots at whole seconds: after `warm_s`, then every window end."""
    t = math.ceil(time.monotonic() + warm_s)
    sleep_until(t)
    snaps = [snapshot(run, clients, t, shards)]
    for _ in range(args.windows):
        t += args.window_s
        sleep_until(t)
        run.check_alive()
        snaps.append(snapshot(run, clients, t, shards))
    return snaps


def start_run(algo: str, n: int, overrides: list[str], args, trial: str) -> tuple[ServerRun, Path]:
    """The run folder, its servers started, and the stand-ins' payload: a real segment (chunk),
    made once per algorithm (N changes nothing in its shape)."""
    run = ServerRun(algo, args.env, n, [*args.common, *overrides], args.folder, trial)
    payload = args.folder / f"payload-{algo}.npz"
    if not payload.is_file():
        make = ppo_segment if algo == "ppo" else ddpg_chunk
        np.savez(payload, **make(run.plan))
    run.start()
    return run, payload


def start_clients(run: ServerRun, clients: Clients, ready_key: tuple) -> None:
    """Start the stand-ins as a launch starts actors (beside the servers; they wait for version
    1 themselves), then wait until every server serves /metrics and the learner updates."""
    began = time.monotonic()
    clients.start()
    run.wait_ready()
    server, key, at_least = ready_key

    def flowing() -> bool:
        run.check_alive()
        return run.scrape(server).get(key, 0) >= at_least

    wait_until(flowing, 240, f"{server}: {key} >= {at_least}")
    print(
        f"  {run.path.name}: {clients.count} stand-ins in {len(clients.groups)} processes; planned "
        f"in {run.planned_s:.0f} s, the learner updates {time.monotonic() - began:.0f} s after "
        "the start",
        flush=True,
    )


def warm_up(args, spec: dict, phase: dict) -> float:
    """Seconds before a phase's first window: `--warm-s`, in a paced phase at least one stand-in
    period (every stand-in has sent in the phase's own schedule)."""
    return max(args.warm_s, spec["period"] if phase["mode"] == "paced" else 0.0)


def ppo_spec(run: ServerRun, payload: Path, n: int, args, phases: list[dict]) -> dict:
    cfg = run.config
    return {
        "kind": "ppo",
        "addresses": run.actor_addresses(),
        "payload": str(payload),
        "push_hwm": 4,
        "period": n / args.rate,
        "actors": n,
        "per_batch": recipe_of(run.plan.algo_class).per_batch(cfg),
        "num_envs": cfg.env.num_envs,
        "rollout_length": cfg.actor.rollout_length,
        "steps_per_segment": cfg.env.num_envs * cfg.actor.rollout_length,
        "episode_steps": 1000,
        "episode_return": -50.0,
        "phases": phases,
        "token": run.metrics_token(),
    }


def ppo_overrides(args, epochs: int = 1) -> list[str]:
    steps = SEGMENT["num_envs"] * SEGMENT["rollout_length"]
    return [
        f"algo.batch_size={args.per_batch * steps}",
        f"algo.update_epochs={epochs}",
        "algo.num_minibatches=4",
    ]


PPO_FLOWING = ("learner", "surreal_learner_iterations_total", 2)
DDPG_FLOWING = ("param-server-0", "surreal_policy_version", 2)


def ppo_sweep(args, md: list[str], problems: list[str]) -> list[dict]:
    phases = parse_phases(args.phases)
    rows = []
    for n in args.actors:
        run, payload = start_run("ppo", n, ppo_overrides(args), args, f"ppo-n{n}")
        spec = ppo_spec(run, payload, n, args, phases)
        clients = Clients(run, spec, n, math.ceil(n / args.per_proc))
        snaps: list[list[dict]] = []
        try:
            start_clients(run, clients, PPO_FLOWING)
            for k, phase in enumerate(phases):
                if k:
                    clients.signal(signal.SIGUSR1)
                snaps.append(measure(run, clients, args, warm_up(args, spec, phase)))
        finally:
            stats = clients.stop()
            run.stop()
            print(f"  {run.path.name}: {run.stopped()}", flush=True)
        problems += run.problems(stats)
        for phase, ph_snaps in zip(phases, snaps, strict=True):
            windows = [
                window(a, b, stats, "ppo") for a, b in zip(ph_snaps, ph_snaps[1:], strict=False)
            ]
            name = f"{phase['mode']}:{phase['max_ahead'] if phase['max_ahead'] is not None else 'none'}"
            summary, pool = summarize(windows), pooled(ph_snaps, stats)
            rows.append(
                {"key": n, "phase": name, "summary": summary, "pooled": pool, "windows": windows}
            )
            s = rows[-1]["summary"]
            print(
                f"N={n} {name}: {s['segments_s'].median:,.1f} segments/s, "
                f"{s['updates_s'].median:.2f} updates/s, fetch p99 {s['p99_ms'].median:.1f} ms",
                flush=True,
            )
    clients_per = ", ".join(f"N={n}: {math.ceil(n / args.per_proc)}" for n in args.actors)
    title = (
        f"PPO {args.env}, offered {args.rate:g} segments/s in phase paced (8 envs x 32 steps), "
        f"{args.per_batch} segments per batch; stand-in processes {clients_per}"
    )
    head, body = throughput_rows(rows, "N")
    print_table(title, head, body, md)
    head, body = resource_rows(rows, "N")
    print_table("PPO server processes (end of each window, median)", head, body, md)
    return rows


def ddpg_section(args, md: list[str], problems: list[str]) -> list[dict]:
    rows = []
    n = args.ddpg_actors
    phases = [{"mode": m, "max_ahead": None} for m in args.ddpg_phases.split(",")]
    for k in args.ddpg_shards:
        overrides = [
            f"algo.replay_shards={k}",
            "algo.param_shards=1",
            "algo.replay_start=1000",
            "algo.updates_per_step=0",
            "algo.hidden=64,64",
        ]
        run, payload = start_run("ddpg", n, overrides, args, f"ddpg-k{k}")
        algo = run.config.algo
        addresses = run.actor_addresses()
        addresses["experience"] = addresses.pop("replay")
        num_envs = run.config.env.num_envs
        spec = {
            "kind": "ddpg",
            "addresses": addresses,
            "payload": str(payload),
            "push_hwm": 64,
            "period": n * algo.chunk_size / args.ddpg_rate,
            "actors": n,
            "num_envs": num_envs,
            "episode_steps": 1000,
            "phases": phases,
            "token": run.metrics_token(),
            "ddpg": {
                "updates_per_step": algo.updates_per_step,
                "publish_every": algo.publish_every,
                "chunk_size": algo.chunk_size,
                "n_step": algo.n_step,
                "replay_start": algo.replay_start,
                "fetch_every_chunks": max(1, round(16 * num_envs / algo.chunk_size)),
            },
        }
        clients = Clients(run, spec, n, math.ceil(n / args.per_proc))
        snaps = []
        try:
            start_clients(run, clients, DDPG_FLOWING)
            for j, phase in enumerate(phases):
                if j:
                    clients.signal(signal.SIGUSR1)
                snaps.append(measure(run, clients, args, warm_up(args, spec, phase), k))
        finally:
            stats = clients.stop()
            run.stop()
            print(f"  {run.path.name}: {run.stopped()}", flush=True)
        problems += run.problems(stats)
        for phase, ph in zip(phases, snaps, strict=True):
            windows = [
                window(a, b, stats, "ddpg", algo.publish_every, algo.chunk_size)
                for a, b in zip(ph, ph[1:], strict=False)
            ]
            rows.append({"key": k, "phase": phase["mode"], "summary": summarize(windows)})
            s = rows[-1]["summary"]
            if s["invalid"]:
                problems.append(f"ddpg-k{k}: {s['invalid']:.0f} invalid messages")
            print(
                f"DDPG shards={k} {phase['mode']}: {s['segments_s'].median:,.0f} transitions/s, "
                f"{s['updates_s'].median:.0f} updates/s",
                flush=True,
            )
    title = (
        f"DDPG {args.env}, {n} stand-in actors, chunks of 32 transitions"
        + (
            f", offered {args.ddpg_rate:,.0f}/s in phase paced"
            if "paced" in args.ddpg_phases
            else ""
        )
        + "; offered and 'into buffer' in transitions/s (pushes the stand-ins' sockets took, and "
        "what the shards stored); upd/s from the published version x publish_every"
    )
    head, body = throughput_rows(rows, "shards")
    print_table(title, head, body, md)
    head, body = resource_rows(rows, "shards")
    print_table("DDPG server processes (end of each window, median)", head, body, md)
    return rows


def churn_section(args, md: list[str], problems: list[str]) -> tuple[list[dict], dict]:
    n = args.churn_actors
    overrides = ppo_overrides(args, args.churn_epochs)
    run, payload = start_run("ppo", n, overrides, args, f"churn-n{n}")
    paced = argparse.Namespace(**{**vars(args), "rate": args.churn_rate})
    spec = ppo_spec(run, payload, n, paced, parse_phases(args.churn_phase))
    clients = Clients(run, spec, n, args.churn_procs)
    procs = len(clients.groups)
    chosen = list(range(max(1, round(args.churn_fraction * procs))))
    affected = sum(clients.groups[g][1] for g in chosen)
    timeline: list[dict] = []
    spans: dict[str, tuple[float, float]] = {}

    def tick_until(end: float, every=None, action=None) -> None:
        t, due = time.monotonic(), time.monotonic() + (every or math.inf)
        while t < end:
            t = min(t + 1.0, end)
            sleep_until(t)
            run.check_alive()
            prom = run.scrape("learner")
            timeline.append(
                {
                    "mono": time.monotonic(),
                    "iterations": prom.get("surreal_learner_iterations_total", 0),
                    "added": run.scrape("buffer").get("surreal_buffer_added_total", 0),
                    "alive": clients.alive(),
                }
            )
            if action is not None and time.monotonic() >= due:
                action()
                due += every

    try:
        start_clients(run, clients, PPO_FLOWING)
        sleep_until(time.monotonic() + warm_up(args, spec, spec["phases"][0]))
        for name, seconds, begin, every, action, finish in (
            ("before", args.window_s * max(4, args.windows + 1), None, None, None, None),
            (
                f"paused {affected}/{n}",
                args.pause_s,
                lambda: clients.signal(signal.SIGSTOP, chosen),
                None,
                None,
                lambda: clients.signal(signal.SIGCONT, chosen),
            ),
            ("after resume", args.window_s * max(2, args.windows - 1), None, None, None, None),
            (
                f"kill+restart {affected}/{n} every {args.churn_every:g} s",
                args.churn_s,
                None,
                args.churn_every,
                lambda: clients.kill_and_restart(chosen),
                None,
            ),
        ):
            if begin:
                begin()
            start = time.monotonic()
            tick_until(start + seconds, every, action)
            spans[name] = (start, time.monotonic())
            if finish:
                finish()
    finally:
        stats = clients.stop()
        run.stop()
        print(f"  {run.path.name}: {run.stopped()}", flush=True)
    problems += run.problems(stats)  # the killed incarnations' statistics are lost with them
    body = churn_rates(timeline, spans)
    head = ["span", "s", "learner upd/s", "vs before", "per 1 s", "segments/s", "client procs"]
    title = (
        f"Stragglers and churn: PPO, {n} stand-ins in {procs} processes, {affected} of them "
        f"({affected / n:.0%}) in the stopped/killed processes; phase {args.churn_phase}, "
        f"offered {args.churn_rate:g} segments/s, {args.churn_epochs} epochs per batch"
    )
    print_table(title, head, body, md)
    return timeline, spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 4, 32; short spans (CI)")
    parser.add_argument("--sections", default="ppo,ddpg,churn")
    parser.add_argument("--actors", help="stand-in counts (default 16,64,256,1024; quick 4,32)")
    parser.add_argument("--env", default="gym:HalfCheetah-v5")
    parser.add_argument("--rate", type=float, default=64.0, help="offered segments/s (paced)")
    parser.add_argument("--per-batch", type=int, default=16, help="segments per learner batch")
    parser.add_argument("--phases", help="MODE:MAX_AHEAD,... (default paced:1,paced:none,max:1)")
    parser.add_argument("--windows", type=int, help="windows per phase (default 3; quick 1)")
    parser.add_argument("--window-s", type=int, help="seconds per window (default 3; quick 2)")
    parser.add_argument("--warm-s", type=float, default=2.0, help="least warm-up per phase")
    parser.add_argument("--per-proc", type=int, default=64, help="stand-ins per client process")
    parser.add_argument("--churn-procs", type=int, default=10, help="client processes (churn)")
    parser.add_argument("--ddpg-actors", type=int, help="default 128; quick 16")
    parser.add_argument("--ddpg-shards", help="default 1,2,3; quick 1,2")
    parser.add_argument("--ddpg-rate", type=float, default=8192.0, help="offered transitions/s")
    parser.add_argument("--ddpg-phases", default="max", help="paced and/or max")
    parser.add_argument("--churn-actors", type=int, help="default 256; quick 32")
    parser.add_argument("--pause-s", type=float, help="SIGSTOP length (default 60; quick 5)")
    parser.add_argument("--churn-s", type=float, help="kill/restart span (default 20; quick 6)")
    parser.add_argument("--churn-every", type=float, default=4.0)
    parser.add_argument("--churn-fraction", type=float, default=0.1)
    parser.add_argument("--churn-phase", default="paced:1", help="MODE:MAX_AHEAD (churn)")
    parser.add_argument("--churn-rate", type=float, default=160.0, help="offered segments/s")
    parser.add_argument("--churn-epochs", type=int, default=20, help="PPO epochs per batch")
    parser.add_argument("--out", type=Path, default=OUT, help="scale.md, scale.png, scale.json")
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    parser.add_argument("--no-plot", action="store_true", help="write no scale.png")
    args = parser.parse_args()
    q = args.quick
    args.actors = [int(x) for x in (args.actors or ("4,32" if q else "16,64,256,1024")).split(",")]
    args.phases = args.phases or ("paced:1" if q else "paced:1,paced:none,max:1")
    args.windows = args.windows or (1 if q else 3)
    args.window_s = args.window_s or (2 if q else 3)
    args.ddpg_actors = args.ddpg_actors or (16 if q else 128)
    args.ddpg_shards = [int(x) for x in (args.ddpg_shards or ("1,2" if q else "1,2,3")).split(",")]
    args.churn_actors = args.churn_actors or (32 if q else 256)
    args.pause_s = args.pause_s if args.pause_s is not None else (5.0 if q else 60.0)
    args.churn_s = args.churn_s if args.churn_s is not None else (6.0 if q else 20.0)
    args.common = ["eval.every_s=0", "run.torch_threads=1", "env.num_envs=8"]
    args.common.append("actor.rollout_length=32")
    sections = args.sections.split(",")
    started, loads = time.monotonic(), [os.getloadavg()]
    args.folder = Path(tempfile.mkdtemp(prefix="surreal-scale-"))
    md = ["# bench/scale.py", "", f"`{' '.join(['bench/scale.py', *sys.argv[1:]])}`"]
    rows, ddpg, timeline, spans, problems, took = [], [], [], {}, [], []
    try:
        if "ppo" in sections:
            rows = ppo_sweep(args, md, problems)
            took.append(f"ppo {time.monotonic() - started:.0f} s")
        loads.append(os.getloadavg())
        if "ddpg" in sections:
            ddpg = ddpg_section(args, md, problems)
            took.append(f"ddpg {time.monotonic() - started:.0f} s")
        loads.append(os.getloadavg())
        if "churn" in sections:
            timeline, spans = churn_section(args, md, problems)
            took.append(f"churn {time.monotonic() - started:.0f} s")
    finally:
        if not args.keep:
            shutil.rmtree(args.folder, ignore_errors=True)
    loads.append(os.getloadavg())
    elapsed = time.monotonic() - started
    cores = len(os.sched_getaffinity(0))
    load_text = " -> ".join(f"{la[0]:.1f}" for la in loads)
    line = (
        f"\n{cores} cores; load average (1 min) {load_text} (start -> after each section); "
        f"{elapsed:.0f} s in all (done at: {', '.join(took)}); threads: 1 per server and "
        "stand-in process"
    )
    print(line)
    md += ["", line.strip()]
    if rows and len(args.actors) > 1:
        full = not q and set(sections) == {"ppo", "ddpg", "churn"}
        results = checks(rows, rows[0]["phase"], elapsed if full else None, problems)
        results += churn_checks(timeline, spans, args.churn_phase)
        print_checks(results, md, f"checks (phase {rows[0]['phase']})")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.md").write_text("\n".join(md) + "\n")
    dump = {
        "ppo": [{k: v for k, v in r.items() if k != "summary"} for r in rows],
        "ddpg_keys": [r["key"] for r in ddpg],
        "churn": timeline,
        "loads": loads,
        "elapsed": elapsed,
    }
    (args.out / "scale.json").write_text(json.dumps(dump, default=str))
    if not args.no_plot:
        plot(rows, ddpg, timeline, spans, args.out / "scale.png")
    print(f"table: {args.out / 'scale.md'}")


if __name__ == "__main__":
    main()
