"""docs/recipes.md's defaults are what `surreal launch ALGO --env ENV --dry-run` uses: each row
of its defaults list is planned as a dry run and every stated value compared (issue 51 item 5:
the docs once stated PPO's classic defaults wrong)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from surreal.api.config import get_value
from surreal.launch import experiment as launching

DOC = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
BLOCK = re.search(r"<!-- defaults: begin -->\n(.*?)<!-- defaults: end -->", DOC.read_text(), re.S)
ROWS = [line[2:] for line in BLOCK.group(1).splitlines() if line.startswith("- ")]


def _parse(row: str) -> tuple[str, str, list[str], dict[str, object]]:
    head, _, body = row.partition(": ")
    algo, _, env_part = head.partition(", ")
    env, *flags = env_part.split(" --set ")
    values = {}
    for item in body.split(", "):
        key, _, text = item.partition("=")
        values[key] = json.loads(text)
    return algo, env, flags, values


@pytest.mark.parametrize("row", ROWS, ids=[r.split(":")[0] + r.split(":")[1][:30] for r in ROWS])
def test_the_documented_defaults_are_what_a_dry_run_uses(row, tmp_path):
    algo, env, flags, values = _parse(row)
    config = launching.plan(
        algo, env=env, overrides=tuple(flags), folder=str(tmp_path), dry_run=True
    ).config
    for key, want in values.items():
        got = get_value(config, key)
        assert got == want, (
            f"docs/recipes.md says {key}={want} for {algo} on {env}; --dry-run: {got}"
        )


def test_the_list_covers_every_family_the_doc_names():
    assert len(ROWS) >= 7
    assert {r.split(",")[0] for r in ROWS} >= {"ppo", "td3", "sac", "dqn"}
