"""The optional heavy dependencies: the only modules a function may import inside itself.

surreal imports at the top of its modules; an import inside a function is kept only for one of
these top-level packages, each of an extra of pyproject.toml (or slow to import), so that the
base install and `surreal --help` run without them. tests/test_function_imports.py checks it.
"""

HEAVY = (
    "torch",  # [rl]: the networks and learners; seconds to import
    "gymnasium",  # [rl]: the environments
    "mujoco",  # [rl] / [robosuite]: the physics under gymnasium's and robosuite's tasks
    "robosuite",  # [robosuite]: robot-arm tasks
    "imageio",  # [robosuite]: `surreal eval --video` as mp4
    "tensorboardX",  # [rl]: the TensorBoard event files
    "prometheus_client",  # [rl]: every process's /metrics
    "rich",  # [rl]: the live progress panel of `surreal launch`
    "matplotlib",  # [rl] / [bench]: plots of runs and populations (`surreal plot`)
    "onnxruntime",  # [export]: `surreal export --format onnx` runs the file it wrote
    "wandb",  # [wandb]: --set run.wandb=online|offline
    "boto3",  # [s3]: run folders in an object store
    "botocore",  # [s3]: boto3's errors and client config
    "kubernetes",  # [kube]: the kube backend
    "docker",  # [docker]: the compose backend and image builds
)
"""Top-level module names (`import torch.distributed` counts as torch)."""
