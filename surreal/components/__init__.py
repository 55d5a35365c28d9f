"""The processes of a run: actor, buffer, learner, parameter server, evaluator, metrics sink.

Each runs as `python -m surreal component ROLE RUN_DIR [--index I]` under symphony and finds its
peers with `symphony.address(service)`. Services (bound by -> connected by):

    experience  buffer        <- actors push segments          (caraml push-pull)
    batches     buffer        <- learner's DataFetcher asks     (caraml req-rep)
    params-pub  learner       -> parameter server subscribes    (caraml pub-sub)
    params      param server  <- actors and evaluator ask       (caraml req-rep)
    metrics     metrics sink  <- every component pushes         (caraml push-pull)
"""

ROLES = ("actor", "buffer", "learner", "param-server", "evaluator", "metrics")


def run_component(role: str, run_dir: str, index: int = 0) -> None:
    """Run one component in this process until it finishes or is told to stop."""
    import importlib

    modules = {
        "actor": "actor",
        "buffer": "replay",
        "learner": "learner",
        "param-server": "param_server",
        "evaluator": "evaluator",
        "metrics": "metrics",
    }
    if role not in modules:
        raise ValueError(f"unknown component {role!r}; one of {', '.join(ROLES)}")
    module = importlib.import_module(f"surreal.components.{modules[role]}")
    module.main(run_dir, index)
