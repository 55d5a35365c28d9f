"""Run storage in an object store: `surreal launch --folder s3://...` against moto's S3 server on
127.0.0.1. One real PPO CartPole run on the local backend learns with its run folder in the
bucket; `surreal status`, `surreal eval` and `surreal launch --resume` then work from the URL,
and boto3 sees the run's objects. A store that does not answer is a usage error before anything
is written."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import QUICK
from tests.surreal.test_ppo_learns import CARTPOLE

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")

pytestmark = pytest.mark.timeout(600)

BUCKET = "surreal-runs"
GOAL = 200.0  # mean greedy return of 10 episodes; a random CartPole policy gets ~20
RUN_URL = f"s3://{BUCKET}/team/cartpole/s3"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """moto's S3 on 127.0.0.1 with one bucket; the AWS variables point every process at it."""
    from cloudwise.testing import moto_server

    root = tmp_path_factory.mktemp("s3")
    with moto_server() as endpoint, pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
            env.delenv(name, raising=False)
        env.setenv("AWS_ENDPOINT_URL", endpoint)
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_CONFIG_FILE", str(root / "no-aws-config"))
        env.setenv("SURREAL_MIRROR_DIR", str(root / "mirrors"))
        env.setenv("SURREAL_SYNC_S", "1")
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield root, client


def objects(client, prefix: str) -> dict[str, int]:
    """key (relative to `prefix`) -> size of every object under s3://BUCKET/prefix/."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
    return {
        o["Key"][len(prefix) + 1 :]: o["Size"] for page in pages for o in page.get("Contents", [])
    }


def read(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def checkpoint(client, prefix: str) -> dict:
    import torch

    data = read(client, f"{prefix}/checkpoints/latest.pt")
    return torch.load(io.BytesIO(data), weights_only=False)


def metrics(client, prefix: str) -> list[dict]:
    lines = read(client, f"{prefix}/metrics.jsonl").decode().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def s3_run(store):
    """One PPO CartPole run whose folder is s3://BUCKET/team/cartpole/s3, stopped by its
    eval goal (GOAL) with a budget it does not need."""
    root, client = store
    args = ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "150000"]
    args += ["--folder", f"s3://{BUCKET}/team", "--name", "cartpole", "--trial", "s3"]
    args += [*CARTPOLE, "--set", f"run.stop_at_return={GOAL}", "--set", "run.checkpoint_every=5"]
    result = surreal_cli(args, root, root / "home", timeout=scaled(400))
    assert result.returncode == 0, result.stdout + result.stderr
    return root, client, result


@pytest.mark.slow
@pytest.mark.long  # test_compose_s3 checks the same store code from containers (CONTRIBUTING.md)
def test_the_run_learns_and_its_files_are_in_the_bucket(s3_run):
    root, client, result = s3_run
    assert f"run folder: {RUN_URL} " in result.stdout
    assert f"surreal eval {RUN_URL};" in result.stdout
    stored = objects(client, "team/cartpole/s3")
    for key in ("config.json", "run.json", "experiment.yaml", "metrics.jsonl", "status.json"):
        assert stored.get(key), (key, sorted(stored))
    assert stored.get("checkpoints/latest.pt", 0) > 1000
    assert any(k.startswith("tb/events.out.tfevents.") and size for k, size in stored.items())
    assert "logs/learner.log" in stored
    assert not any(k.startswith("keys/") for k in stored)
    config = json.loads(read(client, "team/cartpole/s3/config.json"))
    assert config["run"]["actors"] == 2 and config["env"]["id"] == "gym:CartPole-v1"
    status = json.loads(read(client, "team/cartpole/s3/status.json"))
    assert status["best_eval_return"] >= GOAL, status  # it learned; the goal ended it
    evals = [
        r["value"] for r in metrics(client, "team/cartpole/s3") if r["name"] == "charts/eval_return"
    ]
    assert max(evals) >= GOAL, evals
    assert checkpoint(client, "team/cartpole/s3")["counters"]["global_step"] > 0
    # the run folder is the bucket: nothing was written under the working directory
    assert not (root / "runs").exists() and not (root / "team").exists()


@pytest.mark.slow
@pytest.mark.long  # test_compose_s3 checks the same store code from containers (CONTRIBUTING.md)
def test_status_and_eval_read_the_run_from_the_bucket(s3_run):
    root, _, _ = s3_run
    status = surreal_cli(["status", RUN_URL], root, root / "home")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"run {RUN_URL}: ppo on gym:CartPole-v1")
    assert f"checkpoint {RUN_URL}/checkpoints/latest.pt" in status.stdout
    assert "not running" in status.stdout
    result = surreal_cli(["eval", RUN_URL, "--episodes", "5"], root, root / "home")
    assert result.returncode == 0, result.stderr
    assert "5 episodes at step" in result.stdout
    mean = float(result.stdout.split("return ")[1].split()[0])
    assert mean > 100  # the trained policy from the bucket's checkpoint, not a random one (~20)


@pytest.mark.slow
@pytest.mark.long  # test_compose_s3 checks the same store code from containers (CONTRIBUTING.md)
def test_resume_from_the_bucket_continues_the_run(s3_run):
    root, client, _ = s3_run
    prefix = "team/cartpole/s3"
    before = checkpoint(client, prefix)
    target = before["counters"]["global_step"] + 3000
    args = ["launch", "--resume", RUN_URL, "--steps", str(target)]
    args += ["--set", "run.stop_at_return=none"]
    result = surreal_cli(args, root, root / "home", timeout=scaled(300))
    assert result.returncode == 0, result.stdout + result.stderr
    after = checkpoint(client, prefix)
    assert after["counters"]["global_step"] >= target
    assert after["counters"]["iterations"] > before["counters"]["iterations"]
    assert b"resumed from" in read(client, f"{prefix}/logs/learner.log")
    steps = [r["step"] for r in metrics(client, prefix) if r["name"] == "losses/policy_loss"]
    assert steps == sorted(steps) and steps[-1] > before["counters"]["global_step"]
    tb = [k for k in objects(client, prefix) if k.startswith("tb/")]
    assert len(tb) == 2  # the resumed sink's own events file beside the first one


@pytest.mark.integration
def test_a_missing_bucket_is_a_usage_error_and_nothing_is_written(store):
    root, client = store
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--steps",
            "1000",
            "--folder",
            "s3://no-such-bucket/runs",
            *QUICK,
        ],
        root,
        root / "home",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "bucket 'no-such-bucket' does not exist" in lines[0], lines
    assert [b["Name"] for b in client.list_buckets()["Buckets"]] == [BUCKET]
    assert not (root / "runs").exists()
    assert not list((root / "mirrors").rglob("no-such-bucket*"))


@pytest.mark.integration
def test_an_unreachable_store_is_a_usage_error_before_anything_starts(tmp_path, monkeypatch):
    from cloudwise.testing import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("SURREAL_MIRROR_DIR", str(tmp_path / "mirrors"))
    for args in (
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--folder", "s3://bucket/runs"],
        ["launch", "--resume", "s3://bucket/runs/ppo-cartpole-v1/t1"],
        ["status", "s3://bucket/runs/ppo-cartpole-v1/t1"],  # `eval` reads the same way
    ):
        result = surreal_cli(args, tmp_path, tmp_path / "home")
        assert result.returncode == 2, (args, result.stdout + result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot reach the object store" in lines[0], (args, lines)
    assert not (tmp_path / "mirrors").exists() and not (tmp_path / "runs").exists()


def test_each_process_uploads_what_it_wrote_and_never_the_keys(store, tmp_path):
    """Two processes share one machine's mirror: each uploads only the files it wrote; the
    run's key pair stays local."""
    from surreal.runtime.runfolder import storage_sync

    root, client = store
    url = f"s3://{BUCKET}/unit/run"
    local = tmp_path / "mirror"
    (local / "keys").mkdir(parents=True)
    (local / "keys" / "server.key_secret").write_text("secret")
    (local / "config.json").write_text("{}")
    launcher = storage_sync.Mirror(url, local)
    assert launcher.push_all() == 1  # config.json; never keys/
    other = storage_sync.Mirror(url, local)
    assert other.pull(only_missing=True) == 0  # config.json is here already
    (local / "metrics.jsonl").write_text("a\n")
    assert other.push([local / "metrics.jsonl"]) == 1
    assert other.push([local / "metrics.jsonl"]) == 0  # unchanged since its upload
    (local / "metrics.jsonl").write_text("a\nb\n")
    assert other.push([local / "metrics.jsonl", local / "keys"]) == 1
    assert objects(client, "unit/run") == {"config.json": 2, "metrics.jsonl": 4}
    copy = Path(tmp_path / "copy")
    assert storage_sync.Mirror(url, copy).pull() == 2
    assert (copy / "metrics.jsonl").read_text() == "a\nb\n"


