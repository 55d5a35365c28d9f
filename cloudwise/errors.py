"""Errors cloudwise raises; each message says what to do next."""


class CloudwiseError(Exception):
    """Base class of every cloudwise error."""


class SpecError(CloudwiseError):
    """A cluster or node-pool spec is invalid (raised before terraform runs)."""


class NoMachineFits(SpecError):
    """No machine type in the provider's catalog satisfies a node-pool request."""


class TerraformError(CloudwiseError):
    """terraform exited with an error or is not installed."""
