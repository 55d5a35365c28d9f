"""Build contexts and build configs, without an engine: what goes into an image, and from where."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from symphony.build_cli import build
from symphony.build_config import load_build_config, load_build_configs
from symphony.build_context import ContextEntry, ContextError, is_excluded, write_context

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "code" / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "code" / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "code" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "code" / "data").mkdir()
    (tmp_path / "code" / "data" / "big.bin").write_bytes(b"\1" * 10)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "run.yaml").write_text("lr: 0.1\n")
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY . /app\n")
    return tmp_path


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_two_folders_and_a_file_land_where_asked_without_excluded_paths(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    entries = [ContextEntry.parse("code", root), ContextEntry.parse("conf:etc/conf", root)]
    buf = io.BytesIO()
    write_context(
        entries, buf, excludes=("**/__pycache__", "code/data"), dockerfile=root / "Dockerfile"
    )
    members = _members(buf.getvalue())
    assert {"code/pkg/mod.py", "etc/conf/run.yaml", "Dockerfile"} <= set(members)
    assert not any("__pycache__" in name or name.startswith("code/data") for name in members)
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
        assert tar.extractfile("etc/conf/run.yaml").read() == b"lr: 0.1\n"


def test_equal_inputs_give_byte_identical_contexts(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    entries = [ContextEntry.parse("code", root)]
    first, second = io.BytesIO(), io.BytesIO()
    write_context(entries, first)
    (root / "code" / "pkg" / "mod.py").touch()  # a new mtime must not change the archive
    write_context(entries, second)
    assert first.getvalue() == second.getvalue()
    assert all(m.mtime == 0 and m.uid == 0 for m in _members(first.getvalue()).values())


def test_two_sources_for_one_path_and_bad_entries_are_errors(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "other").mkdir()
    (root / "other" / "run.yaml").write_text("lr: 1\n")
    clash = [ContextEntry.parse("conf:cfg", root), ContextEntry.parse("other:cfg", root)]
    with pytest.raises(ContextError, match="comes from both"):
        write_context(clash, io.BytesIO())
    with pytest.raises(ContextError, match="does not exist"):
        ContextEntry.parse("missing", root)
    with pytest.raises(ContextError, match="leaves the build context"):
        ContextEntry.parse("conf:../up", root)


@pytest.mark.parametrize(
    ("path", "pattern", "excluded"),
    [
        ("a/b/__pycache__/x.pyc", "**/__pycache__", True),
        ("a/x.pyc", "**/*.pyc", True),
        ("data/big/file", "data", True),
        ("src/data", "data", False),
        ("src/data", "*/data", True),
        ("a/x.py", "**/*.pyc", False),
    ],
)
def test_exclude_patterns(path: str, pattern: str, excluded: bool) -> None:
    assert is_excluded(path, [pattern]) is excluded


def test_named_builds_resolve_paths_relative_to_the_file(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "builds.yaml").write_text(
        "builds:\n"
        "  train:\n"
        "    tag: me/train:1\n"
        "    dockerfile: Dockerfile\n"
        "    context: [code, {src: conf, dest: etc/conf}]\n"
        "    exclude: [code/data]\n"
        "    build_args: {BASE_IMAGE: base:1}\n"
        "  other: {tag: me/other:1, context: [conf]}\n"
    )
    configs = load_build_configs(root / "builds.yaml")
    assert sorted(configs) == ["other", "train"]
    train = configs["train"]
    assert train.tag == "me/train:1" and train.dockerfile == root / "Dockerfile"
    assert [(e.src, e.dest) for e in train.context] == [
        (root / "code", "code"),
        (root / "conf", "etc/conf"),
    ]
    assert train.build_args == {"BASE_IMAGE": "base:1"} and "code/data" in train.excludes
    with pytest.raises(ContextError, match="choose one of: other, train"):
        load_build_config(root / "builds.yaml", "nope")


def test_the_project_build_config_names_cpu_and_cuda_from_docker_folder() -> None:
    configs = load_build_configs(ROOT / "docker" / "build.yaml")
    assert {"cpu", "cuda"} <= set(configs)
    for name, dockerfile in (("cpu", "Dockerfile.cpu"), ("cuda", "Dockerfile.cuda")):
        config = configs[name]
        assert config.dockerfile == ROOT / "docker" / dockerfile
        text = config.dockerfile.read_text()
        # The base image is a build arg, so the image can be built FROM a local image.
        assert text.index("ARG BASE_IMAGE=") < text.index("FROM ${BASE_IMAGE}")
        assert {e.dest for e in config.context} >= {
            "symphony",
            "caraml",
            "surreal",
            "cloudwise",
            "pyproject.toml",
        }


def test_build_help_and_dry_run_touch_no_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _tree(tmp_path)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    runner = CliRunner()
    assert "several local folders" in runner.invoke(build, ["--help"]).output
    result = runner.invoke(
        build,
        [
            "-t",
            "me/x:1",
            "--add",
            str(root / "code"),
            "--add",
            f"{root / 'conf'}:etc",
            "--dockerfile",
            str(root / "Dockerfile"),
            "--exclude",
            "code/data",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "code/pkg/mod.py" in result.output and "etc/run.yaml" in result.output
    assert "big.bin" not in result.output and "__pycache__" not in result.output


def test_symphony_cli_registers_build() -> None:
    from symphony.cli import main

    result = CliRunner().invoke(main, ["build", "--help"])
    assert result.exit_code == 0 and "--add" in result.output and "--push" in result.output


def test_build_without_tag_or_sources_is_a_usage_error() -> None:
    result = CliRunner().invoke(build, ["--add", "."])
    assert result.exit_code == 2 and "--tag and at least one --add" in result.output
