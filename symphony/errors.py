"""The exceptions symphony raises; every message says what to do next."""


class SymphonyError(Exception):
    """Base class of every error symphony raises on purpose."""


class SpecError(SymphonyError):
    """An experiment declaration is invalid (raised before anything starts)."""


class BackendError(SymphonyError):
    """A backend could not do what was asked (unknown backend, missing tool, launch failure)."""


class ExperimentNotFound(SymphonyError):
    """No experiment (or no unique one) matches a name or prefix."""


class AddressError(SymphonyError):
    """A process asked for the address of a service it did not declare."""


class LaunchRefused(BackendError):
    """The backend already holds something under this name that this launch did not create.

    Raised before the launch created anything; the launcher then removes only its own record.
    """


class NotOwner(SymphonyError):
    """Another user owns the experiment; `--force` overrides (see `symphony.ownership`)."""
