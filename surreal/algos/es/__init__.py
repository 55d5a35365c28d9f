"""Evolution Strategies (Surreal-ES): a master and workers that exchange only seeds and returns."""

from surreal.algos.es.config import ESConfig

__all__ = ["ESConfig", "ESLearner"]


def __getattr__(name: str):
    """`ESLearner` (torch) is imported on first use, so the config imports light."""
    if name == "ESLearner":
        from surreal.algos.es.learner import ESLearner

        return ESLearner
    raise AttributeError(f"module 'surreal.algos.es' has no attribute {name!r}")
