"""The processes of a run: actor, buffer, learner, parameter server, evaluator, metrics sink.

Each runs as `python -m surreal component ROLE RUN_DIR [--index I]` under symphony and starts in
`component.run_component`; replay shards, their proxies and policy workers live here too.
"""
