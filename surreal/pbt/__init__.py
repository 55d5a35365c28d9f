"""Population-based training (Jaderberg et al. 2017): N members of one algorithm in one experiment.

    surreal launch ppo --env gym:CartPole-v1 --population 4 --set pbt.interval=10000

Python API: `plan_population(surreal.launch.experiment.plan(...), make_config(4, overrides))` gives a
`PopulationPlan`; `build_experiment` its symphony Experiment; `run_population` launches and
watches it. The exploit/explore step itself is `exploit_explore` (pure, seeded). See docs/pbt.md.
"""

from surreal.pbt.config import PBTConfig, make_config
from surreal.pbt.exploit import Decision, MemberScore, exploit_explore
from surreal.pbt.plan import PopulationPlan, build_experiment, create_population, plan_population
from surreal.pbt.run import run_population
from surreal.pbt.space import Hyperparameter, parse_space
from surreal.pbt.store import is_population

__all__ = [
    "Decision",
    "Hyperparameter",
    "MemberScore",
    "PBTConfig",
    "PopulationPlan",
    "build_experiment",
    "create_population",
    "exploit_explore",
    "is_population",
    "make_config",
    "parse_space",
    "plan_population",
    "run_population",
]
