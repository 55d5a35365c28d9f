"""The server side of a bench/scale.py run, started the way a run starts it, and the stand-ins beside it.

`ServerRun` builds a real run folder with surreal's own launch plan (`surreal.launch.experiment.plan`,
`create_run`, `build_experiment`: the config, run record and symphony Experiment of `surreal launch
ALGO --actors N`), gives every service a free port on 127.0.0.1 as the local backend does
(`symphony.addresses.local_endpoints`), and starts each process of the Experiment that is not an
actor with its own command line (`python -m surreal component ROLE RUN_DIR`) and the SYMPH_*
variables symphony would set (`symphony.addresses.process_env`), in its own session, logging to
`RUN/logs/`. The stand-ins (`bench/scale_clients.py`) get the addresses actor-0 would get.
It reads each server's own Prometheus `/metrics` (counters the components keep anyway) and its
RSS, open file descriptors and CPU time (psutil).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
from prometheus_client.parser import text_string_to_metric_families

from surreal.launch import experiment as launch
from surreal.runtime.wire import report_token
from symphony.addresses import local_endpoints, process_env
from symphony.local import proctree

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = Path(__file__).resolve().parent / "scale_clients.py"
KEPT_LABELS = ("port", "direction", "phase")


def wait_until(condition, deadline_s: float, what: str, poll_s: float = 0.2):
    """Poll `condition()` until it returns something truthy (returned) or raise after the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(poll_s)  # polling a condition with a deadline


def sleep_until(when: float) -> None:
    """The load generator's schedule: wait until monotonic time `when`."""
    time.sleep(max(0.0, when - time.monotonic()))


