"""The processes of a run: actor, buffer, learner, parameter server, evaluator, metrics sink.

Each runs as `python -m surreal component ROLE RUN_DIR [--index I]` under symphony and finds its
peers with `symphony.address(service)`. Services (bound by -> connected by):

    experience  buffer        <- actors push segments          (caraml push-pull)
    batches     buffer        <- learner's DataFetcher asks     (caraml req-rep)
    params-pub  learner       -> parameter server subscribes    (caraml pub-sub)
    params      param server  <- actors and evaluator ask       (caraml req-rep)
    metrics     metrics sink  <- every component pushes         (caraml push-pull)
"""


def run_component(role: str, run_dir: str, index: int = 0) -> None:
    """Run one process of a run until it finishes or is told to stop.

    ROLE is looked up in the run's `Learner.components()` (the runtime's roles above, plus those
    of an algorithm with its own topology), so this is the one entry point of every process.
    """
    import importlib
    from pathlib import Path

    from surreal.portable import materialize
    from surreal.rundir import RunDir

    materialize(run_dir)  # compose, kube: the run's config files travel in the environment
    roles = RunDir(Path(run_dir)).algo_class().components()
    if role not in roles:
        raise ValueError(
            f"unknown component {role!r}; this run's roles: {', '.join(sorted(roles))}"
        )
    module_name, function = roles[role].split(":")
    getattr(importlib.import_module(module_name), function)(run_dir, index)
