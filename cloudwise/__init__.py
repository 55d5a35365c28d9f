"""cloudwise: make a cloud account Kubernetes-ready (node pools -> terraform for GKE and EKS)."""

from cloudwise.errors import CloudwiseError, NoMachineFits, SpecError, TerraformError
from cloudwise.labels import GPU_TAINT, Taint, labels_and_taints, pool_labels, pool_taints
from cloudwise.render import render, write
from cloudwise.resolve import ResolvedCluster, ResolvedPool, resolve
from cloudwise.spec import ClusterSpec, NodePoolSpec

__version__ = "0.1.0"

__all__ = [
    "GPU_TAINT",
    "ClusterSpec",
    "CloudwiseError",
    "NoMachineFits",
    "NodePoolSpec",
    "ResolvedCluster",
    "ResolvedPool",
    "SpecError",
    "Taint",
    "TerraformError",
    "labels_and_taints",
    "pool_labels",
    "pool_taints",
    "render",
    "resolve",
    "write",
]
