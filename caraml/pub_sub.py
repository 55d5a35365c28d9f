"""Publish-subscribe with exact-match string topics.

Delivery semantics: a Publisher sends each message to every connected subscriber whose topic list
contains the message's topic exactly ("param" does not match "params"); ``topics=None`` receives
everything. PUB/SUB loses messages: a subscriber gets nothing published before its connection and
subscription are in place (do a readiness handshake), and a slow subscriber drops messages once its
high-water mark is reached. Order is preserved per publisher.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import zmq

from caraml.auth import Curve
from caraml.errors import MalformedMessage
from caraml.reader import deserialize
from caraml.sockets import Endpoint, recv_frames, send_frames
from caraml.wire import serialize

_END = b"\x00"  # topic terminator: turns ZeroMQ's prefix matching into exact matching


def _topic_frame(topic: str) -> bytes:
    return topic.encode() + _END


class Publisher(Endpoint):
    """Broadcasts objects under a topic (``bind=True``: subscribers connect to it)."""

    def __init__(
        self,
        address: str,
        bind: bool = True,
        *,
        hwm: int | None = None,
        max_size: int | None = None,
        curve: Curve | None = None,
    ) -> None:
        super().__init__(zmq.PUB, address, bind, max_size=max_size, curve=curve, hwm=hwm)

    def publish(self, topic: str, obj: Any) -> None:
        """Send ``obj`` to every subscriber of ``topic``; never blocks (slow peers drop)."""
        send_frames(self._sock, [_topic_frame(topic), *serialize(obj)])


class Subscriber(Endpoint):
    """Receives ``(topic, obj)`` for the subscribed topics (``bind=False``: connects)."""

    def __init__(
        self,
        address: str,
        topics: Iterable[str] | None = None,
        bind: bool = False,
        *,
        hwm: int | None = None,
        max_size: int | None = None,
        curve: Curve | None = None,
    ) -> None:
        super().__init__(zmq.SUB, address, bind, max_size=max_size, curve=curve, hwm=hwm)
        self.topics = None if topics is None else list(topics)
        if self.topics is None:
            self._sock.subscribe(b"")
        for topic in self.topics or ():
            self._sock.subscribe(_topic_frame(topic))

    def recv(self, timeout: float | None = None) -> tuple[str, Any]:
        """Return the next ``(topic, obj)``.

        Raises:
            RequestTimeout: nothing arrived within ``timeout`` seconds.
            MalformedMessage: a garbled or foreign message (counted and dropped).
        """
        self._poll(timeout)
        frames = recv_frames(self._sock)
        try:
            topic = frames[0]
            if len(frames) < 2 or not topic.endswith(_END):
                raise MalformedMessage(
                    "not a caraml publication (no topic frame); publish with caraml.Publisher"
                )
            return topic[:-1].decode(errors="replace"), deserialize(frames[1:], self.max_size)
        except MalformedMessage as exc:
            self._count_malformed(exc)
            raise
