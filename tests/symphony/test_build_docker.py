"""`symphony build` on a real docker engine: images from several folders, the project Dockerfiles."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from symphony.build import BuildError, build_image
from symphony.build_cli import build
from symphony.build_config import BuildConfig, load_build_config
from symphony.build_context import ContextEntry
from tests.symphony import docker_engine as engine
from tests.symphony.docker_engine import DockerEngine

docker_engine, busybox_image, python_image = (
    engine.docker_engine,
    engine.busybox_image,
    engine.python_image,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]


def _run(engine: DockerEngine, image: str, command: list[str]) -> str:
    out = engine.client.containers.run(image, command, network_mode="none", remove=True)
    return out.decode()


def test_build_assembles_two_folders_into_one_image(
    tmp_path: Path, docker_engine: DockerEngine, busybox_image: str
) -> None:
    (tmp_path / "model" / "__pycache__").mkdir(parents=True)
    (tmp_path / "model" / "net.py").write_text("layers = 3\n")
    (tmp_path / "model" / "__pycache__" / "net.pyc").write_bytes(b"\0")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "ppo.yaml").write_text("lr: 0.0003\n")
    (tmp_path / "configs" / "secret.key").write_text("do not ship\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {busybox_image}\nCOPY . /app\n")
    tag = "symphony-test/two-folders:1"
    result = CliRunner().invoke(
        build,
        [
            "-t",
            tag,
            "--add",
            str(tmp_path / "model"),
            "--add",
            f"{tmp_path / 'configs'}:etc/configs",
            "--dockerfile",
            str(dockerfile),
            "--exclude",
            "**/*.key",
        ],
    )
    assert result.exit_code == 0, result.output
    image = docker_engine.client.images.get(tag)
    assert f"built {tag} {image.id}" in result.output
    listing = _run(docker_engine, tag, ["sh", "-c", "cd /app && find . -type f | sort"]).split()
    assert listing == ["./Dockerfile", "./etc/configs/ppo.yaml", "./model/net.py"]
    assert _run(docker_engine, tag, ["cat", "/app/etc/configs/ppo.yaml"]) == "lr: 0.0003\n"


def test_build_error_shows_the_failing_step(
    tmp_path: Path, docker_engine: DockerEngine, busybox_image: str
) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {busybox_image}\nRUN echo about to fail && exit 7\n"
    )
    config = BuildConfig(tag="symphony-test/fails:1", context=(ContextEntry.of(tmp_path, "."),))
    with pytest.raises(BuildError, match="(?s)about to fail.*returned a non-zero code: 7"):
        build_image(config, docker_engine.client)


def test_push_to_an_unreachable_registry_fails_clearly(
    tmp_path: Path, docker_engine: DockerEngine, busybox_image: str
) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {busybox_image}\n")
    config = BuildConfig(
        tag="127.0.0.1:9/symphony-test/push:1", push=True, context=(ContextEntry.of(tmp_path, "."),)
    )
    with pytest.raises(BuildError, match="push of 127.0.0.1:9/symphony-test/push:1 failed"):
        build_image(config, docker_engine.client)


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_project_dockerfiles_build_from_a_local_base(
    name: str, docker_engine: DockerEngine, python_image: str
) -> None:
    """docker/Dockerfile.{cpu,cuda} built FROM a local Python (their public bases cannot be pulled
    here), with the dependency step off; the image holds the project's code and imports it."""
    config = load_build_config(ROOT / "docker" / "build.yaml", name).with_overrides(
        tag=f"symphony-test/surreal-{name}:test",
        build_args={"BASE_IMAGE": python_image, "INSTALL_DEPS": "0"},
    )
    result = build_image(config, docker_engine.client)
    assert result.image_id == docker_engine.client.images.get(config.tag).id
    out = _run(
        docker_engine,
        config.tag,
        [
            "python3",
            "-c",
            "import symphony, cloudwise, os; print(symphony.__file__); "
            "print(sorted(d for d in os.listdir('/app') if not d.startswith('.')))",
        ],
    )
    first, second = out.splitlines()
    assert first == "/app/symphony/__init__.py"
    assert {"caraml", "cloudwise", "examples", "pyproject.toml", "surreal", "symphony"} <= set(
        eval(second)
    )
    assert "tests" not in second
