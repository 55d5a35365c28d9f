"""Compose files the compose backend writes: the compose-spec schema, env, resources, sharing."""

from __future__ import annotations

import inspect
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from symphony.addresses import Address
from symphony.backends import compose_end
from symphony.backends.compose_engine import compose_command
from symphony.backends.compose_render import (
    EXPERIMENT_LABEL,
    OWNER_LABEL,
    ComposeOptions,
    render_compose,
)
from symphony.backends.compose_schema import schema_errors, validate_compose
from symphony.errors import BackendError
from symphony.spec import Experiment, Process, ProcessGroup, Resources, RestartPolicy

pytestmark = pytest.mark.timeout(60)


def _experiment() -> Experiment:
    learner = (
        Process(
            "learner",
            ["python", "-m", "learn", "--lr", "3e-4"],
            resources=Resources(cpu=4, memory_gb=8, gpu=1),
            restart=RestartPolicy("on-failure", max_restarts=2),
        )
        .binds("params")
        .connects("replay")
    )
    fetcher = Process("fetcher", "python fetch.py --port $SYMPH_REPLAY_PORT").connects("replay")
    replay = Process("replay", ["python", "replay.py"], cwd="/app").binds("replay").exposes("stats")
    actor = Process(
        "actor-0", ["python", "act.py"], image="me/actor:2", restart=RestartPolicy("always")
    ).connects("replay", "params")
    exp = Experiment("ppo-run", image="me/surreal:1")
    return exp.add(ProcessGroup("learn", [learner, fetcher]), replay, actor).validate()


@pytest.mark.parametrize("network", ["service", "host"])
def test_generated_files_validate_against_the_compose_spec(network: str) -> None:
    compose = render_compose(_experiment(), "alice", ComposeOptions(network=network))
    assert schema_errors(compose) == []
    validate_compose(compose)


def test_the_schema_check_catches_a_broken_file() -> None:
    compose = render_compose(_experiment(), "alice", ComposeOptions())
    compose["services"]["replay"]["cpus"] = [1]
    compose["services"]["replay"]["no_such_key"] = 1
    errors = schema_errors(compose)
    assert any(e.startswith("services/replay") and "no_such_key" in e for e in errors)
    assert any(e.startswith("services/replay/cpus") for e in errors)
    with pytest.raises(BackendError, match="breaks the compose specification"):
        validate_compose(compose)


def test_service_mode_addresses_are_group_services_with_stable_ports() -> None:
    services = render_compose(_experiment(), "alice", ComposeOptions(base_port=9000))["services"]
    env = services["actor-0"]["environment"]
    # `params` is bound by the learner, whose network namespace is the `learn` sandbox's.
    assert env["SYMPH_PARAMS_HOST"] == "learn" and env["SYMPH_REPLAY_HOST"] == "replay"
    assert {env["SYMPH_PARAMS_PORT"], env["SYMPH_REPLAY_PORT"]} == {"9000", "9001"}
    assert env["SYMPH_REPLAY_ADDR"] == f"replay:{env['SYMPH_REPLAY_PORT']}"
    assert services["replay"]["environment"]["SYMPH_BIND_HOST"] == "*"
    assert services["replay"]["ports"] == ["9002:9002"]  # exposes("stats") is published
    assert "network_mode" not in services["replay"]


def test_host_mode_uses_loopback_and_the_given_ports() -> None:
    exp = _experiment()
    endpoints = {
        s: Address("127.0.0.1", 20000 + i, "127.0.0.1") for i, s in enumerate(exp.services())
    }
    services = render_compose(exp, "alice", ComposeOptions(network="host"), endpoints)["services"]
    assert all(s["network_mode"] == "host" for s in services.values())
    assert not any("ports" in s for s in services.values())
    env = services["fetcher"]["environment"]
    assert env["SYMPH_REPLAY_ADDR"] == f"127.0.0.1:{endpoints['replay'].port}"
    assert env["SYMPH_BIND_HOST"] == "127.0.0.1"


def test_a_group_shares_network_and_ipc_through_its_sandbox() -> None:
    services = render_compose(_experiment(), "alice", ComposeOptions(shm_size="2g"))["services"]
    sandbox = services["learn"]
    assert sandbox["ipc"] == "shareable" and sandbox["shm_size"] == "2g"
    assert sandbox["labels"]["io.symphony.role"] == "sandbox"
    for member in ("learner", "fetcher"):
        assert services[member]["ipc"] == "service:learn"
        assert services[member]["network_mode"] == "service:learn"
        assert services[member]["depends_on"] == ["learn"]
    assert services["replay"]["ipc"] == "shareable" and services["replay"]["shm_size"] == "2g"


def test_process_settings_map_to_compose_keys() -> None:
    services = render_compose(_experiment(), "alice", ComposeOptions())["services"]
    learner, fetcher, replay, actor = (
        services[n] for n in ("learner", "fetcher", "replay", "actor-0")
    )
    assert learner["cpus"] == 4.0 and learner["mem_limit"] == "8192m"
    assert learner["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}
    ]
    assert learner["restart"] == "on-failure:2" and actor["restart"] == "always"
    assert replay["restart"] == "no" and replay["working_dir"] == "/app"
    assert learner["entrypoint"] == ["python", "-m", "learn", "--lr", "3e-4"]
    # `$` reaches the container's shell untouched (compose would interpolate a single `$`).
    assert fetcher["entrypoint"] == ["/bin/sh", "-c", "python fetch.py --port $$SYMPH_REPLAY_PORT"]
    assert actor["image"] == "me/actor:2" and replay["image"] == "me/surreal:1"
    assert (
        learner["labels"][EXPERIMENT_LABEL] == "ppo-run"
        and learner["labels"][OWNER_LABEL] == "alice"
    )
    assert learner["environment"]["SYMPH_GROUP"] == "learn"


