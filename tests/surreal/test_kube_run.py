"""A surreal run on the kube backend, without a cluster: its manifests validate strictly for
Kubernetes 1.29-1.33 (kubernetes-validate), every container runs the image with memory requests
and no path of this machine, a 2,000-actor run stays under the annotation limit, and the run's
lifecycle (launch, list, describe, logs, delete) works against the kmock API emulator."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

kubernetes_validate = pytest.importorskip("kubernetes_validate")
pytest.importorskip("kmock")

from surreal.cli import main as surreal_main  # noqa: E402
from surreal.launch import cluster_launch  # noqa: E402
from surreal.launch import experiment as launching  # noqa: E402
from surreal.runtime.plan import portable  # noqa: E402
from surreal.runtime.runfolder.rundir import RunDir  # noqa: E402
from symphony import spec_store  # noqa: E402
from symphony.cli import main as symphony_main  # noqa: E402
from symphony.kube.backend import KubeBackend  # noqa: E402
from symphony.kube.naming import ANNOTATION_SPEC  # noqa: E402
from symphony.kube.testing_kube import KubeEndpoint  # noqa: E402
from symphony.kube.testing_kube_controllers import Controllers  # noqa: E402
from tests.surreal.helpers import own_lines  # noqa: E402
from tests.symphony.kube_env import config_maps, container_env  # noqa: E402

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]
IMAGE = "registry.example.com/surreal/cpu:1"
CLUSTER = ROOT / "examples" / "03_kube" / "cloudwise.yaml"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "symphony-home"))
    monkeypatch.setenv("SYMPHONY_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.setenv("SYMPHONY_OWNER", "alice")
    monkeypatch.delenv("SYMPHONY_KUBE_HOST", raising=False)
    monkeypatch.delenv("SYMPHONY_KUBE_IMAGE", raising=False)


@pytest.fixture(scope="module", autouse=True)
def _schemas_read_once():
    """kubernetes-validate reads its schema files from disk on every call (~1 MB of JSON); the
    same validation with each file read once keeps 1,300 validations fast."""
    utils = kubernetes_validate.utils
    original = utils.schema_contents
    utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    yield
    utils.schema_contents = original


def validate_strictly(objects: list[dict], versions: list[str] = VERSIONS) -> None:
    for version in versions:
        for obj in objects:
            try:
                assert kubernetes_validate.validate(obj, version, strict=True) == version
            except kubernetes_validate.ValidationError as err:
                where = ".".join(str(p) for p in err.path)
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} fails {version} at {where}")


def shapes(objects: list[dict]) -> list[dict]:
    """One object per shape: objects equal but for the digits in them (actor-7's Job and
    actor-15's) are one shape."""
    distinct = {re.sub(r"[0-9]+", "0", json.dumps(o, sort_keys=True)): o for o in objects}
    return list(distinct.values())


def host_paths(tmp_path: Path) -> list[str]:
    """Paths of this machine that must not reach a container: the interpreter, its prefix,
    HOME, the run folder, the working directory and this checkout."""
    paths = {sys.executable, sys.prefix, str(Path.home()), str(tmp_path), os.getcwd(), str(ROOT)}
    return sorted(p for p in paths if p not in ("", "/"))


def containers(objects: list[dict]) -> list[dict]:
    return [c for o in objects if "template" in o.get("spec", {}) for c in pod(o)["containers"]]


def pod(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def check_containers(objects: list[dict], tmp_path: Path) -> None:
    """The image, memory requests, the portable command, no host path anywhere a process sees
    (`objects` holds the ConfigMaps the containers read their shared env from)."""
    forbidden = host_paths(tmp_path)
    maps = config_maps(objects)
    for c in containers(objects):
        assert c["image"] == IMAGE
        assert c["resources"]["requests"]["memory"].endswith("Mi")
        assert c["resources"]["limits"]["memory"] == c["resources"]["requests"]["memory"]
        assert c["command"][:4] == ["python", "-m", "surreal", "component"]
        assert c["command"][5].startswith(portable.RUNS_ROOT + "/")
        assert {"name": "run-storage", "mountPath": portable.RUNS_ROOT} in c["volumeMounts"]
        env = container_env(c, maps)
        bundle = portable.decode_bundle(env[portable.BUNDLE_ENV])
        seen = " ".join(c["command"] + c.get("args", []) + list(env.values()))
        seen += " ".join(bundle.values())
        for path in forbidden:
            assert path not in seen, f"{c['name']} carries {path}"


def test_launch_help_names_the_image_and_backend_options():
    result = CliRunner().invoke(surreal_main, ["launch", "--help"])
    assert result.exit_code == 0
    assert "--image" in result.output and "symphony build" in result.output
    assert "-o, --option KEY=VALUE" in result.output and "kube manifests" in result.output


def test_dry_run_writes_manifests_of_a_4_actor_run(tmp_path):
    out, runs = tmp_path / "manifests", tmp_path / "runs"
    result = CliRunner().invoke(
        surreal_main,
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "4", "--backend", "kube"]
        + ["--image", IMAGE, "--folder", str(runs), "--dry-run", "-o", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    objects = [yaml.safe_load(p.read_text()) for p in sorted(out.iterdir())]
    printed = result.output.split("\n}\n", 1)[1]  # after the config's JSON: the manifests
    assert list(yaml.safe_load_all(printed)) == objects
    assert not runs.exists() and not (tmp_path / "symphony-home").exists()  # nothing else written
    names = [c["name"] for c in containers(objects)]
    assert sorted(names) == sorted(
        ["metrics", "buffer", "learner", "param-server", "evaluator"]
        + [f"actor-{i}" for i in range(4)]
    )
    check_containers(objects, tmp_path)
    stored = spec_store.decode(objects[0]["metadata"]["annotations"][ANNOTATION_SPEC])
    assert stored.metadata["run_dir"] == "/runs/ppo-cartpole-v1/t1"
    assert not [p for p in host_paths(tmp_path) if p in json.dumps(stored.to_dict())]
    learner = next(c for c in containers(objects) if c["name"] == "learner")
    assert learner["resources"]["requests"]["memory"] == "4096Mi"
    assert "nvidia.com/gpu" not in learner["resources"].get("limits", {})
    validate_strictly(objects)


def test_a_cuda_learner_asks_for_a_gpu_and_a_group_too_big_for_the_nodes_is_refused(tmp_path):
    def dry_run(*extra: str):
        return CliRunner().invoke(
            surreal_main,
            [
                "launch",
                "ppo",
                "--env",
                "gym:CartPole-v1",
                "--actors",
                "12",
                "--backend",
                "kube",
                "--image",
                IMAGE,
            ]
            + ["--folder", str(tmp_path / "runs"), "--dry-run"]
            + ["-o", f"cluster_spec={CLUSTER}", "-o", f"output={tmp_path / 'm'}", *extra],
        )

    # 12 actors in groups of 8: actors-0 asks for 8 cpu and 8 GiB; an 8-core node leaves 7.8
    refused = dry_run()
    assert refused.exit_code == 2
    error = refused.output.strip().splitlines()[-1]
    assert error.startswith("Error: group 'actors-0' (8 processes, one pod) asks for 8 cpu, 8 GiB")
    assert "the largest node of any pool of cluster 'surreal' (gpu-v100: " in error
    assert "leaves 7.8 cpu, 46.6 GiB, 1 GPU for pods" in error
    assert error.endswith("(actors: --set actor.group_size=N)")
    assert not (tmp_path / "m").exists()

    # the learner's GPU is the cluster's: this machine needs none
    fits = dry_run("--set", "actor.group_size=6", "--set", "run.device=cuda")
    assert fits.exit_code == 0, fits.output
    objects = [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "m").iterdir())]
    learner = next(o for o in objects if o["metadata"]["name"] == "learner")
    assert pod(learner)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    validate_strictly(objects)


@pytest.mark.integration
def test_a_claim_without_its_namespace_is_refused_before_the_run_folder_is_written(tmp_path):
    runs = tmp_path / "runs"
    launched = CliRunner().invoke(
        surreal_main,
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--backend", "kube", "--image", IMAGE]
        + ["--folder", str(runs), "-o", "volume=surreal-runs", "-o", "host=http://127.0.0.1:9"],
    )
    assert launched.exit_code == 2, launched.output
    error = launched.output.strip().splitlines()[-1]
    assert "volume=surreal-runs: only pods of the claim's own namespace can mount it" in error
    assert "-o team_namespace=NAMESPACE -o volume=surreal-runs" in error
    assert not runs.exists()

    # as docs/kubernetes.md says: in a namespace that holds the claim, every pod mounts it
    with KubeEndpoint() as endpoint:
        endpoint.add_namespace("rl")  # the admin's
        there = CliRunner().invoke(
            surreal_main,
            ["launch", "ppo", "--env", "gym:CartPole-v1", "--backend", "kube", "--image", IMAGE]
            + ["--folder", str(runs), "-o", "volume=surreal-runs", "-o", "team_namespace=rl"]
            + ["-o", f"host={endpoint.url}"],
        )
        assert there.exit_code == 0, there.output
        # the run's Curve keys become its own Secret there (experiments share the namespace)
        (secret,) = endpoint.stored("Secret")
        name = secret["metadata"]["name"]
        assert name == "ppo-cartpole-v1-t1-surreal-curve", name
        jobs = endpoint.stored("Job")
        assert all(
            any(v.get("secret", {}).get("secretName") == name for v in pod(job)["volumes"])
            for job in jobs
        )
        assert jobs and all(
            {"name": "run-storage", "persistentVolumeClaim": {"claimName": "surreal-runs"}}
            in pod(job)["volumes"]
            for job in jobs
        )


def test_a_2000_actor_run_renders_valid_objects_under_the_annotation_limit(tmp_path):
    plan = launching.plan("ppo", actors=2000, folder=str(tmp_path / "runs"))
    plan.backend, plan.config.run.image = "kube", IMAGE
    options = cluster_launch.options(plan, "kube", ())
    objects = KubeBackend(**options).manifests(launching.build_experiment(plan))

    namespace = objects[0]
    annotation = namespace["metadata"]["annotations"][ANNOTATION_SPEC]
    assert len(annotation.encode()) < spec_store.ANNOTATIONS_LIMIT // 4  # 256 KiB, with room
    stored = spec_store.decode(annotation)
    assert len(stored.processes()) == 2005 and stored.process("actor-1999").image is None
    assert len([o for o in objects if o["kind"] == "Job"]) == 5 + 250  # groups of 8 actors
    check_containers(objects, tmp_path)
    validate_strictly(objects, VERSIONS[-1:])  # every object against 1.33
    distinct = shapes(objects)
    assert len(distinct) < 20  # the 250 actor Jobs are one shape
    validate_strictly(distinct)  # and each shape against 1.29 to 1.33


def test_the_bundle_starts_a_component_without_the_launching_machine(tmp_path, monkeypatch):
    """A file learner: its code and config reach the container's run folder from the env."""
    learner = ROOT / "examples" / "02_custom_learner" / "a2c.py"
    plan = launching.plan(f"{learner}:A2C", actors=2, folder=str(tmp_path / "runs"))
    plan.backend, plan.config.run.image = "kube", IMAGE
    experiment = launching.build_experiment(plan)
    actor = experiment.process("actor-1")
    assert actor.argv()[5] == portable.container_run_dir(plan)
    assert experiment.metadata["algo"] == f"{portable.container_run_dir(plan)}/code/a2c.py:A2C"

    inside = tmp_path / "container" / "runs" / "a2c-cartpole-v1" / "t1"
    monkeypatch.chdir(tmp_path)  # the original file is not needed: the copy travels
    assert portable.materialize(str(inside), actor.env)
    run = RunDir(inside)
    assert run.algo_class().__name__ == "A2C"
    assert run.algo_class().__module__ != "a2c" or str(inside) in run.algo_ref()
    assert run.load_config().run.actors == 2
    assert json.loads((inside / "run.json").read_text())["experiment"] == plan.experiment_name
    again = (inside / "config.json").stat().st_mtime_ns
    assert portable.materialize(str(inside), actor.env)  # a second process: nothing rewritten
    assert (inside / "config.json").stat().st_mtime_ns == again

    with pytest.raises(ValueError, match="not a surreal run bundle"):
        portable.materialize(str(inside), {portable.BUNDLE_ENV: "not base64!"})


STAMP = "2025-01-31 12:00:00"
ACTOR_LOG = "".join(
    f"{STAMP} INFO actor-0: {line}\n"
    for line in (
        "start: role actor, index 0, pid 7 on actors-0; run /runs/cart/t1; services ...",
        "connects experience tcp://buffer:7001 (segments of 16 steps x 4 envs), params ...",
        "first parameters: version 1; acting",
    )
)
"""What a surreal actor writes first (`surreal.monitoring.logs`), as its container's output."""


def invoke(main, *args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.integration
def test_launch_list_describe_logs_delete_against_the_api_emulator(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    with KubeEndpoint() as endpoint:
        monkeypatch.setenv("SYMPHONY_KUBE_HOST", endpoint.url)
        launched = invoke(
            surreal_main,
            *("launch", "ppo", "--actors", "4", "--backend", "kube", "--image", IMAGE),
            *("--env", "gym:CartPole-v1"),
            *("--folder", str(runs), "--name", "cart"),
        )
        assert launched.exit_code == 0, launched.output
        assert "cart-t1 is running on kube" in launched.output
        # no launcher watches a detached run: the cluster ends it, and the user is told how
        assert "It ends by itself: at its step budget the learner exits 0, and 300 s" in (
            launched.output
        )
        assert "cleanup_after_s; -1 keeps them until `symphony delete cart-t1`" in launched.output
        learner_job = next(j for j in endpoint.stored("Job") if j["metadata"]["name"] == "learner")
        assert learner_job["spec"]["ttlSecondsAfterFinished"] == 300
        assert (runs / "cart" / "t1" / "config.json").is_file()  # the run's record here
        assert "cart-t1" in endpoint.namespaces
        secrets = endpoint.stored("Secret")
        assert [s["metadata"]["name"] for s in secrets] == ["surreal-curve"]
        jobs = endpoint.stored("Job")
        assert {j["metadata"]["name"] for j in jobs} == {
            "metrics",
            "buffer",
            "learner",
            "param-server",
            "evaluator",
            "actors-0",
        }
        check_containers(jobs + endpoint.stored("ConfigMap"), tmp_path)

        # a teammate without this machine's record reads the spec stored on the namespace
        monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "teammate"))
        theirs = invoke(symphony_main, "list", "-b", "kube")
        assert theirs.exit_code == 0 and "cart-t1" in theirs.output, theirs.output
        assert "0/9" in theirs.output  # 9 processes known from the stored spec, no pod yet
        monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "symphony-home"))

        controllers = Controllers(endpoint)
        controllers.reconcile()  # the Job controller makes the pods

        def pod_of(group: str) -> str:
            pods = endpoint.stored("Pod")
            return next(
                p["metadata"]["name"]
                for p in pods
                if p["metadata"]["labels"]["symphony.io/group"] == group
            )

        learner_pod, actors_pod = pod_of("learner"), pod_of("actors-0")
        endpoint.write_log("cart-t1", learner_pod, "learner", "learner: step 2048\n")

        listed = invoke(symphony_main, "list", "-b", "kube")
        assert listed.exit_code == 0 and "cart-t1" in listed.output and "alice" in listed.output
        assert "9/9" in listed.output  # the pods run

        described = invoke(symphony_main, "describe", "cart-t1")
        assert described.exit_code == 0 and "actor-3" in described.output
        logs = invoke(symphony_main, "logs", "cart-t1", "learner")
        assert logs.exit_code == 0 and logs.output == "learner: step 2048\n"

        # actor-0's log while it runs (a container of the actors-0 pod), and after the run
        endpoint.write_log("cart-t1", actors_pod, "actor-0", ACTOR_LOG)
        live = invoke(symphony_main, "logs", "cart-t1", "actor-0")
        assert live.exit_code == 0 and own_lines(live.output, "actor-0") == ACTOR_LOG.splitlines()
        stop = f"{STAMP} INFO actor-0: stop: finished\n"
        endpoint.write_log("cart-t1", actors_pod, "actor-0", stop)
        endpoint.end_log("cart-t1", actors_pod, "actor-0")
        # the learner used its budget: the cluster deletes the rest after cleanup_after_s
        controllers.exit("cart-t1", "learner", 0)
        told = invoke(symphony_main, "describe", "cart-t1").output
        assert "ended: learner exited 0, which ends this experiment" in told, told
        assert "the cluster deletes the other 8 processes' pods 300 s after its Job" in told
        for follow in ((), ("-f",)):  # following an ended process returns
            after = invoke(symphony_main, "logs", "cart-t1", "actor-0", *follow)
            assert after.exit_code == 0 and after.output == ACTOR_LOG + stop, after.output
        gone = controllers.clean_up()  # 300 s later
        assert "Job/actors-0" in gone and endpoint.stored("Pod") == []
        ended = invoke(symphony_main, "list", "--all", "-b", "kube")
        row = next(r for r in ended.output.splitlines() if r.startswith("cart-t1 "))
        assert row.split()[3] == "finished", ended.output
        deleted = invoke(symphony_main, "delete", "cart-t1")
        assert deleted.exit_code == 0, deleted.output
        assert "cart-t1" not in endpoint.namespaces


