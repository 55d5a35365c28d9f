"""Curve keys and object-store settings reach compose containers through the run's private env
file (`surreal.runtime.plan.compose_env`): mode 600, named (never inlined) by the compose file, turned back
into a key folder that caraml reads inside each container."""

from __future__ import annotations

import stat

import pytest

from caraml.curve_env import load_keys
from surreal.launch import cluster_launch
from surreal.launch import experiment as launching
from surreal.runtime.plan import compose_env

pytestmark = pytest.mark.timeout(120)


def compose_plan(tmp_path, *overrides):
    plan = launching.plan("ppo", folder=str(tmp_path / "runs"), overrides=overrides)
    plan.backend = "compose"
    return plan


def env_of(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_the_env_file_carries_the_keys_a_container_writes_back(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/root/.aws/config")  # a path here: not passed
    plan = compose_plan(tmp_path)
    launching.create_run(plan)
    path = compose_env.env_file(plan)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert set(env_of(path)) == {compose_env.KEYS_ENV}  # AWS settings only for an s3:// run
    plan.run_dir.url = "s3://bucket/runs/ppo-cartpole-v1/t1"  # as an object-store run has it
    compose_env.prepare(plan)
    env = env_of(path)
    assert env["AWS_SECRET_ACCESS_KEY"] == "s3-secret"
    assert set(env) == {compose_env.KEYS_ENV, "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"}
    inside = tmp_path / "container" / "keys"
    assert compose_env.materialize_keys({**env, "CARAML_CURVE_KEYS": str(inside)})
    assert stat.S_IMODE(inside.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in inside.iterdir()} == {0o600}
    assert load_keys(inside) == load_keys(path.parent)  # the run's own pair
    # a restarted container finds them there; the spec and the compose file only name the file
    assert compose_env.materialize_keys({**env, "CARAML_CURVE_KEYS": str(inside)})
    opts = cluster_launch.options(plan, "compose", ("env_file=/etc/team.env",))
    assert opts["env_file"] == ["/etc/team.env", str(path)]
    text = cluster_launch.dry_run(plan, "compose", {**opts, "image": "me/surreal:1"})
    assert str(path) in text and env[compose_env.KEYS_ENV] not in text
    assert "s3-secret" not in text
    assert env[compose_env.KEYS_ENV] not in (plan.run_dir.path / "experiment.yaml").read_text()


def test_compose_refuses_a_run_folder_on_this_machines_disk(tmp_path):
    from symphony.errors import BackendError

    plan = compose_plan(tmp_path)
    with pytest.raises(BackendError, match=r"share no folder.*--folder s3://BUCKET/PREFIX"):
        cluster_launch.options(plan, "compose", ())
    assert not (tmp_path / "runs").exists()


def test_without_curve_the_file_holds_no_keys_and_other_backends_get_none(tmp_path):
    plan = compose_plan(tmp_path, "run.curve=false")
    launching.create_run(plan)
    assert compose_env.env_file(plan).read_text() == ""
    assert not compose_env.materialize_keys({"CARAML_CURVE_KEYS": str(tmp_path / "k")})
    plan.backend = "local"
    assert compose_env.options(plan) == {}


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SURREAL_CURVE_KEYS": "e30="}, "CARAML_CURVE_KEYS is not"),
        ({"SURREAL_CURVE_KEYS": "e30=", "CARAML_CURVE_KEYS": "/k"}, "not a surreal key bundle"),
        ({"SURREAL_CURVE_KEYS": "%%%", "CARAML_CURVE_KEYS": "/k"}, "not a surreal key bundle"),
    ],
)
def test_a_broken_key_variable_is_an_error_that_says_which(environ, message):
    with pytest.raises(ValueError, match=message):
        compose_env.materialize_keys(environ)
