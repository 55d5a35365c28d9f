"""surreal's rooms (docs/architecture.md): imports run one way, and few modules lie loose.

The room order is the one the first surreal contract in pyproject.toml gives `lint-imports`;
this test reads it from there and checks it again on the `ast` module graph of
`tests/test_import_graph.py` (every import, inside functions too), so that a room added to
the folder but not to the contract shows up here.
"""

from __future__ import annotations

import re

import pytest
import tomllib

import surreal
import surreal.api
from tests.test_import_graph import ROOT, Graph, import_graph

LOOSE_LIMIT = 4
"""Modules at surreal's top level besides `__init__` and `__main__` (issue 32)."""


def room_layers() -> list[list[str]]:
    """The rooms, top first; rooms in one layer are independent of each other."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    rooms = next(c for c in contracts if c["name"].startswith("surreal's rooms"))
    return [[name.strip() for name in layer.split("|")] for layer in rooms["layers"]]


def room_of(module: str, layers: list[list[str]]) -> tuple[int, str] | None:
    """(layer index, room) of a module, or None for a loose module or the package itself."""
    for index, layer in enumerate(layers):
        for room in layer:
            if module == room or module.startswith(room + "."):
                return index, room
    return None


def upward_arrows(graph: Graph, layers: list[list[str]]) -> list[str]:
    """Every import from a room to a room above it, or to another room of its own layer."""
    found = []
    for source, arrows in sorted(graph.items()):
        here = room_of(source, layers)
        for target, where in sorted(arrows.items()):
            there = room_of(target, layers)
            if here is None or there is None or here[1] == there[1]:
                continue
            if there[0] <= here[0]:
                found.append(f"{where}: {source} -> {target} ({here[1]} -> {there[1]})")
    return found


def test_every_room_of_surreal_is_in_the_contract():
    layers = room_layers()
    folders = {p.name for p in (ROOT / "surreal").iterdir() if (p / "__init__.py").exists()}
    named = {room_of(f"surreal.{f}", layers) for f in folders}
    assert None not in named, f"rooms missing from the contract: {sorted(folders)}"


def test_surreal_imports_run_one_way_between_its_rooms():
    assert upward_arrows(import_graph(ROOT, ("surreal",)), room_layers()) == []


def test_an_upward_import_is_reported_with_where_it_is():
    layers = [["pkg.top"], ["pkg.left", "pkg.right"], ["pkg.base"]]
    graph: Graph = {
        "pkg.top.a": {"pkg.left.b": "top/a.py:3"},
        "pkg.left.b": {"pkg.base.c": "left/b.py:4", "pkg.right.d": "left/b.py:5"},
        "pkg.base.c": {"pkg.top.a": "base/c.py:9"},
    }
    assert upward_arrows(graph, layers) == [
        "base/c.py:9: pkg.base.c -> pkg.top.a (pkg.base -> pkg.top)",
        "left/b.py:5: pkg.left.b -> pkg.right.d (pkg.left -> pkg.right)",
    ]


def test_at_most_four_modules_lie_loose_at_surreals_top_level():
    loose = sorted(
        p.stem for p in (ROOT / "surreal").glob("*.py") if p.stem not in ("__init__", "__main__")
    )
    assert len(loose) <= LOOSE_LIMIT, f"{len(loose)} loose modules: {loose}"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("import surreal.config", "surreal.config moved to surreal.api.config"),
        (
            "from surreal.rundir import RunDir",
            "surreal.rundir moved to surreal.runtime.runfolder.rundir",
        ),
        ("import surreal.components.actor", "surreal.components moved to surreal.runtime"),
        ("from surreal.launch import plan", "from surreal.launch.experiment import plan"),
    ],
)
def test_an_old_address_fails_with_one_line_naming_the_new_one(statement, message):
    with pytest.raises(ModuleNotFoundError, match=re.escape(message)):
        exec(statement, {})


def test_the_interfaces_old_address_still_works():
    namespace: dict = {}
    exec(
        "from surreal.core import Actor, Learner, LearnerConfig, ParameterClient, Policy", namespace
    )
    assert namespace["Learner"] is surreal.api.Learner and namespace["Policy"] is surreal.Policy


RUNTIME_ROOMS = ("processes", "plan", "runfolder", "wire")
"""surreal/runtime/'s sub-rooms (issue 48), in the order of their layers contract."""


def test_the_runtime_is_its_named_sub_rooms_with_nothing_loose():
    runtime = ROOT / "surreal" / "runtime"
    loose = sorted(p.name for p in runtime.glob("*.py") if p.name != "__init__.py")
    rooms = sorted(p.name for p in runtime.iterdir() if (p / "__init__.py").exists())
    assert loose == [] and rooms == sorted(RUNTIME_ROOMS)


def test_symphonys_kube_code_and_local_process_machinery_each_live_in_one_package():
    symphony = ROOT / "symphony"
    kube = sorted(
        str(p.relative_to(symphony))
        for p in symphony.rglob("*.py")
        if "kube" in p.name and p.parent.name != "kube"
    )
    assert kube == [], f"Kubernetes modules outside symphony/kube/: {kube}"
    machinery = ("supervisor", "forking", "forkserver", "proctree", "runner")
    assert all((symphony / "local" / f"{name}.py").exists() for name in machinery)
    assert not any((symphony / f"{name}.py").exists() for name in machinery)
