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
    It sets up the process's log (`surreal.monitoring.logs`): a `start:` line first, a `stop:`
    line last (finished, stopped by a signal, crashed). An exception that ends it (not a stop
    signal) is recorded in `RUN/crashes.jsonl` (`surreal.monitoring.crash`) and raised again
    (exit code 1, traceback in the log). RUN_DIR may be an `s3://` URL
    (`surreal.runtime.storage_sync.attached`).
    """
    import importlib
    import time
    from pathlib import Path

    from surreal.monitoring import logs
    from surreal.monitoring.crash import process_name
    from surreal.runtime.compose_env import materialize_keys
    from surreal.runtime.portable import materialize
    from surreal.runtime.rundir import RunDir
    from surreal.runtime.storage_sync import attached

    log = logs.setup(process_name(role, index))
    log.info("%s", logs.start_line(role, index, run_dir))
    started, ended = time.monotonic(), None
    try:
        materialize(run_dir)  # compose, kube: the run's config files travel in the environment
        materialize_keys()  # compose: the run's Curve keys travel in the environment
        with attached(run_dir) as local:  # an s3:// run: a local mirror, uploaded as written
            roles = RunDir(Path(local)).components()
            if role not in roles:
                raise ValueError(
                    f"unknown component {role!r}; this run's roles: {', '.join(sorted(roles))}"
                )
            module_name, function = roles[role].split(":")
            try:
                getattr(importlib.import_module(module_name), function)(local, index)
            except Exception as error:  # a crash (not a stop): RUN/crashes.jsonl, exit non-zero
                from surreal.monitoring.crash import record
                from surreal.runtime.common import STOP_REQUESTED

                if not STOP_REQUESTED.is_set():
                    record(Path(local), role, index, error)
                raise
    except BaseException as error:
        ended = error
        raise
    finally:
        from surreal.runtime.common import STOP_REQUESTED

        level, how = logs.ending(ended, STOP_REQUESTED.is_set())
        log.log(level, "stop: %s after %.1f s", how, time.monotonic() - started)
