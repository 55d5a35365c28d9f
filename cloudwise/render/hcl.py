"""A tiny HCL writer whose output is already in `terraform fmt` form (pure, no terraform needed)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Union

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class Raw(str):
    """An HCL expression written verbatim (a reference such as `aws_iam_role.node.arn`)."""


@dataclass
class Block:
    """An HCL block: `type "label" ... { body }`; body items are `(name, value)` pairs or Blocks."""

    type: str
    labels: list[str] = field(default_factory=list)
    body: list[Union[tuple[str, Any], Block]] = field(default_factory=list)

    def add(self, *items: Union[tuple[str, Any], Block]) -> Block:
        """Append attributes or nested blocks; returns self."""
        self.body.extend(items)
        return self


def block(type_: str, *labels: str, attrs: dict[str, Any] | None = None) -> Block:
    """A Block with attributes taken, in order, from `attrs` (None values are left out)."""
    body: list[Union[tuple[str, Any], Block]] = [
        (k, v) for k, v in (attrs or {}).items() if v is not None
    ]
    return Block(type_, list(labels), body)


def string(text: str) -> str:
    """An HCL string literal (interpolation sequences escaped)."""
    return json.dumps(text).replace("${", "$${").replace("%{", "%%{")


def value(v: Any, indent: int) -> str:
    """Render a value; maps with entries span lines, everything else stays on one line."""
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return json.dumps(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(x, indent) for x in v) + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        pad = "  " * (indent + 1)
        keys = [key(k) for k in v]
        width = max(len(k) for k in keys)
        lines = [
            f"{pad}{k.ljust(width)} = {value(x, indent + 1)}"
            for k, x in zip(keys, v.values(), strict=True)
        ]
        return "{\n" + "\n".join(lines) + "\n" + "  " * indent + "}"
    raise TypeError(f"cannot write {type(v).__name__} as HCL")


def key(k: str) -> str:
    """A map key: bare when it is an identifier, quoted otherwise."""
    return k if _IDENT.match(k) and "-" not in k else string(k)


def _lines(b: Block, indent: int) -> list[str]:
    pad = "  " * indent
    head = " ".join([b.type] + [string(label) for label in b.labels])
    if not b.body:
        return [f"{pad}{head} {{}}"]
    out = [f"{pad}{head} {{"]
    run: list[tuple[str, str]] = []

    def flush() -> None:
        width = max((len(n) for n, _ in run), default=0)
        out.extend(f"{pad}  {n.ljust(width)} = {text}" for n, text in run)
        run.clear()

    for item in b.body:
        if isinstance(item, Block):
            flush()
            out.extend(_lines(item, indent + 1))
            continue
        name, v = item
        text = value(v, indent + 1)
        if "\n" in text:
            flush()
            out.append(f"{pad}  {name} = {text}")
        else:
            run.append((name, text))
    flush()
    out.append(f"{pad}}}")
    return out


def render(blocks: list[Block], header: str = "") -> str:
    """The HCL text of top-level blocks, one blank line between them, after an optional comment."""
    parts = []
    if header:
        parts.append("\n".join(f"# {line}".rstrip() for line in header.splitlines()))
    parts.extend("\n".join(_lines(b, 0)) for b in blocks)
    return "\n\n".join(parts) + "\n"
