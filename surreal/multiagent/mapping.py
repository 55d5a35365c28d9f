"""Which policy each agent runs: `algo.policy_mapping`.

    shared              every agent runs one policy, `shared` (parameter sharing; the default)
    per-agent           every agent its own policy, named after the agent (`agent_0` -> `agent0`)
    path/to/file.py:fn  fn(agent_id: str) -> policy name (also `package.module:fn`)

Each policy gets its own learner, buffer, parameter server and metrics (`RUN/policies/<name>/`).
Policy names are lower-case letters and digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from surreal.api.registry import UnknownAlgorithm, load_class

NAME = re.compile(r"^[a-z0-9]{1,20}$")


def _policy_name(agent: str) -> str:
    return re.sub(r"[^a-z0-9]", "", agent.lower())[:20] or "agent"


def mapping_function(spec: str) -> Callable[[str], str]:
    """The agent -> policy function that `algo.policy_mapping` names.

    Raises:
        ValueError: an unknown mode or a reference that does not load (saying what to write).
    """
    if spec == "shared":
        return lambda agent: "shared"
    if spec == "per-agent":
        return _policy_name
    if ":" not in spec:
        raise ValueError(
            f"algo.policy_mapping={spec!r}: use shared, per-agent, or path/to/file.py:function"
        )
    try:
        fn = load_class(spec, "algo.policy_mapping")
    except UnknownAlgorithm as err:
        raise ValueError(str(err)) from None
    if not callable(fn):
        raise ValueError(f"algo.policy_mapping={spec}: not a function of the agent id")
    return fn


def policy_groups(spec: str, agents: list[str]) -> dict[str, list[str]]:
    """policy -> its agents (in the env's agent order), policies in order of first agent.

    Raises:
        ValueError: a policy name that is not lower-case letters and digits.
    """
    fn = mapping_function(spec)
    groups: dict[str, list[str]] = {}
    for agent in agents:
        name = fn(agent)
        if not isinstance(name, str) or not NAME.match(name):
            raise ValueError(
                f"algo.policy_mapping={spec} maps agent {agent!r} to {name!r}: policy names "
                "are 1-20 lower-case letters and digits"
            )
        groups.setdefault(name, []).append(agent)
    return groups