class ServerRun:
    """A run folder and its server processes (everything but the actors)."""

    def __init__(self, algo: str, env: str, actors: int, overrides: list[str], folder: Path, trial):
        self.began = time.monotonic()
        self.plan = launch.plan(
            algo,
            env=env,
            actors=actors,
            steps=10**9,
            overrides=tuple(overrides),
            folder=str(folder),
            name="scale",
            trial=trial,
        )
        launch.create_run(self.plan)
        self.path = self.plan.run_dir.path
        self.experiment = launch.build_experiment(self.plan)
        self.endpoints = local_endpoints(self.experiment)
        self.servers = [p for p in self.experiment.processes() if not p.name.startswith("actor-")]
        self.popens: dict[str, subprocess.Popen] = {}
        self.config = self.plan.config
        self.planned_s = time.monotonic() - self.began
        self.stop_s, self.killed = 0.0, []

    def metrics_token(self) -> str | None:
        """The run's metrics token (`surreal.runtime.wire.report_token`): the stand-ins report as the
        run's own actors do."""
        path = report_token.token_file(self.plan)
        return path.read_text().strip() if path.is_file() else None

    def actor_addresses(self) -> dict[str, str]:
        """service -> tcp address, as actor-0 gets them (params, experience or replay, metrics)."""
        actor = self.experiment.process("actor-0")
        return {s: self.endpoints[s].tcp for s in actor.services() if not s.startswith("prom-")}

    def start(self) -> None:
        (self.path / "logs").mkdir(exist_ok=True)
        for proc in self.servers:
            env = dict(os.environ)
            env.update(process_env(self.experiment, proc, self.endpoints, bind_host="127.0.0.1"))
            with open(self.path / "logs" / f"{proc.name}.log", "ab") as log:
                self.popens[proc.name] = subprocess.Popen(
                    proc.argv(),
                    env=env,
                    cwd=ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=proctree.die_with_parent,
                )

    def check_alive(self) -> None:
        """Raise (with the log's tail) if a server process ended."""
        for name, popen in self.popens.items():
            if popen.poll() is not None:
                tail = (self.path / "logs" / f"{name}.log").read_text()[-3000:]
                raise RuntimeError(f"server {name} exited with {popen.returncode}:\n{tail}")

    def scrape(self, name: str, required: bool = False) -> dict[str, float]:
        """`name`'s Prometheus series: {"metric{label=value,...}": value} (run labels dropped);
        {} when it does not answer (`required`: three tries, then RuntimeError)."""
        port = self.endpoints[f"prom-{name}"].port
        for attempt in range(3 if required else 1):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    text = r.read().decode()
                break
            except OSError as exc:
                if attempt == 2:
                    raise RuntimeError(f"{name}'s /metrics did not answer: {exc}") from exc
        else:
            return {}
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(
                    f"{k}={sample.labels[k]}" for k in KEPT_LABELS if k in sample.labels
                )
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    def wait_ready(self, deadline_s: float = 180.0) -> None:
        """Every server answers on its /metrics port."""

        def ready() -> bool:
            self.check_alive()
            return all(self.scrape(p.name) for p in self.servers)

        wait_until(ready, deadline_s, "the server processes serving /metrics")

    def resources(self) -> dict[str, dict[str, float]]:
        """Per server: RSS (bytes) and open fds of its main process, CPU seconds of its tree."""
        out = {}
        for name, popen in self.popens.items():
            try:
                proc = psutil.Process(popen.pid)
                tree = [proc, *proc.children(recursive=True)]
                cpu = 0.0
                for p in tree:
                    try:
                        t = p.cpu_times()
                        cpu += t.user + t.system
                    except psutil.Error:
                        pass
                out[name] = {"rss": proc.memory_info().rss, "fds": proc.num_fds(), "cpu": cpu}
            except psutil.Error:
                out[name] = {"rss": math.nan, "fds": math.nan, "cpu": math.nan}
        return out

    def replay_stats(self, shards: int) -> dict[int, dict]:
        """DDPG: each replay shard's {"added", "chunks"}, asked through the sample proxy."""
        import caraml

        seen: dict[int, dict] = {}
        client = caraml.Client(self.endpoints["replay-sample"].tcp, timeout=2.0, retries=5)
        try:
            for _ in range(20 * shards):
                reply = client.request({"op": "stats"})
                seen[int(reply["shard"])] = {"added": reply["added"], "chunks": reply["chunks"]}
                if len(seen) == shards:
                    break
        finally:
            client.close()
        return seen

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM every server (the learner writes its checkpoint), SIGKILL what is left after
        `grace_s`."""
        began = time.monotonic()
        for popen in self.popens.values():
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        end = time.monotonic() + grace_s
        self.killed = []
        for name, popen in self.popens.items():
            try:
                popen.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.killed.append(name)
            try:
                os.killpg(popen.pid, signal.SIGKILL)  # its session: the fetcher worker too
            except (ProcessLookupError, PermissionError):
                pass
            popen.wait()
        self.stop_s = time.monotonic() - began

    def stopped(self) -> str:
        """How the last stop went."""
        killed = (
            f"; SIGKILL after the grace period: {', '.join(self.killed)}" if self.killed else ""
        )
        return f"servers stopped in {self.stop_s:.0f} s{killed}"

    def problems(self, stats: list[dict]) -> list[str]:
        """What went wrong in this run: crashes (`RUN/crashes.jsonl`), servers that exited before
        the stop, stand-in errors by kind (retries are not errors)."""
        out = []
        path = self.path / "crashes.jsonl"
        if path.is_file() and path.read_text().strip():
            out.append(f"{self.path.name}: crashes {path.read_text().strip()[:300]}")
        kinds: dict[str, int] = {}
        for st in stats:
            for kind, count in st.get("error_kinds", {}).items():
                kinds[kind] = kinds.get(kind, 0) + count
        if kinds:
            out.append(f"{self.path.name}: stand-in errors {kinds}")
        return out


def ppo_segment(plan) -> dict[str, np.ndarray]:
    """One segment from a real rollout: the run's env and policy, as an actor cuts it."""
    import torch

    from surreal.api.core import Actor
    from surreal.envs import VectorEnv

    torch.set_num_threads(1)
    cfg = plan.config
    policy = plan.algo_class.make_policy(cfg.algo, plan.env_info)
    env = VectorEnv(cfg.env.id, cfg.env, seed=cfg.run.seed + 1000)
    try:
        segment = Actor(env, policy, cfg.actor.rollout_length).rollout()
    finally:
        env.close()
    segment["version"] = np.zeros(cfg.env.num_envs, np.int64)
    return segment


