# -*- test-case-name: tests.protocols.bulk.test_scheduling,tests.protocols.bulk.test_owners -*-
"""Which outgoing stream sends next, and when the transport can take it.

Contract: a L{FrameScheduler} serves the ready streams of one connection
round-robin, one data frame (one transport write) per stream per round,
and only while the transport is not paused: while streams are announced
it is the transport's push producer.  A stream waiting for credit is not
in the ready queue, so it costs nothing per round.  Waking a stream is
O(1) and idempotent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from ._interfaces import ISendingStream


@implementer(IPushProducer)
class FrameScheduler:
    """
    The ready queue of one connection's outgoing streams, and the
    transport's push producer while it has any.

    @ivar running: whether the connection is up (nothing is sent otherwise).
    """

    def __init__(self, transport: Callable[[], Any], clock: Any) -> None:
        """
        @param transport: gives the connection's transport.
        @param clock: the C{IReactorTime} of end-of-turn sends.
        """
        self._transport = transport
        self._clock = clock
        self.running = False
        self._ready: deque[ISendingStream] = deque()
        self._queued: set[int] = set()
        self._pumping = False
        self._pumpCall: Any = None
        self._writePaused = False
        self._registered = False

    def start(self) -> None:
        """The connection is up."""
        self.running = True

    def stop(self) -> None:
        """The connection is gone: forget every stream, send nothing more."""
        self.running = False
        if self._pumpCall is not None and self._pumpCall.active():
            self._pumpCall.cancel()
        self._pumpCall = None
        self._ready.clear()
        self._queued.clear()
        self._registered = False

    def wake(self, stream: ISendingStream) -> None:
        """C{stream} may be able to send: queue it and send what can be sent now."""
        self._enqueue(stream)
        self.pump()

    def wakeSoon(self, stream: ISendingStream) -> None:
        """As L{wake}, but at the end of this reactor turn, so that writes made in this turn share frames."""
        self._enqueue(stream)
        if self._pumpCall is None and self.running:
            self._pumpCall = self._clock.callLater(0, self._pumpLater)

    def _enqueue(self, stream: ISendingStream) -> None:
        key = id(stream)
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(stream)

    def _pumpLater(self) -> None:
        self._pumpCall = None
        self.pump()

    def pump(self) -> None:
        """Send frames round-robin, one per ready stream per round, while the transport takes them."""
        if self._pumping or not self.running:
            return
        self._pumping = True
        try:
            self._pumpFrames()
        finally:
            self._pumping = False

    def _pumpFrames(self) -> None:
        ready, queued = self._ready, self._queued
        while ready and not self._writePaused:
            if self._transport().disconnecting:
                self.unregister()
                return
            stream = ready.popleft()
            if stream.sendOne():
                ready.append(stream)
            else:
                queued.discard(id(stream))

    # -- IPushProducer: the transport's flow control --------------------------------

    def register(self) -> None:
        """Become the transport's producer (streams were announced), unless another one is."""
        transport = self._transport()
        if self._registered or not self.running or transport.disconnecting or transport.producer is not None:
            return
        self._registered = True
        self._writePaused = False
        transport.registerProducer(self, True)

    def unregister(self) -> None:
        """Stop being the transport's producer (no stream is left)."""
        if self._registered:
            self._registered = False
            self._writePaused = False
            transport = self._transport()
            if transport.producer is self:
                transport.unregisterProducer()

    def pauseProducing(self) -> None:
        self._writePaused = True

    def resumeProducing(self) -> None:
        self._writePaused = False
        if self._transport().disconnecting:
            # A registered producer keeps a closing TCP transport open.
            self.unregister()
            return
        self.pump()

    def stopProducing(self) -> None:
        self._registered = False
        self._writePaused = True
