"""Kubernetes: the backend, the pure rendering of an Experiment into Kubernetes objects, their
resources and status, team namespaces, and (for tests) an API endpoint with controllers.
"""
