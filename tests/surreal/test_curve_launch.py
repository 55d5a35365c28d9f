"""`surreal launch` turns Curve on for multi-node backends: keys per run (mode 600) on every
process, a Kubernetes Secret on kube, never a key in the experiment YAML or manifests."""

from __future__ import annotations

import stat

import pytest
import yaml

from surreal.launch import experiment as launching
from surreal.runtime.plan import compose_env
from surreal.runtime.wire import curve

pytestmark = pytest.mark.timeout(120)


def make_plan(tmp_path, backend, *overrides):
    plan = launching.plan("ppo", folder=str(tmp_path / "runs"), overrides=overrides)
    plan.backend = backend
    return plan


@pytest.mark.parametrize(
    ("backend", "overrides", "on"),
    [
        ("slurm", (), True),
        ("compose", (), True),
        ("local", (), False),
        ("tmux", ("run.curve=true",), True),
        ("slurm", ("run.curve=false",), False),
    ],
)
def test_keys_and_env_follow_the_backend(tmp_path, backend, overrides, on):
    plan = make_plan(tmp_path, backend, *overrides)
    launching.create_run(plan)
    keys = plan.run_dir.path / "keys"
    exp = launching.build_experiment(plan)
    envs = [p.env.get("CARAML_CURVE_KEYS") for p in exp.processes()]
    assert (keys / "server.key_secret").exists() is on  # (a local run's keys/ holds its
    # metrics token without Curve: surreal.runtime.wire.report_token)
    # compose: each process writes the keys into its own container (surreal.runtime.plan.compose_env)
    inside = compose_env.CONTAINER_KEYS if backend == "compose" else None
    assert envs == [(inside or str(keys.resolve())) if on else None] * len(envs)
    if on:
        assert stat.S_IMODE(keys.stat().st_mode) == 0o700
        assert {stat.S_IMODE(f.stat().st_mode) for f in keys.iterdir()} == {0o600}
        secret = (keys / "server.key_secret").read_text().split('secret-key = "')[1][:40]
        assert secret not in (plan.run_dir.path / "experiment.yaml").read_text()


def test_kube_mounts_the_keys_as_a_secret_and_manifests_validate(tmp_path):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    from symphony.kube.backend import KubeBackend
    from symphony.kube.naming import SECRETS_ROOT
    from symphony.kube.secrets import secret_objects

    plan = make_plan(tmp_path, "kube")
    launching.create_run(plan)
    exp = launching.build_experiment(plan)
    for proc in exp.processes():
        assert proc.secrets == [curve.SECRET]
        assert proc.env["CARAML_CURVE_KEYS"] == f"{SECRETS_ROOT}/{curve.SECRET}"
    backend = KubeBackend(image="busybox", **curve.launch_options(plan))
    manifests = backend.manifests(exp)
    options = backend.render_options()
    secrets = secret_objects(None, backend.config, exp, options.namespace or exp.name, options)
    assert [s["metadata"]["name"] for s in secrets] == [curve.SECRET]
    assert set(secrets[0]["data"]) == {
        "client.key",
        "client.key_secret",
        "server.key",
        "server.key_secret",
    }
    secret = (plan.run_dir.path / "keys" / "server.key_secret").read_text()
    secret = secret.split('secret-key = "')[1][:40]
    assert secret not in yaml.safe_dump_all(manifests) + exp.to_yaml()
    for obj in manifests + secrets:
        kubernetes_validate.validate(obj, "1.33", strict=True)
