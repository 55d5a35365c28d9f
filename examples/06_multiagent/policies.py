"""An agent-to-policy mapping of your own: `--set algo.policy_mapping=policies.py:by_agent`.

The function gets an agent id of the environment and returns the name of the policy that agent
runs (1-20 lower-case letters and digits). Agents mapped to one name share its parameters, its
learner, buffer and parameter server; each name is a stream of its own (`RUN/policies/<name>/`).
"""


def by_agent(agent: str) -> str:
    """`left` -> `l`, `right` -> `r` (ma:pair); any other agent: the shared policy `team`."""
    return {"left": "l", "right": "r"}.get(agent, "team")
