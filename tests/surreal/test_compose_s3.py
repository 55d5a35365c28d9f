"""The compose backend on the tests' real docker engine, run storage in an object store.

`surreal launch ppo --env gym:CartPole-v1 --backend compose --image IMG -o network=host
--folder s3://...`: every process runs in a container of an image built by `symphony build cpu
-c docker/build.yaml` (FROM a local image of this machine's Python and the project's runtime
dependencies: nothing is pulled), talks to the others over CurveZMQ with keys that reach the
containers through the run's private env file, and keeps the run folder in moto's S3 server on
127.0.0.1. It learns (eval >= 475); boto3 sees the run's objects; `surreal status`, `surreal
eval` and `surreal launch --resume` (again on compose) work from the URL; `symphony logs
cartpole-c1 actor-0` shows the actor's log while the run runs and after its containers are gone.
The resume's launcher is killed once its containers run: the learner's end at the budget still
stops every other container (symphony's `ends_with` on compose).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import (
    ctrl_c,
    listed_status,
    own_lines,
    process_log,
    shown_log,
    start_launch,
    symphony_cli,
    wait_until,
)
from tests.surreal.test_storage_s3 import BUCKET, checkpoint, metrics, objects, read, store
from tests.symphony.docker_engine import MAKE_BASE, DockerEngine

pytest.importorskip("docker")
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1500)]
__all__ = ["store"]  # the moto S3 fixture of test_storage_s3 (module scope, AWS_* set)

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "surreal-test/compose-s3:latest"
PREFIX = "compose/cartpole/c1"
RUN_URL = f"s3://{BUCKET}/{PREFIX}"
GOAL = 475.0  # the local test's goal (test_ppo_learns); the eval test below reads this checkpoint
# the README line's recipe (4 actors, the classic family defaults): test_ppo_learns' faster
# CARTPOLE recipe (observation normalization, no clip annealing) got stuck near 170 in one of
# three runs here (bench/reports/learning.md says why)
# and its 200k budget: the learning rate and clip range anneal to 0 over run.steps, and with
# 150k two runs here were still climbing at the end (eval 436 and 443 < 475); with 200k all 12
# seeds of bench/reports/learning.md reached 475, by 75k at the latest (the goal ends the run there)
RECIPE = ["--actors", "4", "--steps", "200000", "--set", f"run.stop_at_return={GOAL}"]
# the project's runtime dependencies (base, rl without its extras, s3), as installed here
RUNTIME = ("click", "pyyaml", "numpy", "pyzmq", "pyarrow", "psutil", "boto3")
RUNTIME += ("torch", "gymnasium", "tensorboardX", "rich", "prometheus-client")
COMPOSE = ["--backend", "compose", "--image", IMAGE, "-o", "network=host"]
NAME = "cartpole-c1"  # the run's symphony experiment


def runtime_modules() -> list[str]:
    """Top-level import names of RUNTIME's installed distributions and their requirements."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = list(RUNTIME)
    while todo:
        name = canonicalize_name(todo.pop())
        if name not in seen:
            seen.add(name)
            for line in md.distribution(name).requires or []:
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    todo.append(req.name)
    provided = md.packages_distributions()
    return sorted(
        module
        for module, dists in provided.items()
        if not module.startswith("_") and any(canonicalize_name(d) in seen for d in dists)
    )


@pytest.fixture(scope="module")
def image(request: pytest.FixtureRequest) -> str:
    """`symphony build cpu -c docker/build.yaml` FROM a local image of this Python with the
    runtime dependencies (made once per dependency set and kept in the engine's data-root:
    minutes the first time; the project build itself takes seconds)."""
    engine = DockerEngine.shared(request.config)
    modules = runtime_modules()
    key = hashlib.sha256(f"{sys.version}{modules}".encode() + MAKE_BASE.read_bytes())
    base = engine.ensure_image(
        "python",
        f"symphony-base/surreal-python:{key.hexdigest()[:12]}",
        timeout=scaled(1200),
        PYTHON=sys.executable,
        PY_PACKAGES=" ".join(modules),
    )
    args = ["build", "cpu", "-c", str(ROOT / "docker" / "build.yaml"), "-t", IMAGE]
    args += ["--build-arg", f"BASE_IMAGE={base}", "--build-arg", "INSTALL_DEPS=0"]
    started = time.monotonic()
    built = subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        capture_output=True,
        text=True,
        timeout=scaled(600),
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"built {IMAGE} " in built.stdout
    print(f"\nsymphony build cpu: {time.monotonic() - started:.0f} s")
    return IMAGE


@pytest.fixture(scope="module")
def compose_run(store, image):
    """One PPO CartPole run on compose whose folder is RUN_URL, ended by its eval goal, and
    actor-0's lines as `symphony logs` showed them while it ran."""
    root, client = store
    args = ["ppo", "--env", "gym:CartPole-v1", *RECIPE, "--set", "run.seed=2"]
    args += [*COMPOSE, "--folder", f"s3://{BUCKET}/compose", "--name", "cartpole"]
    args += ["--trial", "c1", "--quiet", "--set", "run.checkpoint_every=5"]
    started = time.monotonic()
    launcher = start_launch(args, root, root / "home")
    try:
        live = wait_until(lambda: shown_log(root / "home", NAME), 300, "actor-0's log", launcher)
        out, _ = launcher.communicate(timeout=scaled(1000))
    finally:
        if launcher.poll() is None:
            ctrl_c(launcher)  # the launcher stops every container
            launcher.communicate(timeout=scaled(120))
    assert launcher.returncode == 0, out[-6000:]
    print(f"\nPPO CartPole on compose: {time.monotonic() - started:.0f} s, start to stop")
    return root, client, subprocess.CompletedProcess(launcher.args, 0, out, ""), live


