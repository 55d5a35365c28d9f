"""A kube experiment ends by itself: once the Job of its `ends_with` process finished, the
cluster deletes the other workloads' pods (TTL-after-finished controller and garbage collector,
emulated by `symphony.kube.testing_kube_controllers`), and `symphony describe` and `list` say
how it ended. No symphony process runs on the cluster; nothing here sleeps."""

from __future__ import annotations

import pytest

pytest.importorskip("kmock")
pytest.importorskip("kubernetes")

from symphony import Experiment, Process, ProcessGroup, RestartPolicy  # noqa: E402
from symphony.errors import BackendError  # noqa: E402
from symphony.kube.backend import KubeBackend  # noqa: E402
from symphony.kube.manifests import render  # noqa: E402
from symphony.kube.naming import RenderOptions  # noqa: E402
from symphony.kube.testing_kube import KubeEndpoint  # noqa: E402
from symphony.kube.testing_kube_controllers import Controllers  # noqa: E402
from symphony.records import ExperimentRecord, Records  # noqa: E402

pytestmark = pytest.mark.timeout(120)
ON_FAILURE = RestartPolicy("on-failure", max_restarts=2)


def training() -> Experiment:
    """A trainer whose end is the experiment's, a server and two workers in a group."""
    exp = Experiment("train", image="busybox")
    exp.add(Process("server", ["serve"], restart=ON_FAILURE).binds("data"))
    exp.add(Process("trainer", ["train"], restart=ON_FAILURE).connects("data"))
    workers = ProcessGroup("workers")
    for i in range(2):
        workers.add(Process(f"worker-{i}", ["work"], restart=ON_FAILURE).connects("data"))
    exp.add(workers)
    exp.ends_with = ["trainer"]
    return exp


@pytest.fixture(autouse=True)
def alice(monkeypatch):
    monkeypatch.setenv("SYMPHONY_OWNER", "alice")


def launched(endpoint, tmp_path, **options):
    records = Records(tmp_path / "state")
    backend = KubeBackend(records, host=endpoint.url, poll_s=0.05, **options)
    exp = training()
    record = records.create(exp, "kube", owner="alice")
    backend.launch(exp, record)
    controllers = Controllers(endpoint)
    controllers.reconcile()
    return backend, record, controllers


def live(endpoint, kind):
    return sorted(o["metadata"]["name"] for o in endpoint.stored(kind))


def test_the_leader_job_comes_first_with_its_ttl_and_the_option_turns_it_off():
    objects = render(training(), RenderOptions(owner="alice", cleanup_after_s=120))
    workloads = [o for o in objects if o["kind"] in ("Job", "Deployment")]
    assert workloads[0]["metadata"]["name"] == "trainer"
    assert workloads[0]["spec"]["ttlSecondsAfterFinished"] == 120
    assert all("ttlSecondsAfterFinished" not in w["spec"] for w in workloads[1:])
    kept = render(training(), RenderOptions(owner="alice"))  # None: stays until delete
    assert all("ttlSecondsAfterFinished" not in o.get("spec", {}) for o in kept)


def test_what_launch_creates_with_its_owner_references_validates_strictly(tmp_path):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    with KubeEndpoint() as endpoint:
        launched(endpoint, tmp_path, cleanup_after_s=60)
        jobs = endpoint.stored("Job")
        assert sum("ownerReferences" in j["metadata"] for j in jobs) == 2
        for job in jobs:
            for version in ("1.29", "1.33"):
                assert kubernetes_validate.validate(job, version, strict=True) == version


def test_a_finished_trainer_takes_every_pod_with_it_and_describe_says_finished(tmp_path):
    with KubeEndpoint() as endpoint:
        backend, record, controllers = launched(endpoint, tmp_path, cleanup_after_s=60)
        trainer = next(j for j in endpoint.stored("Job") if j["metadata"]["name"] == "trainer")
        for other in endpoint.stored("Job"):  # owned by the trainer's Job, by the uid it got
            if other["metadata"]["name"] != "trainer":
                (owner,) = other["metadata"]["ownerReferences"]
                assert owner["uid"] == trainer["metadata"]["uid"] and owner["kind"] == "Job"
        assert len(live(endpoint, "Pod")) == 3

        controllers.exit("train", "trainer", 0)
        during = backend.describe(record)
        assert during.status == "running"
        assert during.details["ended"] == (
            "trainer exited 0, which ends this experiment; the cluster deletes the other 3 "
            "processes' pods 60 s after its Job finished (cleanup_after_s)"
        )
        teammate = KubeBackend(Records(tmp_path / "teammate"), host=endpoint.url)
        (row,) = teammate.list()
        theirs = teammate.describe(ExperimentRecord("train", "kube", "alice", row.created))
        assert theirs.details["ended"] == (
            "trainer exited 0, which ends this experiment (3 others still run)"
        )

        gone = controllers.clean_up()  # 60 s later
        assert "Job/trainer" in gone and live(endpoint, "Pod") == []
        assert live(endpoint, "Job") == [] and live(endpoint, "Service") == ["data"]
        after = backend.describe(record)
        assert after.status == "finished"
        states = {p.name: (p.state, p.exit_code) for p in after.processes}
        assert states == {
            "server": ("stopped", None),
            "trainer": ("exited", 0),
            "worker-0": ("stopped", None),
            "worker-1": ("stopped", None),
        }
        assert after.details["ended"].startswith("the cluster deleted the pods 60 s after trainer")
        assert "no longer" not in after.details["ended"]
        # the outcome was kept in the record: a fresh backend reading it says the same
        again = KubeBackend(Records(tmp_path / "state"), host=endpoint.url)
        assert again.describe(again.records.load("train")).status == "finished"
        (row,) = backend.list()
        assert row.status == "finished" and row.running == 0
        with pytest.raises(BackendError, match="deleted by the cluster after the experiment ended"):
            backend.logs(record, "worker-0")
        backend.delete(record)
        assert "train" not in endpoint.namespaces


