"""surreal asks a backend what it does (symphony's `Capabilities`) and never compares its name
(issue 48 item 4): a new backend is one class in symphony, and surreal follows what it declares."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from surreal.launch import cluster_launch
from surreal.launch import experiment as launching
from surreal.runtime.plan import compose_env, portable, preload
from surreal.runtime.wire import curve, report_token
from symphony.backends import BACKENDS, backend_names
from symphony.backends.base import Backend, Capabilities

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
NAMES = frozenset(backend_names())
UNAMBIGUOUS = NAMES - {"local", "test"}
"""Backend names no other setting uses (`local` is also an `actor.inference` mode)."""
ALLOWED: frozenset[tuple[str, int]] = frozenset()
"""(file, line) of the CLI's list of backend choices, the one place that may name them."""


def _names_in(node: ast.AST) -> set[str]:
    """Backend names among the string constants of `node` (a constant or a literal collection)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {
        item.value
        for item in items
        if isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value in NAMES
    }


def backend_name_branches(root: Path) -> Iterator[tuple[str, int, str]]:
    """(file, line, source) of each place under `root` that compares a backend's name: a
    comparison with a backend name (`local` and `test` only where it compares a backend), or a
    literal collection of backend names (a table that a comparison reads)."""
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        rel = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(source, rel)):
            found: set[str] = set()
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                found = set().union(*(_names_in(side) for side in sides))
                text = ast.get_source_segment(source, node) or ""
                if not found & UNAMBIGUOUS and "backend" not in text:
                    found = set()
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                found = _names_in(node)
                if not found & UNAMBIGUOUS and len(found) < 2:
                    found = set()
            if found and (rel, node.lineno) not in ALLOWED:
                yield rel, node.lineno, ast.get_source_segment(source, node) or ""


def test_surreal_compares_no_backend_name():
    assert list(backend_name_branches(ROOT / "surreal")) == []


def test_the_scan_finds_what_it_is_for(tmp_path):
    code = tmp_path / "surreal" / "m.py"
    code.parent.mkdir()
    code.write_text(
        'MULTI = ("slurm", "kube")\n'
        'ok = plan.backend == "local"\n'
        'ok = name != "compose"\n'
        'ok = backend in ("local", "tmux")\n'
        'ok = inference == "local"\n'  # a setting's value, not a backend
        'MODES = ("local", "remote")\n'
    )
    found = [line for _, line, _ in backend_name_branches(tmp_path / "surreal")]
    assert sorted(set(found)) == [1, 2, 3, 4]


class FreshBackend(Backend):
    """A backend surreal has never heard of: containers that take an env file under another
    option name, with their own stop grace option, sharing no disk with this machine."""

    name = "fresh"
    capabilities = Capabilities(
        runs_in_image=True,
        env_file_option="private_env",
        stop_grace_option="grace",
        plan_is_submission=True,
        logs_on_launch_disk=False,
    )

    def launch(self, experiment, record, *, detach=True):
        raise NotImplementedError

    def describe(self, record):
        raise NotImplementedError

    def logs(self, record, process, *, follow=False, tail=None):
        raise NotImplementedError

    def delete(self, record, *, force=False):
        raise NotImplementedError


class MountingBackend(FreshBackend):
    """Another: it mounts secrets and run storage, and its launches are left running."""

    name = "mounting"
    capabilities = Capabilities(
        runs_in_image=True,
        secret_mount_root="/mnt/secrets",
        run_volume_option="storage_path",
        stays_attached=False,
    )


@pytest.fixture
def registered(monkeypatch):
    for cls in (FreshBackend, MountingBackend):
        monkeypatch.setitem(BACKENDS, cls.name, f"{__name__}:{cls.__name__}")


def _plan(tmp_path, backend, *overrides):
    return launching.plan(
        "ppo",
        env="gym:CartPole-v1",
        folder=str(tmp_path / "runs"),
        overrides=overrides,
        backend=backend,
    )


def test_a_new_backend_with_an_env_file_gets_the_keys_through_it(registered, tmp_path):
    plan = _plan(tmp_path, "fresh")
    assert curve.enabled(plan) and not report_token.enabled(plan)
    assert curve.process_folder(plan) == curve.CONTAINER_KEYS and curve.launch_options(plan) == {}
    assert compose_env.options(plan) == {"private_env": str(compose_env.env_file(plan))}
    with pytest.raises(Exception, match="share no folder"):  # its run folder: an object store
        cluster_launch.options(plan, "fresh", ())
    plan.run_dir.url = "s3://bucket/runs/ppo-cartpole-v1/t1"
    opts = cluster_launch.options(plan, "fresh", ())
    assert opts == {
        "grace": cluster_launch.STOP_GRACE_S,
        "private_env": [str(compose_env.env_file(plan))],
    }
    assert portable.applies(plan) and not cluster_launch.detached("fresh")
    exp = preload.apply(launching.build_experiment(plan), plan)
    assert all(not p.preload and p.command[0] == portable.PYTHON for p in exp.processes())
    assert launching.device_line(plan).startswith("learner device: cpu (run.device=auto on fresh")


def test_a_new_backend_that_mounts_secrets_gets_them_mounted(registered, tmp_path):
    plan = _plan(tmp_path, "mounting")
    assert curve.process_folder(plan) == f"/mnt/secrets/{curve.SECRET}"
    exp = launching.build_experiment(plan)
    assert all(p.secrets == [curve.SECRET] for p in exp.processes())
    assert curve.launch_options(plan) == {
        "secret_files": {curve.SECRET: str(curve.key_folder(plan))}
    }
    assert compose_env.options(plan) == {}
    assert cluster_launch.options(plan, "mounting", ()) == {
        "storage_path": "/runs",
        "secret_files": {curve.SECRET: str(curve.key_folder(plan))},
    }
    assert cluster_launch.detached("mounting")


def test_curve_on_a_backend_that_cannot_hand_over_keys_is_refused(
    registered, tmp_path, monkeypatch
):
    monkeypatch.setattr(MountingBackend, "capabilities", Capabilities(runs_in_image=True))
    plan = _plan(tmp_path, "mounting")
    with pytest.raises(ValueError, match="no way to hand the run's keys.*run.curve=false"):
        curve.process_folder(plan)
    plan = _plan(tmp_path, "mounting", "run.curve=false")
    assert curve.launch_options(plan) == {} and not curve.enabled(plan)