@pytest.mark.integration
def test_a_kube_run_with_a_goal_wires_the_evaluator_to_the_learner(tmp_path, monkeypatch):
    """Kube launches detached: `run.stop_at_return` ends the run through its learner, which
    the evaluator reaches at the `learner-goal` Service (`surreal.runtime.wire.goal`)."""
    with KubeEndpoint() as endpoint:
        monkeypatch.setenv("SYMPHONY_KUBE_HOST", endpoint.url)
        launched = invoke(
            surreal_main,
            *("launch", "ppo", "--actors", "2", "--backend", "kube", "--image", IMAGE),
            *("--env", "gym:CartPole-v1", "--set", "run.stop_at_return=475"),
            *("--folder", str(tmp_path / "runs"), "--name", "goal"),
        )
        assert launched.exit_code == 0, launched.output
        assert "at run.stop_at_return 475.0 the evaluator tells the learner, which ends it" in (
            launched.output
        )
        assert "stands still for run.stall_timeout_s (300 s) + 60 s ends it as failed" in (
            launched.output
        )
        services = {s["metadata"]["name"]: s for s in endpoint.stored("Service")}
        assert services["learner-goal"]["spec"]["selector"]["symphony.io/group"] == "learner"
        maps = config_maps(endpoint.stored("ConfigMap"))
        jobs = {j["metadata"]["name"]: j for j in endpoint.stored("Job")}
        env = {}
        for name in ("learner", "evaluator"):
            (container,) = jobs[name]["spec"]["template"]["spec"]["containers"]
            env[name] = container_env(container, maps)
        port = str(services["learner-goal"]["spec"]["ports"][0]["port"])
        assert "learner-goal" in env["learner"]["SYMPH_SERVICES"].split(",")
        assert env["evaluator"]["SYMPH_LEARNER_GOAL_HOST"] == "learner-goal.goal-t1.svc"
        assert env["evaluator"]["SYMPH_LEARNER_GOAL_PORT"] == port
        assert "learner-goal" in env["evaluator"]["SYMPH_SERVICES"].split(",")
        check_containers(list(jobs.values()) + endpoint.stored("ConfigMap"), tmp_path)