def ddpg_chunk(plan) -> dict[str, np.ndarray]:
    """One n-step chunk from real env steps with random actions (the actor's ChunkWriter)."""
    from surreal.algos.ddpg.actor import ChunkWriter
    from surreal.envs import VectorEnv

    cfg, algo, info = plan.config, plan.config.algo, plan.env_info
    env = VectorEnv(cfg.env.id, cfg.env, seed=cfg.run.seed + 1000)
    writer = ChunkWriter(env.num_envs, algo.n_step, algo.gamma, algo.chunk_size, algo.dedup_obs)
    rng = np.random.default_rng(0)
    low, high = np.asarray(info.action_low), np.asarray(info.action_high)
    obs = env.reset()
    try:
        while True:
            unit = rng.uniform(-1, 1, (env.num_envs, info.action_dim)).astype(np.float32)
            next_obs, rew, term, trunc, extra = env.step(low + (unit + 1) / 2 * (high - low))
            chunks = writer.step(obs, unit, rew, next_obs, term, trunc, extra["final_obs"])
            if chunks:
                return chunks[0]
            obs = next_obs
    finally:
        env.close()


class Clients:
    """The stand-in processes of one run: `count` stand-ins split over `procs` processes."""

    def __init__(self, run: ServerRun, spec: dict, count: int, procs: int) -> None:
        self.run, self.count = run, count
        procs = max(1, min(procs, count))
        sizes = [count // procs + (g < count % procs) for g in range(procs)]
        starts = [sum(sizes[:g]) for g in range(procs)]
        self.groups = list(zip(starts, sizes, strict=True))
        self.spec_path = run.path / "scale_spec.json"
        self.spec_path.write_text(json.dumps(spec))
        self.popens: list[subprocess.Popen | None] = [None] * procs
        self.incarnation = [0] * procs
        self.stats_files: list[Path] = []

    def start(self, group: int | None = None) -> None:
        for g in range(len(self.groups)) if group is None else [group]:
            first, size = self.groups[g]
            out = self.run.path / f"clients-{g}-{self.incarnation[g]}.json"
            self.stats_files.append(out)
            cmd = [
                sys.executable,
                str(CLIENTS),
                str(self.spec_path),
                str(first),
                str(size),
                str(out),
            ]
            with open(self.run.path / "logs" / f"clients-{g}.log", "ab") as log:
                self.popens[g] = subprocess.Popen(
                    cmd,
                    cwd=ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=dict(os.environ, OMP_NUM_THREADS="1"),
                    preexec_fn=proctree.die_with_parent,
                )

    def signal(self, sig: int, groups: list[int] | None = None) -> None:
        for g in range(len(self.groups)) if groups is None else groups:
            popen = self.popens[g]
            if popen is not None and popen.poll() is None:
                popen.send_signal(sig)

    def kill_and_restart(self, groups: list[int], backoff_s: float = 0.5) -> None:
        """SIGKILL the groups' processes, then start them again (symphony's first restart backoff)."""
        self.signal(signal.SIGKILL, groups)
        for g in groups:
            self.popens[g].wait()
            self.incarnation[g] += 1
        time.sleep(backoff_s)  # the restart policy's backoff
        for g in groups:
            self.start(g)

    def cpu(self) -> float:
        total = 0.0
        for popen in self.popens:
            try:
                t = psutil.Process(popen.pid).cpu_times()
                total += t.user + t.system
            except (psutil.Error, AttributeError):
                pass
        return total

    def alive(self) -> int:
        return sum(p is not None and p.poll() is None for p in self.popens)

    def stop(self, deadline_s: float = 30.0) -> list[dict]:
        """SIGCONT + SIGTERM every process; returns the statistics each wrote."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        end = time.monotonic() + deadline_s
        for popen in self.popens:
            try:
                popen.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        return [json.loads(f.read_text()) for f in self.stats_files if f.is_file()]
