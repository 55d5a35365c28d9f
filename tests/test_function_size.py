"""surreal reads as small named steps (issue 32): no function over 60 lines, and `surreal launch`
itself (the command a newcomer opens first) a short list of steps of at most 40 lines.

Lines are counted from the `def` line to the function's last line (decorators apart, docstring
and comments included), for every function and method in `surreal/`, nested ones too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 60
LAUNCH_LIMIT = 40


def long_functions(package: Path, limit: int) -> list[str]:
    """`path:line name (N lines)` of each function in `package` longer than `limit` lines."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    where = path.relative_to(package.parent)
                    found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_surreal_is_over_60_lines():
    assert long_functions(ROOT / "surreal", LIMIT) == []


def test_surreal_launch_is_a_short_list_of_steps():
    tree = ast.parse((ROOT / "surreal" / "cli.py").read_text())
    launch = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch")
    assert launch.end_lineno - launch.lineno + 1 <= LAUNCH_LIMIT


def test_the_counter_finds_a_long_function_and_a_long_method(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (package / "a.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    pass\n")
    method = body.replace("    ", "        ")
    (package / "b.py").write_text(f"class C:\n    def m(self):\n{method}\n")
    assert long_functions(package, LIMIT) == [
        f"pkg/a.py:1 long ({LIMIT + 1} lines)",
        f"pkg/b.py:2 m ({LIMIT + 1} lines)",
    ]
