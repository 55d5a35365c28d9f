"""cloudwise: make a cloud account Kubernetes-ready (node pools -> terraform for GKE and EKS)."""

__version__ = "0.1.0"