def test_a_process_without_an_image_is_an_error_with_the_fix() -> None:
    exp = Experiment("no-image").add(Process("p", ["true"])).validate()
    with pytest.raises(BackendError, match="symphony build"):
        render_compose(exp, "alice", ComposeOptions())
    assert (
        render_compose(exp, "alice", ComposeOptions(image="x:1"))["services"]["p"]["image"] == "x:1"
    )


@pytest.mark.parametrize("network", ["service", "host"])
@pytest.mark.docker  # docker-compose's own parser (no engine; the docker group's worker)
def test_docker_compose_itself_accepts_the_file(tmp_path: Path, network: str) -> None:
    assert shutil.which("docker-compose"), "install docker-compose: scripts/install-system-deps.sh"
    compose = render_compose(_experiment(), "alice", ComposeOptions(network=network))
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(compose))
    done = subprocess.run(
        ["docker-compose", "-f", str(path), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_compose_command_prefers_the_plugin_then_docker_compose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SYMPHONY_COMPOSE_COMMAND", raising=False)
    fake = tmp_path / "docker"
    fake.write_text('#!/bin/sh\n[ "$1 $2" = "compose version" ] && exit "$PLUGIN_EXIT"\nexit 1\n')
    fake.chmod(0o755)
    (tmp_path / "docker-compose").symlink_to("/bin/true")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PLUGIN_EXIT", "0")
    assert compose_command() == ["docker", "compose"]
    monkeypatch.setenv("PLUGIN_EXIT", "1")
    assert compose_command() == ["docker-compose"]
    (tmp_path / "docker-compose").unlink()
    with pytest.raises(BackendError, match="apt-get install docker-compose"):
        compose_command()
    monkeypatch.setenv("SYMPHONY_COMPOSE_COMMAND", "podman-compose --verbose")
    assert compose_command() == ["podman-compose", "--verbose"]


def test_env_files_are_named_on_every_process_and_never_inlined(tmp_path: Path) -> None:
    """The backend's `env_file` option: every process container (not the sandboxes) reads the
    files at `up`; the compose file holds their paths, not their contents."""
    from symphony.backends.compose import ComposeBackend

    secret = tmp_path / "run.env"
    secret.write_text("TOKEN=s3cr3t\n")
    backend = ComposeBackend(env_file=str(secret), network="host")
    compose = backend.render(_experiment(), "alice")
    processes = {"learner", "fetcher", "replay", "actor-0"}
    assert {n for n, s in compose["services"].items() if "env_file" in s} == processes
    assert all(compose["services"][n]["env_file"] == [str(secret)] for n in processes)
    assert "s3cr3t" not in yaml.safe_dump(compose)
    two = ComposeBackend(env_file=[secret, tmp_path / "b.env"]).compose_options.env_files
    assert two == (str(secret), str(tmp_path / "b.env"))


@pytest.mark.parametrize("network", ["service", "host"])
def test_with_ends_with_every_python_process_runs_through_the_end_watch(network: str) -> None:
    exp = _experiment()
    exp.ends_with = ["learner"]
    exp.process("learner").restart.final_codes = (73, 75)
    compose = render_compose(exp, "alice", ComposeOptions(network=network, stop_grace_s=10))
    validate_compose(compose)
    services = compose["services"]
    source = inspect.getsource(compose_end).replace("$", "$$")
    learner, replay, actor = (services[n]["entrypoint"] for n in ("learner", "replay", "actor-0"))
    assert learner[:3] == ["python", "-c", source]
    assert learner[-6:] == ["--", "python", "-m", "learn", "--lr", "3e-4"]
    role = dict(zip(learner[3:-6:2], learner[4:-6:2], strict=True))
    assert role["--members"] == "actor-0,replay" and role["--final"] == "73,75"
    port = int(role["--announce"])
    host = "127.0.0.1" if network == "host" else "learn"  # the learner's group
    assert port not in {int(v) for v in services["replay"]["environment"].values() if v.isdigit()}
    for member in (replay, actor):
        assert member[member.index("--watch") + 1] == f"{host}:{port}"
        assert member[member.index("--grace-s") + 1] == "8"
    assert replay[-3:] == ["--", "python", "replay.py"]
    # `always` would start the actor again after its end: the wrapper restarts it after 0
    assert services["actor-0"]["restart"] == "on-failure" and "--always" in actor
    assert "--always" not in replay and services["replay"]["restart"] == "no"
    # a shell command cannot run the wrapper: it is left as it was, and is not waited for
    assert services["fetcher"]["entrypoint"][0] == "/bin/sh"
    plain = render_compose(_experiment(), "alice", ComposeOptions(network=network))["services"]
    assert plain["learner"]["entrypoint"] == ["python", "-m", "learn", "--lr", "3e-4"]
