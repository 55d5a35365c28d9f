"""Evolution Strategies (Surreal-ES): a master and workers that exchange only seeds and returns."""

from surreal.algos.es.config import ESConfig
from surreal.algos.es.learner import ESLearner

__all__ = ["ESConfig", "ESLearner"]