def test_a_file_a_process_removed_is_deleted_from_the_store(store, tmp_path):
    """A replay part merged into another shard's (a resume with fewer shards) must not come
    back with the next fetch of the run."""
    from surreal.runtime.runfolder import storage_sync

    _, client = store
    url = f"s3://{BUCKET}/unit/forget"
    local = tmp_path / "mirror"
    part, kept = local / "checkpoints" / "replay-1.npz", local / "checkpoints" / "replay-0.npz"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"x"), kept.write_bytes(b"y")
    mirror = storage_sync.Mirror(url, local)
    storage_sync.track(part), storage_sync.track(kept)
    mirror.sync()
    assert objects(client, "unit/forget") == {
        "checkpoints/replay-0.npz": 1,
        "checkpoints/replay-1.npz": 1,
    }
    part.unlink()
    storage_sync.forget(part)
    mirror.sync()
    assert objects(client, "unit/forget") == {"checkpoints/replay-0.npz": 1}
    assert part.absolute() not in storage_sync.forgotten() + storage_sync.tracked()  # done
    assert storage_sync.Mirror(url, tmp_path / "copy").pull() == 1


def test_launch_help_says_the_folder_may_be_a_bucket():
    from click.testing import CliRunner

    from surreal.cli import main

    result = CliRunner().invoke(main, ["launch", "--help"])
    assert result.exit_code == 0 and "s3://BUCKET/PREFIX" in result.output
    assert "AWS_ENDPOINT_URL" in result.output
