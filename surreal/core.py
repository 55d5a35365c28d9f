"""The interfaces' old address: `from surreal.core import Learner, LearnerConfig, Policy` keeps
working. They live in `surreal.api` (docs/architecture.md); import them from there."""

from surreal.api.core import Actor, Batch, Learner, LearnerConfig, Params, Policy
from surreal.runtime.wire.parameter_client import ParameterClient

__all__ = ["Actor", "Batch", "Learner", "LearnerConfig", "ParameterClient", "Params", "Policy"]
