"""Imports sit at the top of a module; one inside a function only for an optional heavy
dependency (issue 32).

The heavy dependencies are listed once, in `surreal.api.optional.HEAVY`. Every import inside a
function (at any depth, except under `if TYPE_CHECKING:`) is found with `ast`:

- in the launch side (`surreal/cli.py`, `surreal/launch/`, `surreal/pbt/`, `surreal/monitoring/`)
  each must import a module of HEAVY, or be in `ALLOWED` below with its reason;
- over all of surreal their number is at most `CEILING`. The ceiling is a ratchet: it may only go
  down. When you move imports to the top, lower it to the new count; never raise it (an import
  that must stay inside a function is of a HEAVY module, or belongs in ALLOWED with a reason).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from surreal.api.optional import HEAVY

ROOT = Path(__file__).resolve().parent.parent
SURREAL = ROOT / "surreal"

CHECKED = ("surreal/cli.py", "surreal/launch/", "surreal/pbt/", "surreal/monitoring/")
"""The files whose in-function imports must all be of HEAVY modules (or ALLOWED)."""

ALLOWED: dict[tuple[str, str], str] = {}
"""(file, imported module) -> why that import stays inside a function though not HEAVY (an
import cycle; a module that imports torch at its top, kept off the CLI's path). Keep it short."""

CEILING = 202
"""The most in-function imports all of surreal may hold: only ever lower it (see above)."""


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted modules an import statement names (a relative one keeps its leading dots)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["." * node.level + (node.module or "")]


def function_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import inside a function of `source`, once each (an import
    naming several modules gives one entry per module); none under `if TYPE_CHECKING:`."""
    found = []
    stack: list[tuple[ast.AST, bool]] = [(ast.parse(source), False)]
    while stack:
        node, inside = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if inside:
                found += [(node.lineno, module) for module in _modules(node)]
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack += [(child, inside) for child in node.orelse]
            continue
        deeper = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack += [(child, deeper) for child in ast.iter_child_nodes(node)]
    return sorted(found)


def is_heavy(module: str) -> bool:
    return module.split(".")[0] in HEAVY


def surreal_function_imports() -> dict[str, list[tuple[int, str]]]:
    """file (relative to the repository) -> its in-function imports, for every file of surreal."""
    found = {}
    for path in sorted(SURREAL.rglob("*.py")):
        imports = function_imports(path.read_text())
        if imports:
            found[path.relative_to(ROOT).as_posix()] = imports
    return found


def _statements(imports: dict[str, list[tuple[int, str]]]) -> int:
    """Import statements (one `import a, b` is one)."""
    return sum(len({line for line, _ in found}) for found in imports.values())


def test_the_launch_side_imports_inside_functions_only_heavy_modules():
    offenders = [
        f"{path}:{line}: {module}"
        for path, imports in surreal_function_imports().items()
        if path.startswith(CHECKED)
        for line, module in imports
        if not is_heavy(module) and (path, module) not in ALLOWED
    ]
    assert offenders == [], (
        "move these imports to the top of their module (or, for an optional heavy dependency, "
        "list it in surreal.api.optional.HEAVY):\n" + "\n".join(offenders)
    )


def test_the_in_function_imports_of_surreal_stay_under_the_ratchet():
    imports = surreal_function_imports()
    total = _statements(imports)
    by_file = Counter({path: _statements({path: found}) for path, found in imports.items()})
    shown = "\n".join(f"  {n:3d} {path}" for path, n in by_file.most_common())
    assert total <= CEILING, (
        f"{total} imports inside functions, over the ceiling of {CEILING}; move the new ones to "
        f"the top of their module (HEAVY modules excepted: surreal.api.optional). By file:\n"
        f"{shown}"
    )


def test_an_import_inside_a_function_is_found_and_only_there():
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import numpy\n"
        "def f():\n"
        "    import json\n"
        "    if TYPE_CHECKING:\n"
        "        import pathlib\n"
        "    def g():\n"
        "        from torch import nn\n"
        "    return json\n"
        "class C:\n"
        "    def m(self):\n"
        "        from . import sibling\n"
    )
    found = function_imports(source)
    assert found == [(6, "json"), (10, "torch"), (14, ".")]
    assert [module for _, module in found if not is_heavy(module)] == ["json", "."]


def test_the_heavy_list_names_top_level_modules_once():
    assert len(set(HEAVY)) == len(HEAVY) and all("." not in name for name in HEAVY)
    assert {"torch", "gymnasium", "robosuite", "boto3", "wandb", "kubernetes", "docker"} <= set(
        HEAVY
    )
