"""The experiment model: declarations, validation errors with fixes, YAML round trip."""

import pytest

from symphony import Experiment, Process, ProcessGroup, Resources, RestartPolicy, SpecError

pytestmark = pytest.mark.timeout(30)


def _ring(n: int = 3) -> Experiment:
    exp = Experiment("ring")
    for i in range(n):
        exp.add(
            Process(f"node-{i}", ["python", "node.py", str(i)])
            .binds(f"in-{i}")
            .connects(f"in-{(i + 1) % n}")
        )
    return exp


def test_yaml_round_trip_keeps_everything():
    exp = _ring()
    group = ProcessGroup("actors").add(
        Process(
            "actor-0",
            "python act.py --seed 0",
            env={"A": "1"},
            cwd="/tmp",
            resources=Resources(cpu=0.5, memory_gb=2, gpu=1, node_pool="gpu"),
            restart=RestartPolicy("always", max_restarts=7, backoff_s=0.5, max_backoff_s=4),
            image="img:1",
            secrets=["gcs-credentials", "wandb"],
        ).connects("in-0"),
        Process("tb", ["tensorboard"]).exposes("board"),
    )
    exp.add(group)
    exp.image, exp.metadata = "base:2", {"git": "abc"}
    again = Experiment.from_yaml(exp.validate().to_yaml())
    assert again == exp
    assert again.to_yaml() == exp.to_yaml()
    assert [g.name for g in again.groups()] == ["node-0", "node-1", "node-2", "actors"]
    assert again.process("tb").bound == ["board"] and again.process("tb").exposed == ["board"]
    assert again.process("actor-0").secrets == ["gcs-credentials", "wandb"]


def test_secrets_are_a_yaml_key_only_when_a_process_has_some():
    exp = Experiment.from_yaml(
        "name: s\nprocesses:\n- {name: learner, command: x, secrets: [gcs-credentials]}\n- {name: actor, command: y}\n"
    )
    assert exp.process("learner").secrets == ["gcs-credentials"]
    assert exp.process("actor").secrets == []
    learner, actor = exp.to_dict()["processes"]
    assert learner["secrets"] == ["gcs-credentials"]
    assert "secrets" not in actor


def test_resources_and_restart_policy_still_import_from_spec():
    import symphony.resources
    import symphony.spec

    assert symphony.spec.Resources is symphony.resources.Resources
    assert symphony.spec.RestartPolicy is symphony.resources.RestartPolicy
    assert symphony.spec.RESTART_MODES == ("never", "on-failure", "always")


def test_groups_treat_a_lone_process_as_a_group_of_one():
    exp = _ring(2)
    groups = list(exp.groups())
    assert [(g.name, [p.name for p in g.processes]) for g in groups] == [
        ("node-0", ["node-0"]),
        ("node-1", ["node-1"]),
    ]
    assert exp.group_of("node-1") == "node-1"


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: Process("Bad_Name", "x"), "try 'bad-name'"),
        (lambda: Process("a", []), "has no command"),
        (lambda: Process("a", "   "), "has no command"),
        (lambda: Process("a", "x").binds("s").connects("s"), "already binds 's'"),
        (lambda: Process("a", "x").binds("Not OK"), "service name"),
        (lambda: Experiment("x").add(Process("a", "x"), Process("a", "y")), "used twice"),
        (lambda: Experiment("x").add(Process("g", "x"), ProcessGroup("g")), "used twice"),
        (
            lambda: Experiment("x").add(Process("a", "x").connects("nope")).validate(),
            "add `.binds('nope')`",
        ),
        (
            lambda: (
                Experiment("x")
                .add(Process("a", "x").binds("s"), Process("b", "y").binds("s"))
                .validate()
            ),
            "bound by both",
        ),
        (lambda: Experiment("x").validate(), "has no processes"),
        (
            lambda: (
                Experiment("x")
                .add(
                    ProcessGroup("g").add(
                        Process("a", "x", resources=Resources(node_pool="p1")),
                        Process("b", "x", resources=Resources(node_pool="p2")),
                    )
                )
                .validate()
            ),
            "same node_pool",
        ),
        (lambda: RestartPolicy("sometimes"), "unknown"),
        (lambda: Process("a", "x", secrets="wandb"), "must be a list of Secret names"),
        (lambda: Process("a", "x", secrets=["GCS_Key"]), "secret name"),
        (lambda: Process("a", "x", secrets=["wandb", "wandb"]), "twice"),
        (
            lambda: Experiment.from_yaml(
                "name: x\nprocesses: [{name: a, command: x, secrets: wandb}]"
            ),
            "must be a list",
        ),
        (
            lambda: Experiment.from_yaml(
                "name: x\nprocesses: [{name: a, command: x, colour: red}]"
            ),
            "colour",
        ),
        (lambda: Experiment.from_yaml("name: [oops"), "not valid YAML"),
    ],
)
def test_bad_declarations_fail_early_with_a_fix(make, fragment):
    with pytest.raises(SpecError, match=None) as err:
        make()
    assert fragment in str(err.value)


def test_restart_policy_backoff_doubles_and_caps():
    policy = RestartPolicy("on-failure", max_restarts=5, backoff_s=1, max_backoff_s=3)
    assert [policy.delay(i) for i in range(4)] == [1, 2, 3, 3]
    assert policy.should_restart(-9, 0) and not policy.should_restart(0, 0)
    assert not policy.should_restart(1, 5)
    assert RestartPolicy("always").should_restart(0, 0)
    assert not RestartPolicy().should_restart(1, 0)


def test_ends_with_names_processes_of_the_experiment_and_survives_yaml():
    exp = _ring()
    exp.ends_with = ["node-0"]
    again = Experiment.from_yaml(exp.validate().to_yaml())
    assert again.ends_with == ["node-0"]
    assert "ends_with" not in _ring().to_dict()  # specs without it read as before
    exp.ends_with = ["node-9"]
    with pytest.raises(SpecError, match=r"ends_with names \['node-9'\].*its processes"):
        exp.validate()
    with pytest.raises(SpecError, match="must be a list of process names"):
        Experiment("x", ends_with="node-0")
