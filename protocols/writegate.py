"""WriteGate: the wrapped transport's word on when to write, for a coalescing transport.

Contract: a L{WriteGate} is the producer a L{protocols.CoalescingTransport}
registers with the transport it wraps, only while someone needs that
transport's pauses (a producer of the application's, a queued stream, or
back-pressure).  It records whether writing is paused and passes each
pause, resume and stop to its owner's callbacks.  It holds its owner only
weakly, so a connection never becomes a cycle that only the garbage
collector frees.  Each pause or resume costs one call to the owner.
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
    """

    def __init__(self, paused: Callable[[], None], resumed: Callable[[], None], stopped: Callable[[], None]) -> None:
        """
        @param paused: called when the wrapped transport pauses the gate.
        @param resumed: called when it resumes the gate (or, for a pull
            producer, asks for more).
        @param stopped: called when it stops the gate: the connection is gone.
        """
        # Weak: the owner holds its gate, and the callbacks are its bound methods.
        self._onPause = weakref.WeakMethod(paused)
        self._onResume = weakref.WeakMethod(resumed)
        self._onStop = weakref.WeakMethod(stopped)
        self.mode: str | None = None
        self.paused = False

    def __repr__(self) -> str:
        return f"<WriteGate mode={self.mode} paused={self.paused}>"

    def switch(self, transport: Any, mode: str | None) -> None:
        """
        Register with C{transport} as a producer of C{mode} (L{PUSH} or
        L{PULL}), or unregister for C{None}; nothing is done if the gate is
        already registered that way.  A change leaves the gate unpaused.
        """
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
        """The wrapped transport's buffer is full: stop writing."""
        self.paused = True
        _call(self._onPause)

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
