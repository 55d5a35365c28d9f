"""Exceptions raised by caraml; every one derives from CaramlError."""


class CaramlError(Exception):
    """Base class of every error caraml raises."""


class MalformedMessage(CaramlError):
    """A received message is truncated, garbled, foreign or unsupported."""


class MessageTooLarge(MalformedMessage):
    """A message is larger than the configured maximum message size."""


class RequestTimeout(CaramlError):
    """No reply (or no message) arrived within the timeout."""


class RemoteError(CaramlError):
    """The server's handler raised, or the server rejected the request; the text says why."""


class WorkerDied(CaramlError):
    """A DataFetcher worker process failed or exited unexpectedly."""


class SlotTooSmall(CaramlError):
    """A batch does not fit into one shared-memory slot."""
