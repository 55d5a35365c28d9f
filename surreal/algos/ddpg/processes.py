"""Entry point of every DDPG process: `python -m surreal.algos.ddpg.processes ROLE RUN_DIR --index I`."""

from __future__ import annotations

import argparse
import importlib

# role -> "module:function(run_dir, index)"
_MAINS = {
    "actor": "surreal.algos.ddpg.actor:main",
    "learner": "surreal.algos.ddpg.learner_loop:main",
    "replay-proxy": "surreal.components.sharding:replay_proxy_main",
    "replay-shard": "surreal.components.replay_shard:main",
    "param-proxy": "surreal.components.sharding:param_proxy_main",
    "param-shard": "surreal.components.sharding:param_shard_main",
}


def main(argv: list[str] | None = None) -> None:
    """Run one DDPG component until it is stopped (SIGTERM) or done."""
    parser = argparse.ArgumentParser(prog="python -m surreal.algos.ddpg.processes")
    parser.add_argument("role", choices=sorted(_MAINS))
    parser.add_argument("run_dir")
    parser.add_argument("--index", type=int, default=0)
    args = parser.parse_args(argv)
    module, func = _MAINS[args.role].split(":")
    getattr(importlib.import_module(module), func)(args.run_dir, args.index)


if __name__ == "__main__":
    main()
