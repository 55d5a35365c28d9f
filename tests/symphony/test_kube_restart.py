"""Each process keeps its restart policy on Kubernetes, also in a group that mixes policies."""

from __future__ import annotations

import pytest

from symphony import Experiment, Process, ProcessGroup, RestartPolicy
from symphony.errors import SpecError
from symphony.kube.manifests import render
from symphony.kube.naming import LABEL_WORKLOAD, RenderOptions

pytestmark = pytest.mark.timeout(120)
VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]


def mixed() -> Experiment:
    """A learner that ends (never), an actor server (always), a flaky replay (on-failure)."""
    return Experiment("mix", image="busybox").add(
        ProcessGroup(
            "learn",
            [
                Process("learner", ["train"], restart=RestartPolicy("never")).connects("replay"),
                Process("actor", ["act"], restart=RestartPolicy("always")).connects("replay"),
                Process(
                    "replay", ["serve"], restart=RestartPolicy("on-failure", max_restarts=2)
                ).binds("replay"),
            ],
        ),
        Process("eval", ["evaluate"], restart=RestartPolicy("on-failure", max_restarts=4)),
    )


def by_name(objects):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] in ("Deployment", "Job")}


def test_a_mixed_group_becomes_one_pod_per_policy_on_one_node():
    objects = render(mixed(), RenderOptions(owner="alice"))
    workloads = by_name(objects)
    assert set(workloads) == {"learn-never", "learn-always", "learn-on-failure", "eval"}
    summary = {
        name: (
            w["kind"],
            w["spec"]["template"]["spec"]["restartPolicy"],
            w["spec"].get("backoffLimit"),
            [c["name"] for c in w["spec"]["template"]["spec"]["containers"]],
        )
        for name, w in workloads.items()
    }
    assert summary == {
        "learn-never": ("Job", "Never", 0, ["learner"]),
        "learn-always": ("Deployment", "Always", None, ["actor"]),
        "learn-on-failure": ("Job", "OnFailure", 2, ["replay"]),
        "eval": ("Job", "OnFailure", 4, ["eval"]),
    }
    assert "podFailurePolicy" in workloads["learn-never"]["spec"]  # node loss: the pod comes back
    assert "podFailurePolicy" not in workloads["learn-on-failure"]["spec"]  # needs Never
    for name in ("learn-never", "learn-always", "learn-on-failure"):
        pod = workloads[name]["spec"]["template"]
        (term,) = pod["spec"]["affinity"]["podAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"] == {
            "symphony.io/experiment": "mix",
            "symphony.io/group": "learn",
        }
        assert all(
            pod["metadata"]["labels"][k] == v
            for k, v in term["labelSelector"]["matchLabels"].items()
        )
    assert "affinity" not in workloads["eval"]["spec"]["template"]["spec"]  # a one-policy group
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert service["spec"]["selector"][LABEL_WORKLOAD] == "learn-on-failure"  # the binder only


def test_the_split_manifests_validate_strictly():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for version in VERSIONS:
        for obj in render(mixed(), RenderOptions(owner="alice")):
            assert kubernetes_validate.validate(obj, version, strict=True) == version


def test_a_split_name_over_63_characters_is_a_clear_error():
    long = "g" * 60
    exp = Experiment("x", image="i").add(
        ProcessGroup(
            long,
            [Process("a", ["a"], restart=RestartPolicy("always")), Process("b", ["b"])],
        )
    )
    with pytest.raises(SpecError, match="shorten the group name"):
        render(exp)


def test_each_policy_holds_in_the_emulated_lifecycle(tmp_path, monkeypatch):
    pytest.importorskip("kmock")
    from symphony.kube.backend import KubeBackend
    from symphony.kube.testing_kube import KubeEndpoint
    from symphony.kube.testing_kube_controllers import Controllers
    from symphony.records import Records

    monkeypatch.setenv("SYMPHONY_OWNER", "alice")
    records = Records(tmp_path)
    with KubeEndpoint() as endpoint:
        backend = KubeBackend(records, host=endpoint.url, poll_s=0.05)
        exp = mixed()
        record = records.create(exp, "kube")
        backend.launch(exp, record)
        kube = Controllers(endpoint)
        kube.reconcile()

        def state(name):
            p = backend.describe(record).process(name)
            return p.state, p.restarts

        assert {p.state for p in backend.describe(record).processes} == {"running"}
        assert len(endpoint.stored("Pod")) == 4  # one pod per policy of the group, plus eval

        kube.exit("mix", "learner", 0)  # the learner finished: it stays finished
        kube.reconcile()
        assert state("learner") == ("exited", 0)
        assert kube.jobs["mix", "learn-never"]["condition"] == "Complete"
        assert state("actor") == ("running", 0) and state("replay") == ("running", 0)

        kube.exit("mix", "actor", 0)  # always: back after any exit, siblings untouched
        kube.exit("mix", "actor", 1)
        assert state("actor") == ("running", 2) and state("learner") == ("exited", 0)

        kube.exit("mix", "replay", 3)  # on-failure: restarted after a failure ...
        assert state("replay") == ("running", 1)
        kube.exit("mix", "replay", 0)  # ... and not after a clean exit
        kube.reconcile()
        assert state("replay") == ("exited", 1)
        assert kube.jobs["mix", "learn-on-failure"]["condition"] == "Complete"

        kube.exit("mix", "eval", 1)  # on-failure with max_restarts=4: the 5th failure is final
        for _ in range(3):
            kube.exit("mix", "eval", 1)
        assert state("eval") == ("running", 4)
        kube.exit("mix", "eval", 1)
        kube.reconcile()
        assert state("eval")[0] == "failed" and kube.jobs["mix", "eval"]["condition"] == "Failed"

        kube.lose_pod("mix", "actor")  # a node failure: the Deployment brings the actor back
        kube.reconcile()
        assert state("actor")[0] == "running"
        assert backend.describe(record).status == "running"