def test_the_run_learns_in_containers_and_its_files_are_in_the_bucket(compose_run):
    root, client, result, _ = compose_run
    assert f"run folder: {RUN_URL} " in result.stdout and "backend compose" in result.stdout
    stored = objects(client, PREFIX)
    for key in ("config.json", "run.json", "experiment.yaml", "metrics.jsonl", "status.json"):
        assert stored.get(key), (key, sorted(stored))
    assert stored.get("checkpoints/latest.pt", 0) > 1000
    assert any(k.startswith("tb/events.out.tfevents.") and size for k, size in stored.items())
    assert not any(k.startswith("keys/") for k in stored)
    status = json.loads(read(client, f"{PREFIX}/status.json"))
    assert status.get("best_eval_return", -1e9) >= GOAL, status  # it learned; the goal ended it
    evals = [r["value"] for r in metrics(client, PREFIX) if r["name"] == "charts/eval_return"]
    assert max(evals) >= GOAL, evals
    # every process ran in the image: `python -m surreal component ROLE URL`, with Curve keys
    # that the containers wrote themselves from the run's private env file
    spec = read(client, f"{PREFIX}/experiment.yaml").decode()
    assert f"- {RUN_URL}" in spec and sys.executable not in spec and str(root) not in spec
    assert "CARAML_CURVE_KEYS: /tmp/surreal-curve-keys" in spec
    roles = {"learner", "buffer", "param-server", "evaluator", "metrics"}
    roles |= {f"actor-{i}" for i in range(4)}
    assert {f"logs/{role}.log" for role in roles} <= set(stored)  # each container's output
    for role in roles:
        text = read(client, f"{PREFIX}/logs/{role}.log").decode()
        assert len(own_lines(text, role)) >= 3, text
    env_file = next((root / "mirrors" / "launch").rglob("keys/compose.env"))
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert {"SURREAL_CURVE_KEYS", "AWS_ENDPOINT_URL", "AWS_SECRET_ACCESS_KEY"} <= set(env)
    assert env["SURREAL_CURVE_KEYS"] not in spec and "AWS_SECRET_ACCESS_KEY" not in spec


def test_symphony_shows_actor_logs_during_and_after_the_run(compose_run):
    root, client, _, live = compose_run
    assert listed_status(root / "home", NAME) == "finished"
    kept = shown_log(root / "home", NAME)  # the containers are gone: the record's copy
    assert kept[: len(live)] == live and "actor-0: stop: " in kept[-1], kept
    copied = own_lines(read(client, f"{PREFIX}/logs/actor-0.log").decode(), "actor-0")
    assert copied == kept[: len(copied)]  # the run folder's copy holds each line once


def test_status_and_eval_read_the_run_from_the_bucket(compose_run):
    root, _, _, _ = compose_run
    status = surreal_cli(["status", RUN_URL], root, root / "home")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"run {RUN_URL}: ppo on gym:CartPole-v1")
    assert f"checkpoint {RUN_URL}/checkpoints/latest.pt" in status.stdout
    result = surreal_cli(["eval", RUN_URL, "--episodes", "2"], root, root / "home")
    assert result.returncode == 0, result.stderr
    assert "2 episodes at step" in result.stdout
    mean = float(result.stdout.split("return ")[1].split()[0])
    assert mean > 100  # the trained policy from the bucket's checkpoint, not a random one (~20)


def test_resume_on_compose_from_the_bucket_continues_the_run(compose_run):
    """... with its launcher killed once the containers run: nobody watches, yet the learner's
    end at the budget stops every other container (symphony's compose_end wrapper)."""
    root, client, _, _ = compose_run
    before = checkpoint(client, PREFIX)
    target = before["counters"]["global_step"] + 2000
    args = ["--resume", RUN_URL, "--steps", str(target), *COMPOSE, "--quiet"]
    args += ["--set", "run.stop_at_return=none"]
    home = root / "home"
    launcher = start_launch(args, root, home)
    try:
        _ended_by_itself(launcher, home, client, before, target)
    finally:  # its exited containers (and the group's sandbox) stay until then
        deleted = symphony_cli(home, "delete", NAME)
    assert deleted.returncode == 0, deleted.stderr


def _ended_by_itself(launcher, home: Path, client, before: dict, target: int) -> None:
    try:
        # the containers run (`up -d` returned): what a closed terminal would leave
        resumed = lambda: "resumed from" in process_log(home, NAME, "learner")  # noqa: E731
        wait_until(resumed, 300, "the learner to resume", launcher)
    finally:
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=scaled(30))
    wait_until(lambda: listed_status(home, NAME) == "finished", 600, "every container to end")
    described = symphony_cli(home, "describe", NAME).stdout
    for process in ("actor-0", "actor-3", "buffer", "param-server", "evaluator", "metrics"):
        line = next(ln for ln in described.splitlines() if ln.split()[:1] == [process])
        assert "exited" in line and "failed" not in line, described
    assert "says the experiment is over 0" in process_log(home, NAME, "actor-0")
    after = checkpoint(client, PREFIX)
    assert after["counters"]["global_step"] >= target
    assert after["counters"]["iterations"] > before["counters"]["iterations"]
    # nobody copied the containers' output into the bucket's logs/ (the launcher does at its
    # stop): it is in the containers, which `symphony logs` reads
    learner = process_log(home, NAME, "learner")
    assert "resumed from" in learner and "learner: stop: finished" in learner, learner[-3000:]
