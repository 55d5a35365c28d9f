"""caraml: fast ZeroMQ + Apache Arrow messaging and a shared-memory DataFetcher."""

from caraml.auth import CurveClient, CurveKeys, CurveServer, generate_keys
from caraml.curve_env import load_keys, write_keys
from caraml.errors import (
    CaramlError,
    MalformedMessage,
    MessageTooLarge,
    RemoteError,
    RequestTimeout,
    SlotTooSmall,
    WorkerDied,
)
from caraml.fetcher import DataFetcher, Handle
from caraml.proxy import Proxy
from caraml.proxy_process import ProxyProcess
from caraml.pub_sub import Publisher, Subscriber
from caraml.push_pull import Puller, Pusher
from caraml.reader import deserialize
from caraml.req_rep import Client, Later, Server
from caraml.shm import SlotPool
from caraml.wire import serialize

__version__ = "0.1.0"

__all__ = [
    "CaramlError",
    "Client",
    "CurveClient",
    "CurveKeys",
    "CurveServer",
    "DataFetcher",
    "Handle",
    "Later",
    "MalformedMessage",
    "MessageTooLarge",
    "Proxy",
    "ProxyProcess",
    "Publisher",
    "Puller",
    "Pusher",
    "RemoteError",
    "RequestTimeout",
    "Server",
    "SlotPool",
    "SlotTooSmall",
    "Subscriber",
    "WorkerDied",
    "deserialize",
    "generate_keys",
    "load_keys",
    "serialize",
    "write_keys",
]
