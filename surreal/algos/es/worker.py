"""An ES worker: asks the master for a pair, runs it, answers with two returns, repeats."""

from __future__ import annotations

import argparse
import json
import threading
import time

import caraml
from surreal.algos.es.config import ESConfig
from surreal.algos.es.loop import build
from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.policy import ESPolicy
from surreal.algos.es.rollout import evaluate_pair
from surreal.algos.es.state import ESState


def run_worker(
    env,
    policy: ESPolicy,
    state: ESState,
    noise: SharedNoiseTable,
    config: ESConfig,
    master_address: str,
    name: str,
    request_timeout: float = 2.0,
    give_up_s: float = 120.0,
    stopping: threading.Event | None = None,
    spans: list[tuple[float, float, int]] | None = None,
) -> dict[str, int]:
    """Work until the master says stop; returns counts (pairs evaluated, full syncs, updates,
    dropped: tasks not run because the state had drifted) and the final generation and checksum.

    The worker keeps its own copy of the ES state and steps it with each generation record the
    master sends (indices and returns only); it asks for a full sync when it joins or drifts.
    `spans`, if given, gets (start, end, env steps) of every pair it ran, on `time.monotonic`'s
    clock (benchmarks: how busy a worker was, and how fast its rollouts ran).
    """
    # Short timeouts, many retries (lazy pirate): a lost request costs ~request_timeout, and a
    # repeated one is harmless (the master ignores duplicate answers, re-issues unanswered pairs).
    client = caraml.Client(
        master_address, timeout=request_timeout, retries=max(1, int(give_up_s / request_timeout))
    )
    generation, result, idle = -1, None, 0.002
    pause = stopping or threading.Event()
    stats = {"pairs": 0, "syncs": 0, "updates": 0, "dropped": 0}
    try:
        while stopping is None or not stopping.is_set():
            reply = client.request(
                {"op": "task", "worker": name, "generation": generation, "result": result}
            )
            result = None
            in_step = _follow(reply, state, noise, stats)
            generation = state.generation if in_step else -1  # -1 asks for a full sync
            if reply["op"] == "stop":
                return {**stats, "generation": state.generation, "checksum": state.checksum()}
            if reply["op"] == "task" and not in_step:
                stats["dropped"] += 1  # the master hands it out again at the next request
            if reply["op"] == "wait" or not in_step:
                # nothing to hand out yet: ask again when the master says (it paces its waiting
                # workers by their number), or after a doubling backoff when it does not say
                pause.wait(_retry(reply, idle))
                idle = min(idle * 2, 0.05)
                continue
            idle = 0.002
            result = _run_task(reply, env, policy, state, noise, config, stats, spans)
        return stats
    finally:
        client.close()


def _follow(reply: dict, state: ESState, noise: SharedNoiseTable, stats: dict[str, int]) -> bool:
    """Step `state` with the reply's sync or generation records; whether it is now in step."""
    if "sync" in reply:
        state.load_wire(reply["sync"])
        stats["syncs"] += 1
    else:
        for record in reply.get("updates", []):
            state.apply(record, noise)
            stats["updates"] += 1
    return state.generation == reply["generation"] and state.checksum() == reply["checksum"]


def _run_task(
    reply: dict,
    env,
    policy: ESPolicy,
    state: ESState,
    noise: SharedNoiseTable,
    config: ESConfig,
    stats: dict[str, int],
    spans: list[tuple[float, float, int]] | None,
) -> dict:
    """Evaluate the pair the reply hands out; returns the result to send with the next request."""
    started = time.monotonic()
    pair = evaluate_pair(
        env,
        policy,
        state.theta,
        state.obs_mean,
        state.obs_std,
        noise,
        int(reply["index"]),
        config.noise_std,
        int(reply["seed"]),
        config.max_episode_steps,
    )
    stats["pairs"] += 1
    if spans is not None:
        spans.append((started, time.monotonic(), pair.steps))
    return {
        "generation": reply["generation"],
        "task": reply["task"],
        "r_pos": pair.r_pos,
        "r_neg": pair.r_neg,
        "steps": pair.steps,
        "obs_sum": pair.obs_sum,
        "obs_sumsq": pair.obs_sumsq,
        "obs_count": pair.obs_count,
    }


def _retry(reply: dict, backoff: float) -> float:
    """Seconds to wait before asking again: the master's "retry" within [1 ms, 1 s], else backoff."""
    try:
        return min(1.0, max(0.001, float(reply["retry"])))
    except (KeyError, TypeError, ValueError):
        return backoff


def main(argv: list[str] | None = None) -> None:
    """Standalone worker (benchmarks, tests): `python -m surreal.algos.es.worker --env ID --master ADDR`."""
    parser = argparse.ArgumentParser(prog="python -m surreal.algos.es.worker")
    parser.add_argument("--env", required=True, help="gym:<id>")
    parser.add_argument("--master", required=True, help="the master's address, tcp://host:port")
    parser.add_argument("--name", default="worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-dir", default=None)
    parser.add_argument("--config", default="{}", help="ESConfig fields as JSON")
    parser.add_argument(
        "--spans", action="store_true", help="also print (start, end, steps) of every pair"
    )
    args = parser.parse_args(argv)
    config = ESConfig(**json.loads(args.config))
    env, policy, state, noise = build(args.env, config, args.seed, args.noise_dir)
    spans: list | None = [] if args.spans else None
    stats = run_worker(env, policy, state, noise, config, args.master, args.name, spans=spans)
    extra = {"spans": spans} if spans is not None else {}
    print(json.dumps({"name": args.name, **stats, **extra}), flush=True)


if __name__ == "__main__":
    main()
