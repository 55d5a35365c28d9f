"""From a launch plan to a symphony Experiment: the blocks every algorithm's topology is made of.

Every process of every algorithm runs the one entry point `python -m surreal component ROLE
RUN_DIR --index I`; `surreal.runtime.processes.component.run_component` looks ROLE up in the run's
`Learner.components()`. `algorithm_experiment` asks the learner class for its topology
(`Learner.build_experiment`); `standard_experiment` is the default when it returns None:

    actor-i --push--> buffer <--req-- learner --pub--> param-server <--req-- actors, evaluator
    everyone --push--> metrics
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from surreal.api.config import Config
from surreal.api.device import learner_threads, wants_gpu
from surreal.api.recipe import RUNTIME_COMPONENTS, recipe_of  # noqa: F401  (Recipe.components')
from surreal.api.spaces import EnvInfo
from surreal.monitoring.prometheus import service_name
from surreal.runtime.plan.policy_topology import policy_services, serves
from surreal.runtime.runfolder.checkpoint import STALLED_EXIT, UNUSABLE_EXIT, UNWRITABLE_EXIT
from surreal.runtime.runfolder.rundir import RunDir
from symphony import Experiment, Process, ProcessGroup, Resources, RestartPolicy

PROCESS_ENV = {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Environment of every process: unbuffered output, one OpenMP thread (the learner sets its own)."""


@dataclass
class LaunchPlan:
    """Everything decided before anything starts (built by `surreal.launch.experiment.plan`)."""

    config: Config
    algo_ref: str
    algo_class: type
    env_info: EnvInfo
    run_dir: RunDir
    experiment_name: str
    resume: bool = False
    backend: str = "local"
    """The symphony backend it will run on (set by `surreal launch --backend`)."""
    command_line: str = ""
    """The `surreal launch ...` that planned it (set by the command; kept in run.json)."""
    resumed_step: int | None = None
    """--resume: the step of the checkpoint the run continues from (its logs mark it)."""


def command(run_dir: RunDir, role: str, index: int = 0) -> list[str]:
    """`python -m surreal component ROLE RUN_DIR --index I`: the command line of every process."""
    path = run_dir.location  # an s3:// URL: the process works in a local mirror of it
    return [sys.executable, "-m", "surreal", "component", role, path, "--index", str(index)]


def restart_policy() -> Any:
    """How every process but the learner restarts: on failure, 0.5-5 s apart, up to 20 times
    within any 10 minutes (a crash loop ends the run; crashes now and then over days do not)."""
    return RestartPolicy(
        mode="on-failure", max_restarts=20, backoff_s=0.5, max_backoff_s=5.0, window_s=600.0
    )


def learner_restart_policy(plan: LaunchPlan) -> Any:
    """How the learner comes back after a crash or a kill: on failure (never after exit 0, its
    budget used), 1-5 s apart, from its last checkpoint (`surreal.runtime.processes.learner`). Crashes
    count against `run.max_restarts` within any 10 minutes (past it the learner stays failed and
    the run ends with the `--resume` hint); kills from outside never use it up; a learner that
    stopped because its checkpoint could not be written (`checkpoint.UNWRITABLE_EXIT`: a full
    disk) or read (`checkpoint.UNUSABLE_EXIT`: neither checkpoint fits it), or that its own
    stall watch ended (`checkpoint.STALLED_EXIT`), is not restarted. Never with
    `run.max_restarts=0`, nor for replicated learners (`run.learner_replicas` > 1: one rank
    alone cannot rejoin torch.distributed's group; `--resume` continues them)."""
    run = plan.config.run
    if run.max_restarts == 0 or run.learner_replicas > 1:
        return RestartPolicy(mode="never")
    return RestartPolicy(
        mode="on-failure",
        max_restarts=run.max_restarts,
        backoff_s=1.0,
        max_backoff_s=5.0,
        window_s=600.0,
        # its checkpoint could not be written (a full disk), or read (neither fits it); its
        # own stall watch ended the run
        final_codes=(UNWRITABLE_EXIT, STALLED_EXIT, UNUSABLE_EXIT),
    )


def process(plan: LaunchPlan, role: str, index: int = 0, name: str | None = None) -> Any:
    """A restarted-on-failure Process running component ROLE (named `name`, default ROLE),
    binding its `/metrics` service (`with_metrics`)."""
    proc = Process(
        name or role,
        command(plan.run_dir, role, index),
        env=dict(PROCESS_ENV),
        restart=restart_policy(),
    )
    return with_metrics(plan, proc)


def with_metrics(plan: LaunchPlan, proc: Any) -> Any:
    """Bind `prom-<name>`, the process's Prometheus `/metrics` (unless `run.prometheus` is off)."""
    return proc.binds(service_name(proc.name)) if plan.config.run.prometheus else proc


def new_experiment(plan: LaunchPlan) -> Any:
    """The symphony Experiment of a plan, labelled with its algo, env and run folder, holding the
    runtime's metrics sink (every topology starts from this)."""
    exp = Experiment(
        plan.experiment_name,
        metadata={
            "algo": plan.algo_ref,
            "env": plan.config.env.id,
            "run_dir": plan.run_dir.location,
        },
    )
    exp.add(process(plan, "metrics").binds("metrics"))
    return exp


