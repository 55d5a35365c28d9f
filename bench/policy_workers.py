"""Env frames/s of actors with local inference vs remote inference on 1-2 policy workers.

    .venv/bin/python bench/policy_workers.py [--env gym:HalfCheetah-v5] [--algo ppo]
        [--actors 2] [--num-envs 8] [--workers 1,2] [--rounds 3] [--seconds 10] [--device cpu]

Each round runs every setup once, in alternating order, for `--seconds` after a warm-up:
`--actors` actor processes each stepping `--num-envs` environments with the runtime actor's
rollout loop (`surreal.runtime.processes.split_actor.build_actor`: one `surreal.api.core.Actor`, or with
remote inference and `--double-buffer` two halves), their policy either local
(`actor.inference=local`) or a `RemotePolicy` asking policy-worker processes (`surreal.runtime.processes.policy_worker.serve`, as
`surreal launch` runs them). Parameters come from a parameter server in this process (a freshly
initialized learner's). No learner, buffer or evaluator runs: the actors and workers are the work.
Prints medians, ranges and the ratio to local inference per round; machine load and thread
counts are stated.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import threading
import time
from types import SimpleNamespace
from typing import Any


def _config(algo: str, env: str, num_envs: int, overrides: list[str]):
    from surreal.api.config import Config, apply_overrides
    from surreal.api.registry import resolve
    from surreal.envs import env_info

    algo_class = resolve(algo)
    config = Config(algo=algo_class.config_class())
    config.env.id, config.env.num_envs = env, num_envs
    apply_overrides(config, overrides)
    return algo_class, config, env_info(env, config.env)


def _worker(args: Any, index: int, address: str, params_address: str, stop: Any, cpu: Any) -> None:
    import torch

    from surreal.runtime.processes.policy_worker import serve

    torch.set_num_threads(1)
    algo_class, config, info = _config(args.algo, args.env, args.num_envs, args.set)
    comp = SimpleNamespace(
        index=index,  # what the worker prints its lines as
        config=config,
        algo=algo_class,
        env_info=info,
        stopping=threading.Event(),
        report=lambda *a, **k: None,
        address=lambda name: SimpleNamespace(tcp=params_address),
    )
    threading.Thread(target=lambda: (stop.wait(), comp.stopping.set()), daemon=True).start()
    start = time.process_time()
    serve(comp, address)
    cpu.put(time.process_time() - start)


def _actor(args: Any, index: int, address: str | None, params_address: str, out: Any) -> None:
    import torch

    from surreal.runtime.processes.split_actor import build_actor
    from surreal.runtime.wire.parameter_client import ParameterClient
    from surreal.runtime.wire.remote_policy import RemotePolicy

    torch.set_num_threads(1)
    algo_class, config, info = _config(args.algo, args.env, args.num_envs, args.set)
    policy = algo_class.make_policy(config.algo, info)
    if address is None:
        client = ParameterClient(params_address)
        policy.load_params(client.wait_for(1))
        client.close()
    else:
        policy = RemotePolicy(address, f"actor-{index}", policy)
    config.actor.inference = "local" if address is None else "remote"
    config.actor.rollout_length, config.actor.double_buffer = (
        args.rollout_length,
        args.double_buffer,
    )
    env, actor = build_actor(SimpleNamespace(config=config), policy, seed=index * 100)
    cpu0, total = time.process_time(), 0
    warm_until = time.monotonic() + args.warmup
    while time.monotonic() < warm_until:
        actor.rollout()
        total += args.rollout_length * env.num_envs
    frames, start = 0, time.monotonic()
    while time.monotonic() - start < args.seconds:
        actor.rollout()
        frames += args.rollout_length * env.num_envs
    total += frames
    out.put((frames / (time.monotonic() - start), total, time.process_time() - cpu0))
    env.close()


def run_setup(args: Any, workers: int, params_address: str) -> tuple[float, float]:
    """(total env frames/s, env frames per CPU-second of actors and workers together) with
    `workers` policy workers (0: local inference)."""
    from caraml.testing import free_port

    ctx = mp.get_context("spawn")
    out, stop, cpu = ctx.Queue(), ctx.Event(), ctx.Queue()
    addresses = [f"tcp://127.0.0.1:{free_port()}" for _ in range(workers)]
    servers = [
        ctx.Process(target=_worker, args=(args, i, a, params_address, stop, cpu))
        for i, a in enumerate(addresses)
    ]
    actors = [
        ctx.Process(
            target=_actor,
            args=(args, i, addresses[i % workers] if workers else None, params_address, out),
        )
        for i in range(args.actors)
    ]
    for p in servers + actors:
        p.daemon = True  # ended with this process
        p.start()
    try:
        reports = [out.get(timeout=args.warmup + args.seconds + 300) for _ in actors]
        stop.set()
        worker_cpu = sum(cpu.get(timeout=30) for _ in servers)
    finally:
        stop.set()
        for p in actors + servers:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    fps = sum(r[0] for r in reports)
    per_cpu = sum(r[1] for r in reports) / (sum(r[2] for r in reports) + worker_cpu)
    return fps, per_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="gym:HalfCheetah-v5")
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--rollout-length", type=int, default=32)
    parser.add_argument("--workers", default="1,2", help="policy worker counts to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument(
        "--double-buffer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="remote actors step two halves of their envs in turn (actor.double_buffer)",
    )
    parser.add_argument("--set", action="append", default=[], help="config override k=v")
    parser.add_argument(
        "--device",
        default="cpu",
        help="where policy workers run the policy (actor.inference_device: cpu, cuda, cuda:N); "
        "local inference stays on the actors' CPUs",
    )
    args = parser.parse_args()
    from surreal.api.config import ConfigError
    from surreal.api.device import check_device

    try:  # a GPU this machine lacks: said here, before any process starts
        check_device(args.device, name="actor.inference_device")
    except ConfigError as exc:
        parser.error(str(exc))
    args.set.append(f"actor.inference_device={args.device}")
    import torch

    from caraml.testing import free_port
    from surreal.runtime.processes.param_server import ParameterStore
    from surreal.runtime.wire.guard import PortGuard
    from surreal.runtime.wire.ports import GuardedServer

    algo_class, config, info = _config(args.algo, args.env, args.num_envs, args.set)
    torch.manual_seed(0)
    store = ParameterStore()
    store.update({"version": 1, "step": 0, "params": algo_class.create(config, info).params()})
    address = f"tcp://127.0.0.1:{free_port()}"
    server = GuardedServer(address, store.handle, PortGuard("params")).start()
    setups = [0] + [int(w) for w in args.workers.split(",")]
    results: dict[int, list[float]] = {w: [] for w in setups}
    per_cpu: dict[int, list[float]] = {w: [] for w in setups}
    loads = [os.getloadavg()[0]]
    try:
        for r in range(args.rounds):
            order = setups if r % 2 == 0 else setups[::-1]
            for w in order:
                fps, efficiency = run_setup(args, w, address)
                results[w].append(fps)
                per_cpu[w].append(efficiency)
                loads.append(os.getloadavg()[0])
                print(
                    f"round {r + 1} {_label(w, args.device)}: {fps:,.0f} frames/s, "
                    f"{efficiency:,.0f} frames per CPU-s",
                    flush=True,
                )
    finally:
        server.stop()
    _table(args, results, per_cpu, loads)


def _label(workers: int, device: str = "cpu") -> str:
    if workers == 0:
        return "local inference"
    return f"remote, {workers} policy worker(s)" + (f" on {device}" if device != "cpu" else "")


def _table(args: Any, results: dict, per_cpu: dict, loads: list[float]) -> None:
    cores = os.cpu_count()
    print(
        f"\n{args.env} ({args.algo}), {args.actors} actors x {args.num_envs} envs, rollout "
        f"{args.rollout_length}, double buffering {'on' if args.double_buffer else 'off'}; "
        f"{args.rounds} alternating rounds of {args.seconds:.0f} s; "
        f"{cores} cores, 1 torch/OpenMP thread per process; load average (1 min) "
        f"{min(loads):.1f}-{max(loads):.1f} during the run"
    )
    print(
        f"{'setup':<40} {'frames/s median':>16} {'range':>14} {'vs local':>18} "
        f"{'frames/CPU-s':>13} {'vs local':>18}"
    )
    for w, values in results.items():
        cells = []
        for series, base in ((values, results[0]), (per_cpu[w], per_cpu[0])):
            ratios = [v / b for v, b in zip(series, base, strict=True)]
            cells.append(
                (
                    statistics.median(series),
                    f"{min(series):,.0f}-{max(series):,.0f}",
                    f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
                )
            )
        (fps, rng, ratio), (eff, _, eff_ratio) = cells
        print(
            f"{_label(w, args.device):<40} {fps:>16,.0f} {rng:>14} {ratio:>18} {eff:>13,.0f} {eff_ratio:>18}"
        )
    print(
        "frames/s ratios on a loaded machine favour setups with more processes (each gets a "
        "share of the cores); frames per CPU-second is the cost, independent of that share"
    )


if __name__ == "__main__":
    main()
