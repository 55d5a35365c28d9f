"""The processes of a run: actor, buffer, learner, parameter server, evaluator, metrics sink.

Each runs as `python -m surreal component ROLE RUN_DIR [--index I]` under symphony and finds its
peers with `symphony.address(service)`. Services (bound by -> connected by):

    experience  buffer        <- actors push segments          (caraml push-pull)
    batches     buffer        <- learner's DataFetcher asks     (caraml req-rep)
    params-pub  learner       -> parameter server subscribes    (caraml pub-sub)
    params      param server  <- actors and evaluator ask       (caraml req-rep)
    metrics     metrics sink  <- every component pushes         (caraml push-pull)

A process starts in `surreal.runtime.processes.component.run_component`.
"""
