"""docs/architecture.md's walk of one setting (PPO's batch, `--set` to the loss) stays true:
at most 8 hops, and every file and function it names exists where it says (issue 48)."""

from __future__ import annotations

import re

from tests.test_import_graph import ROOT

DOC = ROOT / "docs" / "architecture.md"


def _walk() -> str:
    text = DOC.read_text()
    start = text.index("## How one setting travels")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_the_batch_travels_in_at_most_eight_hops():
    hops = re.findall(r"^(\d+)\. ", _walk(), re.M)
    assert 1 <= len(hops) <= 8 and hops == [str(i + 1) for i in range(len(hops))]


def test_every_file_and_function_the_walk_names_exists():
    walk = _walk()
    named = re.findall(r"`((?:surreal|symphony|caraml)/[\w/]+\.py)(?::(\w+))?`", walk)
    assert len(named) >= 6
    for path, name in named:
        source = (ROOT / path).read_text()
        if name:
            assert re.search(rf"^\s*(?:def|class) {name}\b", source, re.M), f"{path}:{name}"
    for owner, method in re.findall(r"`(\w+)\.(\w+)(?:\(|`)", walk):
        if owner[0].isupper():  # Class.member: a method or field of a class in surreal
            hits = [
                p
                for p in (ROOT / "surreal").rglob("*.py")
                if re.search(rf"^class {owner}\b", p.read_text(), re.M)
                and re.search(rf"^\s+(?:def )?{method}\b", p.read_text(), re.M)
            ]
            assert hits, f"{owner}.{method}"
