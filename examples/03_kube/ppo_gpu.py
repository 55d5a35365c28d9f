"""A Surreal-shaped experiment on a cloudwise cluster: a GPU learner group, actors packed on a CPU
pool, a parameter server, a TensorBoard exposed through a LoadBalancer, and a cloud credential
mounted from a Kubernetes Secret.

    symphony launch examples/03_kube/ppo_gpu.py --backend kube --dry-run -o output=/tmp/ppo \\
        -o cluster_spec=examples/03_kube/cloudwise.yaml -o "secrets={learner: [gcs-credentials]}"

Placement comes from `symphony.placement` and the pools of `cloudwise.yaml` beside this file.
The components are Surreal's (`surreal component ROLE RUN_DIR`); their run folder must be storage
every pod sees (e.g. a bucket mounted by the image), which this example leaves out.
"""

from pathlib import Path

from cloudwise.spec import ClusterSpec
from symphony import Experiment, Process, ProcessGroup, Resources, RestartPolicy, placement

CLUSTER = ClusterSpec.load(Path(__file__).with_name("cloudwise.yaml"))
IMAGE = "us-docker.pkg.dev/my-gcp-project/surreal/surreal:cuda"
ALWAYS = RestartPolicy(mode="always")
CREDENTIALS = "gcs-credentials"
"""A Kubernetes Secret (copied from the `symphony-secrets` namespace at launch)."""
SECRETS = {"learner": [CREDENTIALS]}
"""The kube backend's `secrets` option: process -> Secret names it mounts."""
RUN_DIR = "/runs/ppo-gpu"


def component(name: str, *args: str, resources: Resources, **env: str) -> Process:
    """One Surreal component process (`python -m surreal component ROLE RUN_DIR ...`)."""
    role = name.rsplit("-", 1)[0] if name[-1].isdigit() else name
    return Process(
        name,
        ["python", "-m", "surreal", "component", role, RUN_DIR, *args],
        env=env,
        resources=resources,
        restart=ALWAYS,
    )


def make_experiment(actors: int = 4) -> Experiment:
    """The learner+replay group on one GPU node; actors 4 to a CPU machine."""
    exp = Experiment("ppo-gpu", image=IMAGE)
    gpu = placement.gpu(CLUSTER, count=1, cpu=4, memory_gb=24)
    learner = (
        component(
            "learner",
            resources=gpu,
            GOOGLE_APPLICATION_CREDENTIALS=f"/var/run/secrets/symphony/{CREDENTIALS}/key.json",
        )
        .connects("replay")
        .binds("parameters")
    )
    replay = component(
        "replay", resources=placement.on_pool(gpu.node_pool, cpu=2, memory_gb=8)
    ).binds("replay")
    exp.add(ProcessGroup("learning", [learner, replay]))
    exp.add(
        component(
            "param-server",
            resources=placement.smallest_pool(CLUSTER, Resources(cpu=2, memory_gb=4)),
        )
        .connects("parameters")
        .binds("ps")
    )
    share = placement.share_of_machine(CLUSTER, "cpu", per_machine=4)
    for i in range(actors):
        exp.add(
            component(f"actor-{i}", "--index", str(i), resources=share).connects("replay", "ps")
        )
    board = Process(
        "tensorboard",
        ["tensorboard", "--logdir", RUN_DIR, "--bind_all", "--port", "$(SYMPH_TENSORBOARD_PORT)"],
        resources=placement.on_pool("cpu", cpu=0.5, memory_gb=1),
        restart=ALWAYS,
    )
    exp.add(board.exposes("tensorboard"))
    return exp
