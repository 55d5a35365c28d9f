"""`surreal launch` on a cluster backend: backend options, `--dry-run` manifests, detached launch.

`-o KEY=VALUE` are the symphony backend's options, read like `symphony launch -o` does (the
symphony config file's `backend_options.<backend>` first; a bare `-o DIR` is `output=DIR`, where
`--dry-run` writes one file per Kubernetes object). On kube every container mounts the run
storage at /runs (`-o volume=CLAIM`: a PersistentVolumeClaim all pods share; without it each
pod's own scratch volume), and the run is launched detached: its processes live on the cluster,
and `symphony describe/logs/delete EXPERIMENT` follow it.
"""

from __future__ import annotations

from typing import Any

from surreal.portable import IMAGE_BACKENDS, RUNS_ROOT

DETACHED = ("kube",)
"""Backends `surreal launch` starts and leaves running (the processes are the cluster's)."""


STOP_GRACE_S = 30.0


def options(plan: Any, backend: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    """The backend's options: config file, `-o` pairs, then what the run's Curve keys need.

    On local and tmux a stopped run's processes get up to 30 s (`grace_s`, not symphony's 5)
    between SIGTERM and SIGKILL: the learner's last checkpoint and the metrics process's
    W&B finish must not be cut off on a busy machine; processes that stop sooner end sooner.
    """
    from surreal import curve
    from symphony.cli import backend_options

    merged = backend_options(backend, pairs)
    if backend in ("local", "tmux"):
        merged.setdefault("grace_s", STOP_GRACE_S)
    if backend == "kube":  # the run folder's container path lives on the run storage
        merged.setdefault("volume_path", RUNS_ROOT)
    for key, value in curve.launch_options(plan).items():
        merged[key] = {**(merged.get(key) or {}), **value} if isinstance(value, dict) else value
    return merged


def dry_run(plan: Any, backend: str, opts: dict[str, Any]) -> str:
    """What would start: on compose and kube the backend's `--dry-run` text (kube: the
    manifests, also written into the `output` folder when given), elsewhere the experiment's
    spec; starts nothing, writes nothing else.

    Raises:
        symphony.SymphonyError: a bad option, or an experiment the backend cannot render.
    """
    from surreal import launch as launching
    from symphony.backends import get_backend
    from symphony.errors import SpecError
    from symphony.records import Records

    impl = get_backend(backend, records=Records(), **opts)
    experiment = launching.build_experiment(plan)
    try:
        return impl.plan(experiment) if backend in IMAGE_BACKENDS else experiment.to_yaml()
    except SpecError as err:
        if str(err).startswith("group 'actors-") and "asks for" in str(err):
            raise SpecError(f"{err} (actors: --set actor.group_size=N)") from None
        raise


def launch_detached(plan: Any, backend: str, opts: dict[str, Any]) -> str:
    """Render the run (a request no node can hold is refused here), write the run folder,
    launch it and leave it running; returns what to tell the user."""
    import symphony
    from surreal import launch as launching

    dry_run(plan, backend, opts)  # every refusal before the run folder is written
    launching.create_run(plan)
    handle = symphony.launch(launching.build_experiment(plan), backend, detach=True, **opts)
    name = handle.name
    return (
        f"{name} is running on {backend} ({plan.config.run.actors} actors); follow it with "
        f"`symphony describe {name}`, `symphony logs {name} learner -f`; stop it with "
        f"`symphony delete {name}`"
    )
