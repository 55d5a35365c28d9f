"""No import cycle anywhere in the repository: the module graph of every import, built with `ast`.

Every import statement counts, at the top of a module or inside a function; only those under
`if TYPE_CHECKING:` do not. `import a.b` is an arrow to `a.b`; `from a import b` is an arrow to
`a` (running `a/__init__.py`) and, when `a.b` is a module, to `a.b` as well; relative imports are
resolved against the importing module's package. A name that is no module of ours (numpy, a
class) counts as its nearest enclosing module of ours, or not at all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("surreal", "caraml", "symphony", "cloudwise")

Graph = dict[str, dict[str, str]]
"""module -> {imported module: where the first such import is, `path:line`}."""


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> its file, for every `.py` file under the packages."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth, except under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement reaches (relative ones made absolute)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> Graph:
    """The module graph of the packages under `root` (see the module docstring)."""
    modules = module_files(root, packages)

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {}
    for module, path in modules.items():
        arrows = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(), str(path))
        for node in sorted(_imports(tree), key=lambda n: n.lineno):
            for name in _targets(node, module, path.name == "__init__.py"):
                target = ours(name)
                if target and target != module:
                    arrows.setdefault(target, f"{path.relative_to(root)}:{node.lineno}")
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The groups of two or more modules that import each other, directly or not (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def cycle_through(graph: Graph, group: list[str]) -> list[str]:
    """One shortest cycle inside a strongly connected group: [a, b, ..., a]."""
    members, start = set(group), group[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child in members and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{group} is not strongly connected")


def describe_cycles(graph: Graph) -> list[str]:
    """One paragraph per cycle: the chain `a -> b -> a`, then where each arrow is imported."""
    paragraphs = []
    for group in strongly_connected(graph):
        chain = cycle_through(graph, group)
        lines = [" -> ".join(chain)]
        lines += [f"    {a} -> {b}: {graph[a][b]}" for a, b in zip(chain, chain[1:], strict=False)]
        if len(group) > len(chain) - 1:
            lines.append(f"    (the same knot holds {len(group)} modules: {', '.join(group)})")
        paragraphs.append("\n".join(lines))
    return paragraphs


def test_the_repository_has_no_import_cycle():
    cycles = describe_cycles(import_graph(ROOT))
    assert not cycles, (
        f"{len(cycles)} import cycle(s); move the shared piece into a lower module (or turn a "
        "call upward into a hook the upper module passes down), not into a function:\n"
        + "\n".join(cycles)
    )


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_finder_reports_a_cycle_hidden_in_a_function_and_a_relative_import(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "from .b import helper\nA = 1\n",
            "pkg/b.py": "def helper():\n    from pkg import c\n    return c\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n",
            "pkg/d.py": "import pkg.c\n",
            "pkg/sub/__init__.py": "from .. import a\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.a"] == {"pkg.b": "pkg/a.py:1"}
    assert set(graph["pkg.b"]) == {"pkg", "pkg.c"}  # `from pkg import c` runs pkg/__init__
    assert graph["pkg.c"] == {}  # under TYPE_CHECKING: no arrow
    assert set(graph["pkg.sub"]) == {"pkg", "pkg.a"}
    assert strongly_connected(graph) == [["pkg", "pkg.a", "pkg.b"]]
    (paragraph,) = describe_cycles(graph)
    assert paragraph.splitlines()[0] == "pkg -> pkg.a -> pkg.b -> pkg"
    assert "pkg.b -> pkg: pkg/b.py:2" in paragraph


def test_the_finder_passes_a_tree_without_cycles(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "import numpy\nfrom pkg.b import helper\nA = 1\n",
            "pkg/b.py": "def helper():\n    from pkg.c import C\n    return C\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\nC = 2\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.b"] == {"pkg.c": "pkg/b.py:2"}
    assert strongly_connected(graph) == []
    assert describe_cycles(graph) == []