def learner_process(
    plan: LaunchPlan, role: str = "learner", index: int = 0, name: str = "learner"
) -> Any:
    """The process named `learner` (running component ROLE): `run.torch_threads` OpenMP threads
    and CPUs (0: `surreal.api.device.learner_threads`), one GPU when `run.device` asks for cuda;
    restarted from its checkpoint after a crash or kill (`learner_restart_policy`); its end for
    good (budget used, or failed past its restarts) is the run's end."""
    run = plan.config.run
    threads = learner_threads(run.torch_threads, run.actors)
    proc = Process(
        name,
        command(plan.run_dir, role, index),
        env=dict(PROCESS_ENV, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads)),
        resources=Resources(cpu=threads, gpu=1 if wants_gpu(run.device) else 0),
        restart=learner_restart_policy(plan),
    )
    return with_metrics(plan, proc)


def add_learners(exp: Any, plan: LaunchPlan, binds: Iterable[str], connects: Iterable[str]) -> None:
    """Add the learner (binding `binds`, connected to `connects`), or with `run.learner_replicas`
    N > 1 the ProcessGroup `learners`: `learner` (rank 0, which also binds the rendezvous service
    `learner-rdzv`) and `learner-1` ... `learner-{N-1}` (running `--index` = their rank)."""
    binds, connects = tuple(binds), tuple(connects)
    n = plan.config.run.learner_replicas
    if n == 1:
        exp.add(learner_process(plan).binds(*binds).connects(*connects))
        return
    group = ProcessGroup("learners")
    group.add(learner_process(plan).binds(*binds, "learner-rdzv").connects(*connects))
    for rank in range(1, n):
        replica = learner_process(plan, index=rank, name=f"learner-{rank}")
        group.add(replica.connects(*connects, "learner-rdzv"))
    exp.add(group)


def add_evaluator(exp: Any, plan: LaunchPlan) -> None:
    """Add the runtime's evaluator (reads params, reports eval returns) unless `eval.every_s` is 0."""
    if plan.config.eval.every_s > 0:
        exp.add(process(plan, "evaluator").connects("params", "metrics"))


def add_actor_groups(
    exp: Any,
    plan: LaunchPlan,
    connects: Iterable[str],
    role: str = "actor",
    prefix: str = "actor",
    group_prefix: str = "actors",
) -> None:
    """Add `run.actors` processes `PREFIX-i` running component ROLE --index i, connected to
    `connects`, in groups `GROUP_PREFIX-g` of `actor.group_size` (one machine / Pod each);
    with `actor.inference=remote` also the policy workers each actor asks (`add_policy_workers`)."""
    cfg, services = plan.config, tuple(connects)
    size = cfg.actor.group_size
    for g, start in enumerate(range(0, cfg.run.actors, size)):
        group = ProcessGroup(f"{group_prefix}-{g}")
        for i in range(start, min(start + size, cfg.run.actors)):
            actor = process(plan, role, i, name=f"{prefix}-{i}")
            group.add(actor.connects(*services, *policy_services(plan, i, role)))
        exp.add(group)
    add_policy_workers(exp, plan, role)


def add_policy_workers(exp: Any, plan: LaunchPlan, role: str = "actor") -> None:
    """With `actor.inference=remote`: `run.policy_workers` processes `policy-worker-K` (binding
    `policy-K`, restarted on failure like the actors) in the ProcessGroup `policy-workers`; each
    declares one GPU when `actor.inference_device` asks for cuda (kube/compose/slurm request it).
    Nothing when ROLE's actors run their own policy (`surreal.runtime.plan.policy_topology.serves`)."""
    cfg = plan.config
    if cfg.actor.inference != "remote" or not serves(plan, role):
        return
    group = ProcessGroup("policy-workers")
    for k in range(cfg.run.policy_workers):
        proc = process(plan, "policy-worker", k, name=f"policy-worker-{k}")
        if wants_gpu(cfg.actor.inference_device):
            proc.resources = Resources(gpu=1)
        group.add(proc.binds(f"policy-{k}").connects("params", "metrics"))
    exp.add(group)


def standard_experiment(plan: LaunchPlan) -> Any:
    """The default topology: metrics, buffer, learner, parameter server, evaluator, actors."""
    exp = new_experiment(plan)
    exp.add(process(plan, "buffer").binds("experience", "batches").connects("metrics"))
    # `params`: a restarted learner asks which version the server holds (it publishes past it)
    add_learners(exp, plan, binds=("params-pub",), connects=("batches", "metrics", "params"))
    exp.add(process(plan, "param-server").binds("params").connects("params-pub", "metrics"))
    add_evaluator(exp, plan)
    add_actor_groups(exp, plan, ("params", "experience", "metrics"))
    return exp.validate()


def algorithm_experiment(plan: LaunchPlan) -> Any:
    """The algorithm's topology: `plan.algo_class.build_experiment(plan)`, or
    `standard_experiment(plan)` when that returns None (the `Learner` default)."""
    exp = recipe_of(plan.algo_class).build_experiment(plan)
    return standard_experiment(plan) if exp is None else exp
