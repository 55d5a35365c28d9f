"""ES master + workers over caraml: identical states from seeds and returns; a lost worker is survived."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from symphony.testing import scaled

pytest.importorskip("gymnasium")

from caraml.testing import free_port  # noqa: E402
from surreal.algos.es.config import ESConfig  # noqa: E402
from surreal.algos.es.loop import build  # noqa: E402
from surreal.algos.es.master import ESMaster, serve  # noqa: E402
from surreal.algos.es.worker import run_worker  # noqa: E402

ENV = "gym:CartPole-v1"


def _master(cfg, tmp_path, generations, min_workers=2):
    _, policy, state, noise = build(ENV, cfg, 0, str(tmp_path))
    return ESMaster(
        policy, state, noise, cfg, generations=generations, seed=0, min_workers=min_workers
    )


@pytest.mark.timeout(120)
def test_workers_follow_the_master_from_seeds_and_returns_only(tmp_path):
    cfg = ESConfig(hidden=(16, 16), population=12, noise_size=200_000, max_episode_steps=200)
    master = _master(cfg, tmp_path, generations=4)
    address = f"tcp://127.0.0.1:{free_port()}"
    results, states, spans = {}, {}, {"w0": [], "w1": None}

    def work(name):
        env, policy, state, noise = build(ENV, cfg, 1, str(tmp_path))
        results[name] = run_worker(
            env, policy, state, noise, cfg, address, name, give_up_s=30, spans=spans[name]
        )
        states[name] = state

    workers = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(2)]
    for w in workers:
        w.start()
    serve(master, address, timeout=60)
    for w in workers:
        w.join(timeout=30)
    assert sorted(states) == ["w0", "w1"], results  # both workers ended on the master's "stop"
    assert master.state.generation == 4 and len(master.finished) == 4
    assert sum(r["pairs"] for r in results.values()) >= 4 * 6
    # w0 asked for timings (what bench/es_scaling.py reads): one (start, end, steps) per pair
    assert len(spans["w0"]) == results["w0"]["pairs"]
    assert all(t0 <= t1 and 2 <= n <= 2 * 200 for t0, t1, n in spans["w0"])
    for name, state in states.items():
        # parameters were sent once (the join); every later step came from indices and returns
        assert results[name]["syncs"] == 1, results[name]
        assert results[name]["updates"] >= 1
        assert state.generation == master.state.generation
        assert state.checksum() == master.state.checksum()


GENERATIONS = 12  # chances for the killer to find w0 holding a pair (6 were too few under load)


@pytest.mark.timeout(180)
@pytest.mark.integration
def test_kill_9_of_a_worker_mid_generation_does_not_stop_the_master(tmp_path):
    cfg = ESConfig(hidden=(16, 16), population=8, noise_size=200_000, task_timeout=1.0)
    master = _master(cfg, tmp_path, generations=GENERATIONS)
    address = f"tcp://127.0.0.1:{free_port()}"
    cmd = [
        sys.executable,
        "-m",
        "surreal.algos.es.worker",
        "--env",
        ENV,
        "--master",
        address,
        "--noise-dir",
        str(tmp_path),
        "--config",
        json.dumps({"hidden": [16, 16], "population": 8, "noise_size": 200_000}),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen(
            [*cmd, "--name", f"w{i}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    killed = {}

    def killer():
        deadline = time.monotonic() + scaled(60)
        with master.lock:
            while time.monotonic() < deadline and not master.done:
                held = [
                    t
                    for t, w in master.holders.items()
                    if w == "w0" and t not in master.gen.results and master.gen.number >= 1
                ]
                if held:
                    # Freeze w0, let any answer it already sent arrive, then kill it if the pair
                    # is still unanswered: the master must then finish without it.
                    os.kill(procs[0].pid, signal.SIGSTOP)
                    gen = master.gen.number
                    master.lock.wait(0.3)
                    if master.gen.number == gen and held[0] not in master.gen.results:
                        os.kill(procs[0].pid, signal.SIGKILL)
                        killed["gen"], killed["task"] = gen, held[0]
                        return
                    os.kill(procs[0].pid, signal.SIGCONT)
                master.lock.wait(0.005)  # poll (the lock is released while waiting)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        serve(master, address, timeout=60)
        thread.join(timeout=10)
        assert killed, "worker w0 never held a task"
        assert procs[0].wait(timeout=10) == -signal.SIGKILL
        assert (
            master.state.generation == GENERATIONS
        )  # every generation finished, the killed one included
        assert master.reissued >= 1  # the lost pair was handed to the surviving worker
        assert master.answered_by[(killed["gen"], killed["task"])] == "w1"
        out, _ = procs[1].communicate(timeout=30)
        assert procs[1].returncode == 0, out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_waiting_worker_is_paced_by_the_number_of_workers_polling(tmp_path):
    """A worker idle at the generation barrier asks again ~2 ms later while few wait (it starts
    the next generation promptly); with many polling, each waits longer, up to 50 ms, so the
    master answers about POLLS_PER_S polls a second."""
    from surreal.algos.es.master import POLLS_PER_S
    from surreal.algos.es.worker import _retry

    cfg = ESConfig(hidden=(8,), population=1, noise_size=100_000)
    master = _master(cfg, tmp_path, generations=2, min_workers=0)
    first = master.handle({"op": "task", "worker": "w0", "generation": -1})
    assert first["op"] == "task"  # the generation's only pair: every other worker now waits
    waits = [
        master.handle({"op": "task", "worker": f"w{i}", "generation": 0}) for i in range(1, 200)
    ]
    assert all(w["op"] == "wait" for w in waits)
    assert waits[0]["retry"] == pytest.approx(0.002)  # two workers seen
    assert waits[19]["retry"] == pytest.approx(21 / POLLS_PER_S)
    assert waits[-1]["retry"] == pytest.approx(0.05)  # capped
    # the worker honours the hint within [1 ms, 1 s] and falls back to its own backoff otherwise
    assert _retry({"retry": 0.002}, 0.05) == 0.002
    assert _retry({"retry": 1e9}, 0.05) == 1.0
    assert _retry({"retry": float("nan")}, 0.05) == 0.001
    assert _retry({"retry": "soon"}, 0.04) == 0.04
    assert _retry({"op": "wait"}, 0.04) == 0.04