def test_a_trainer_failed_past_its_restarts_ends_the_experiment_failed(tmp_path):
    with KubeEndpoint() as endpoint:
        backend, record, controllers = launched(endpoint, tmp_path, cleanup_after_s=0)
        for _ in range(3):  # backoffLimit 2: the third failure fails the Job
            controllers.exit("train", "trainer", 1)
        assert backend.describe(record).details["ended"].startswith("trainer failed")
        controllers.clean_up()
        assert live(endpoint, "Pod") == []
        after = backend.describe(record)
        assert after.status == "failed"
        assert after.process("trainer").state == "failed"
        assert after.process("trainer").exit_code == 1


def test_nobody_looked_before_the_cleanup_then_it_says_ended_not_finished(tmp_path, monkeypatch):
    with KubeEndpoint() as endpoint:
        backend, record, controllers = launched(endpoint, tmp_path)
        controllers.exit("train", "trainer", 0)
        controllers.clean_up()
        after = backend.describe(record)
        assert after.status == "ended"  # the exit code went with the pod
        assert after.process("trainer").state == "unknown"
        assert "how it ended is no longer on the cluster" in after.details["ended"]
        # a teammate without this machine's record sees the same from the namespace alone
        teammate = KubeBackend(Records(tmp_path / "teammate"), host=endpoint.url)
        (row,) = teammate.list()
        assert (row.name, row.status, row.running) == ("train", "ended", 0)
        theirs = teammate.describe(ExperimentRecord("train", "kube", "alice", row.created))
        assert (
            theirs.status == "ended" and "deleted the pods after trainer" in theirs.details["ended"]
        )


def test_a_launch_that_was_told_to_stay_stays_and_says_who_ends_it(tmp_path):
    with KubeEndpoint() as endpoint:
        backend, record, controllers = launched(endpoint, tmp_path, cleanup_after_s=-1)
        assert all("ownerReferences" not in j["metadata"] for j in endpoint.stored("Job"))
        controllers.exit("train", "trainer", 0)
        assert controllers.clean_up() == []
        assert len(live(endpoint, "Pod")) == 3
        told = backend.describe(record).details["ended"]
        assert "nothing on kube stops the other 3 processes (cleanup_after_s=-1)" in told
        assert "`symphony delete train` frees their pods" in told


def test_in_a_team_namespace_only_the_experiments_own_pods_go(tmp_path):
    with KubeEndpoint() as endpoint:
        endpoint.add_namespace("team-a")  # the admin's
        records = Records(tmp_path / "state")
        backend = KubeBackend(records, host=endpoint.url, team_namespace="team-a")
        for name in ("train", "other"):
            exp = training()
            exp.name = name
            backend.launch(exp, records.create(exp, "kube", owner="alice"))
        controllers = Controllers(endpoint)
        controllers.reconcile()
        controllers.exit("team-a", "trainer", 0, experiment="train")
        assert "ended" in backend.describe(records.load("train")).details  # seen before it goes
        controllers.clean_up()
        pods = live(endpoint, "Pod")
        assert len(pods) == 3 and all(p.startswith("other-") for p in pods), pods
        assert backend.describe(records.load("train")).status == "finished"
        assert backend.describe(records.load("other")).status == "running"


@pytest.mark.parametrize("bad", ["soon", -2, 1.5, True])
def test_a_bad_cleanup_after_s_is_refused_naming_what_it_takes(bad):
    with pytest.raises(BackendError, match=r"cleanup_after_s=.*whole seconds >= 0.*-1 to keep"):
        KubeBackend(Records(None), host="http://127.0.0.1:9", cleanup_after_s=bad)
