"""Multi-agent training: PettingZoo parallel envs, agents mapped to policies, MAPPO, self-play.

    surreal launch mappo --env pettingzoo:mpe.simple_spread_v3 --set algo.central_value=true
    surreal launch mappo --env ma:nim --set algo.self_play=true

Modules: `envs` (env ids, `JointEnv`, `register_multiagent_env`), `games` (small built-in games),
`mapping` (agent -> policy), `policy_runs` (per-policy run folders), `topology` (the experiment),
`rollout` (routing steps to policies), `actor`, `league`, `services` (processes), `selfplay`
(opponent pool), `central` (centralized value network), `play` (evaluation), `learner`.
See docs/multiagent.md.
"""

from surreal.envs.multiagent import register_multiagent_env

__all__ = ["register_multiagent_env"]
