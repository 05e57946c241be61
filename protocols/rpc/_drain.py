# -*- test-case-name: tests.protocols.rpc.test_drain,tests.protocols.rpc.test_drain_reconnecting -*-
"""Graceful drain: GOAWAY, then the calls in flight finish, then the connection closes.

Contract: either end may send GOAWAY (L{framing.rpc._wire}), carrying the
milliseconds it will still wait.  Then neither end starts a new call there
(C{callRemote} fails at once with L{GoingAway}, a L{DeadReferenceError}:
safe to send elsewhere); the sender answers every call it receives; the
receiver closes once no call and no object stream is in flight either
way.  Past the grace, the sender fails each running call with
L{DrainDeadlineExceeded} and closes, aborting L{ABORT_AFTER} seconds later
a peer that does not read: a drain ends within C{grace + ABORT_AFTER}.

Cost: nothing on the per-call path; a draining connection looks at its
call and stream counts every L{IDLE_POLL} seconds.

Design: docs/design/rpc-twisted.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred, gatherResults, succeed
from twisted.internet.error import ConnectionDone
from twisted.internet.task import LoopingCall

from framing.rpc._drain import OPEN, Drain, DrainDeadlineExceeded

from ._calls import reactorOf
from ._streams import ObjectStreams

IDLE_POLL = 0.01
"""Seconds between two looks at a draining connection's call counts."""

DEFAULT_GRACE = 30.0
"""Seconds a draining server waits for the calls in flight, by default."""

ABORT_AFTER = 1.0
"""
Seconds after the grace time for the last writes (the FAILs of the calls cut
short) to leave before the connection is aborted: a reading peer takes them
in milliseconds; one that does not read would otherwise hold the drain (and
the process's exit) until some other timeout.
"""


