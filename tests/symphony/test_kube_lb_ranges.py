"""Exposed Services carry the cloudwise cluster's `load_balancer_source_ranges`, so a cluster whose
admission policy requires them accepts the experiment; manifests stay strict-valid."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cloudwise.spec import ClusterSpec
from symphony import Experiment, Process
from symphony.kube.manifests import render
from symphony.kube.naming import RenderOptions

pytestmark = pytest.mark.timeout(120)

SPEC = Path(__file__).resolve().parents[2] / "examples" / "03_kube" / "cloudwise.yaml"
RANGES = ["203.0.113.0/24", "198.51.100.7/32"]


def experiment() -> Experiment:
    return Experiment("lb").add(
        Process("front", ["sleep", "inf"], image="busybox").binds("web", "inner").exposes("web"),
        Process("client", ["sleep", "inf"], image="busybox").connects("inner"),
    )


def services(cluster: ClusterSpec | None) -> dict[str, dict]:
    objects = render(experiment(), RenderOptions(cluster=cluster))
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}


def test_exposed_services_get_the_clusters_source_ranges():
    cluster = dataclasses.replace(ClusterSpec.load(SPEC), load_balancer_source_ranges=RANGES)
    by_type = {s["spec"]["type"]: s["spec"] for s in services(cluster).values()}
    assert by_type["LoadBalancer"]["loadBalancerSourceRanges"] == RANGES
    assert "loadBalancerSourceRanges" not in by_type["ClusterIP"]


def test_no_ranges_without_a_spec_or_when_the_spec_sets_none():
    for cluster in (None, ClusterSpec.load(SPEC)):
        for svc in services(cluster).values():
            assert "loadBalancerSourceRanges" not in svc["spec"]


def test_manifests_with_ranges_validate_strictly():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    cluster = dataclasses.replace(ClusterSpec.load(SPEC), load_balancer_source_ranges=RANGES)
    for obj in render(experiment(), RenderOptions(cluster=cluster)):
        kubernetes_validate.validate(obj, "1.33", strict=True)
