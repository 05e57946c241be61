# -*- test-case-name: tests.protocols.test_coalescing_parts,tests.protocols.test_flusher -*-
"""WriteGate: the wrapped transport's word on when to write, passed on to the application's producer.

Contract: a L{WriteGate} is the producer a L{protocols.CoalescingTransport}
registers with the transport it wraps, only while someone needs that
transport's pauses (the application's producer, a queued stream, or
back-pressure).  It records whether writing is paused, pauses the
application's push producer with it, and tells its owner when writing may
go on and when the connection is gone.  It holds its owner only weakly, so
a connection never becomes a cycle that only the garbage collector frees.
Each pause or resume costs one call to the producer and one to the owner.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

# How the gate is registered with the wrapped transport (None: not at all).
PUSH = "push"
PULL = "pull"


@implementer(IPushProducer)
class WriteGate:
    """
    What a coalescing transport registers with the wrapped transport as
    I{its} producer.  It is a separate object because the coalescing
    transport's own C{pauseProducing} means "stop reading", as on every
    Twisted transport, while the wrapped transport's C{pauseProducing} on
    its producer means "stop writing".

    @ivar mode: how the gate is registered with the wrapped transport:
        L{PUSH}, L{PULL}, or C{None} while it is not registered.
    @ivar paused: C{True} while the wrapped transport has asked its producer
        to pause (its send buffer is full), or, registered as a pull
        producer, until it asks for more after a L{unitWritten}.
    @ivar producer: the application's producer (see L{attach}), or C{None}.
    @ivar streaming: whether L{producer} is a push producer.
    """

    def __init__(self, resumed: Callable[[], None], stopped: Callable[[], None]) -> None:
        """
        @param resumed: called when the wrapped transport resumes the gate
            (or, for a pull producer, asks for more).
        @param stopped: called when it stops the gate: the connection is gone.
        """
        # Weak: the owner holds its gate, and the callbacks are its bound methods.
        self._onResume = weakref.WeakMethod(resumed)
        self._onStop = weakref.WeakMethod(stopped)
        self.mode: str | None = None
        self.paused = False
        self.producer: Any = None
        self.streaming = False

    def __repr__(self) -> str:
        return f"<WriteGate mode={self.mode} paused={self.paused} producer={self.producer!r}>"

    def attach(self, producer: Any, streaming: bool) -> None:
        """
        Pass the wrapped transport's pauses on to C{producer}: a push
        producer (C{streaming} true) is paused with the gate; either kind is
        asked for more through L{resumeProducer}.

        @raise RuntimeError: if a producer is attached already.
        """
        if self.producer is not None:
            raise RuntimeError(f"Cannot register producer {producer!r}: {self.producer!r} was never unregistered")
        self.producer, self.streaming = producer, bool(streaming)

    def detach(self) -> Any:
        """Forget the application's producer; return it (or C{None})."""
        producer, self.producer, self.streaming = self.producer, None, False
        return producer

    def resumeProducer(self) -> bool:
        """
        Ask the application's producer, if any, for more.

        @return: whether it is a pull producer, whose writes the caller then flushes.
        """
        if self.producer is None:
            return False
        self.producer.resumeProducing()
        return not self.streaming

    def switch(self, transport: Any, needed: bool) -> None:
        """
        Be registered with C{transport} as the application's producer needs
        (push or pull), else as a push producer if C{needed} (by a queued
        stream or back-pressure), else not at all.  A change leaves the gate
        unpaused.
        """
        if self.producer is not None:
            mode: str | None = PUSH if self.streaming else PULL
        else:
            mode = PUSH if needed else None
        if mode == self.mode:
            return
        if self.mode is not None:
            self.mode = None
            transport.unregisterProducer()
        self.paused = False
        if mode is not None:
            self.mode = mode
            transport.registerProducer(self, mode == PUSH)

    def unitWritten(self) -> None:
        """One unit of a stream was written: a pull consumer asks for each next one by calling C{resumeProducing}."""
        if self.mode == PULL:
            self.paused = True

    def pauseProducing(self) -> None:
        """The wrapped transport's buffer is full: stop writing, and pause a push producer."""
        self.paused = True
        if self.producer is not None and self.streaming:
            self.producer.pauseProducing()

    def resumeProducing(self) -> None:
        """The wrapped transport wants more."""
        self.paused = False
        _call(self._onResume)

    def stopProducing(self) -> None:
        """The wrapped transport is gone, and has already forgotten the gate."""
        self.forget()
        _call(self._onStop)

    def forget(self) -> None:
        """The wrapped transport is gone and has forgotten its producer: count the gate unregistered."""
        self.mode = None


def _call(reference: weakref.WeakMethod[Callable[[], None]]) -> None:
    callback = reference()
    if callback is not None:
        callback()