class ConnectionDrain:
    """
    The drain of one broker's connection (its C{drain} attribute; the
    handler of GOAWAY messages): the sans-IO L{framing.rpc._drain.Drain}
    (its states and rules) with the broker's timers, writes and close.

    @ivar rule: the L{framing.rpc._drain.Drain}: its C{state} and C{grace}.
    @ivar goneAway: called with the broker when the peer sends GOAWAY
        (L{protocols.rpc.ReconnectingClient} listens here).
    """

    def __init__(self, broker: Any, rule: Drain) -> None:
        """C{rule} is the connection's L{Drain} (its L{framing.rpc._connection.RpcConnection}'s C{drain})."""
        self._broker = broker
        self.rule = rule
        self.goneAway: list[Callable[[Any], object]] = []
        self._poll: LoopingCall | None = None
        self._deadline: Any = None
        self._abort: Any = None

    @property
    def draining(self) -> bool:
        """Whether either end sent GOAWAY on this connection."""
        return self.rule.draining

    def goAway(self, grace: float = DEFAULT_GRACE) -> Deferred[BaseException]:
        """
        Send GOAWAY: start no new call, answer the peer's calls for up to
        C{grace} seconds, then fail those still running with
        L{DrainDeadlineExceeded} and close.

        @return: the broker's L{whenDisconnected}.
        """
        broker = self._broker
        if broker is None:
            return succeed(ConnectionDone("closed before the drain"))
        lost: Deferred[BaseException] = broker.whenDisconnected()
        if self.rule.state is not OPEN or not broker.isConnected():
            return lost
        message = self.rule.send(grace)
        assert message is not None
        self._stopCalling()
        broker.sendObject(message)
        self._deadline = self._clock().callLater(grace, self._deadlinePassed)
        return lost

    def peerWentAway(self) -> None:
        """
        The peer's first GOAWAY came (L{framing.rpc._connection.Shell.goneAway}:
        the connection stopped this side's calls): tell the listeners, and
        close once nothing is in flight (L{Drain.closes}).
        """
        for listener in self.goneAway:
            listener(self._broker)
        self._closeWhenIdle()

    def connectionLost(self) -> None:
        """Stop the timers; forget the broker (nothing refers back to it once the connection is lost)."""
        if self._poll is not None and self._poll.running:
            self._poll.stop()
        for timer in (self._deadline, self._abort):
            if timer is not None and timer.active():
                timer.cancel()
        self._poll = self._deadline = self._abort = self._broker = None
        self.goneAway = []

    def _clock(self) -> Any:
        return reactorOf(self._broker.clock)

    def _stopCalling(self) -> None:
        """New calls fail with L{GoingAway}, none of them sent (L{framing.rpc._calltable.CallTable.stop})."""
        broker = self._broker
        broker.calls.stop(self.rule.refusal(broker.connection.peerName()))

    def _idle(self) -> bool:
        """Whether the connection closes now (L{Drain.closes}, asked with the broker's counts)."""
        broker = self._broker
        streams = sum(extension.streamCount for extension in broker.extensions if isinstance(extension, ObjectStreams))
        return self.rule.closes(broker.pendingCount, broker.runningCount, streams)

    def _closeWhenIdle(self) -> None:
        if self._idle():
            self._close()
            return
        self._poll = LoopingCall(self._checkIdle)
        self._poll.clock = self._clock()
        self._poll.start(IDLE_POLL, now=False)

    def _checkIdle(self) -> None:
        if self._idle():
            self._close()

    def _close(self) -> None:
        if self._poll is not None and self._poll.running:
            self._poll.stop()
        transport = self._broker.connection.transport
        if transport is not None:
            transport.loseConnection()

    def _deadlinePassed(self) -> None:
        self._deadline = None
        broker = self._broker
        grace = self.rule.grace or 0.0
        running = broker.runningCount
        if running:
            broker.connection.log.warn(
                "{peer}: drain deadline ({grace} s) passed with {running} calls still running; failing them",
                peer=broker.connection.peerName(),
                grace=grace,
                running=running,
            )
            text = f"the server's drain deadline ({grace:g} s) passed while this call still ran; it was cancelled"
            broker.incoming.abandonRunning(DrainDeadlineExceeded(text, grace))
        self._close()
        # loseConnection waits for every byte to be taken; a peer that does not read never takes them.
        self._abort = self._clock().callLater(ABORT_AFTER, self._abortLingering)

    def _abortLingering(self) -> None:
        """The grace and L{ABORT_AFTER} have passed and the connection is still open: abort it."""
        self._abort = None
        broker = self._broker
        transport = broker.connection.transport if broker is not None else None
        if transport is None:
            return
        broker.connection.log.warn(
            "{peer}: {pending} bytes still unsent {after} s after the drain deadline; aborting the connection",
            peer=broker.connection.peerName(),
            pending=getattr(transport, "pendingBytes", "?"),
            after=ABORT_AFTER,
        )
        transport.abortConnection()


def drainBrokers(brokers: Iterable[Any], grace: float = DEFAULT_GRACE) -> Deferred[None]:
    """
    Send GOAWAY on each of C{brokers} (L{ConnectionDrain.goAway}); fire once
    every one of their connections is closed (at most C{grace} seconds and
    the time to close).
    """
    lost = [broker.drain.goAway(grace) for broker in list(brokers)]
    if not lost:
        return succeed(None)
    done: Deferred[None] = gatherResults(lost).addCallback(lambda _: None)
    return done


async def drainPort(port: Any, factory: Any = None, grace: float = DEFAULT_GRACE) -> None:
    """
    Drain a listening RPC server: stop accepting connections on C{port},
    then drain every connection of C{factory} (a L{protocols.rpc.BrokerFactory},
    or a wrapper forwarding its C{brokers}; C{None}: the one C{port} serves,
    for the port C{rpc.serve} gives) as L{drainBrokers}.
    """
    if factory is None:
        factory = port.factory
    await port.stopListening()
    await drainBrokers(getattr(factory, "brokers", ()), grace)
