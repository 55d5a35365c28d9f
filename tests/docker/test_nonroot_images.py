"""The project's runtime images run as a non-root user that can write its HOME and the work dir,
also under another uid (as Kubernetes' runAsUser gives); built and run on the tests' real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from symphony.build import build_image
from symphony.build_config import load_build_config
from tests.symphony import docker_engine as engine
from tests.symphony.docker_engine import DockerEngine

docker_engine, python_image = engine.docker_engine, engine.python_image

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    'echo "uid=$(id -u) gid=$(id -g) home=$HOME pwd=$(pwd)"; '
    'touch "$HOME/written" && echo home-writable; '
    "touch ./written && echo workdir-writable; "
    "mkdir -p ./runs/x && echo runs-writable; "
    "python3 -c \"import symphony, cloudwise; print('imports-ok')\""
)


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_image_runs_as_non_root_and_can_write_home_and_workdir(
    name: str, docker_engine: DockerEngine, python_image: str
) -> None:
    config = load_build_config(ROOT / "docker" / "build.yaml", name).with_overrides(
        tag=f"surreal-test/nonroot-{name}:test",
        build_args={"BASE_IMAGE": python_image, "INSTALL_DEPS": "0"},
    )
    build_image(config, docker_engine.client)
    image = docker_engine.client.images.get(config.tag)
    assert image.attrs["Config"]["User"] == "1000:0"  # numeric: runAsNonRoot can check it

    def run(**options) -> list[str]:
        out = docker_engine.client.containers.run(
            config.tag, ["sh", "-c", PROBE], network_mode="none", remove=True, **options
        )
        return out.decode().split()

    as_built = run()
    assert as_built[:4] == ["uid=1000", "gid=0", "home=/home/surreal", "pwd=/app"]
    assert as_built[4:] == ["home-writable", "workdir-writable", "runs-writable", "imports-ok"]
    # an arbitrary uid with no passwd entry, group 0 (Kubernetes runAsUser without runAsGroup)
    other = run(user="4321:0")
    assert other[:3] == ["uid=4321", "gid=0", "home=/home/surreal"]
    assert other[4:] == ["home-writable", "workdir-writable", "runs-writable", "imports-ok"]
