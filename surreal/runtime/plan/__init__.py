"""The launch plan: a run's processes as a symphony Experiment, built at launch time.

The topology's blocks (`topology`, `policy_topology`), what each process asks of a cluster
(`sizing`), commands that run inside the run's image (`portable`), what a backend's processes
get from the launching machine (`compose_env`) and what a local run imports once (`preload`).
"""
