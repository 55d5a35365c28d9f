"""Push-pull: a pipeline where each message goes to exactly one puller.

Delivery semantics: a Pusher fair-queues (round-robins) messages over the connected pullers and a
Puller fair-queues over the connected pushers. Messages from one pusher arrive in the order they
were sent. When every peer's queue is full (high-water mark) ``push`` blocks: back-pressure, not
loss. Messages queued for a peer that disconnects are lost, and LINGER=0 drops unsent messages on
close.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import zmq

from caraml.auth import Curve
from caraml.errors import MalformedMessage, RequestTimeout
from caraml.reader import deserialize, fast_single
from caraml.sockets import Endpoint, recv_parts, send_frames
from caraml.wire import INLINE_MAX, serialize, small_frame

_RCVMORE = zmq.RCVMORE


class Pusher(Endpoint):
    """Sends objects to pullers (``bind=False``: connects to a binding Puller)."""

    def __init__(
        self,
        address: str,
        bind: bool = False,
        *,
        hwm: int | None = None,
        max_size: int | None = None,
        curve: Curve | None = None,
    ) -> None:
        super().__init__(zmq.PUSH, address, bind, max_size=max_size, curve=curve, hwm=hwm)

    def push(self, obj: Any, timeout: float | None = None) -> None:
        """Serialize ``obj`` and send it.

        Args:
            obj: any serializable object.
            timeout: seconds to wait while every queue is full (a connecting Pusher queues up
                to ``hwm`` messages before its puller is there; a binding one has no queue
                until a puller connects); None waits as long as that lasts (back-pressure).

        Raises:
            RequestTimeout: the message could not be queued within ``timeout``.
        """
        if timeout is not None and not self._sock.poll(int(timeout * 1000), zmq.POLLOUT):
            raise RequestTimeout(
                f"could not push to {self.address} within {timeout} s: no "
                "puller is connected or all queues are full"
            )
        if type(obj) is np.ndarray and obj.nbytes <= INLINE_MAX:
            self._sock.send(small_frame(obj))  # one frame, no send_multipart overhead
            return
        send_frames(self._sock, serialize(obj))


class Puller(Endpoint):
    """Receives objects from pushers (``bind=True``: pushers connect to it)."""

    def __init__(
        self,
        address: str,
        bind: bool = True,
        *,
        hwm: int | None = None,
        max_size: int | None = None,
        curve: Curve | None = None,
    ) -> None:
        super().__init__(zmq.PULL, address, bind, max_size=max_size, curve=curve, hwm=hwm)

    def pull(self, timeout: float | None = None) -> Any:
        """Return the next object; arrays are read-only views of the received frames.

        Args:
            timeout: seconds to wait, or None to wait forever.

        Raises:
            RequestTimeout: nothing arrived within ``timeout``.
            MalformedMessage: the message was not a valid caraml message. It is dropped whole
                (every part of a multipart message is consumed, none is decoded) and counted in
                ``self.malformed``; call ``pull`` again for the next one.
        """
        if timeout is not None:
            self._poll(timeout)
        sock = self._sock
        head = sock.recv()
        # Always ask whether parts follow: a frame the header says is the whole message may be
        # the first part of a garbled multipart one, which is dropped whole (never decoded in part).
        if not sock.getsockopt(_RCVMORE):
            if len(head) <= self.max_size:
                arr = fast_single(head)  # a repeated small array: no further parsing
                if arr is not None:
                    return arr
            frames = [head]
        else:
            frames = recv_parts(sock, head)
        try:
            return deserialize(frames, self.max_size)
        except MalformedMessage as exc:
            self._count_malformed(exc)
            raise
