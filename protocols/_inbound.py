# -*- test-case-name: tests.protocols.rpc.test_served_call -*-
"""Inbound: a connection's reads, through its decoder, to its receiver.

Contract: each read goes once through the decoder and each object it
completes to the receiver, in stream order, with the transport held for
the read so everything sent meanwhile shares one write.  While reading is
paused (by the application or by send back-pressure) reads are held
undecoded in a L{HeldInput}, bounded by C{Limits.max_buffered_bytes}, and
caught up in order when it resumes.  A L{ProtocolError} delivers what the
same read completed before the break, then drops the connection.  Once
stopped (the connection dropped) it delivers nothing more, for good.  O(1)
per read plus one call per object.

It is given its parts, not the protocol: the receiver, the observers and
the pings when it is made, the decoder, transport and ledger when the
connection is (L{Inbound.connect}), and two calls back into the protocol
(drop the connection; reading stopped or started for back-pressure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from framing import Decoder, ProtocolError, Violation
from framing._errors import BufferLimitExceeded
from framing._ledger import Ledger

from ._heldinput import NOTHING_HELD, HeldInput
from ._pings import Pings

HELD_READS = "held-reads"
"""The ledger account of the reads a paused connection keeps undecoded (L{HeldInput}, capped by max_buffered_bytes)."""


class Inbound:
    """
    The receive side of one L{protocols.TokenProtocol}.

    @ivar receiver: the L{protocols._interfaces.IObjectReceiver} that gets
        what is decoded (the protocol's C{receiver}, which is this: a login
        hands the connection on to the broker by setting it).
    @ivar observers: the connection's L{IConnectionObserver}s (its list, shared).
    @ivar paused: whether delivery is paused (always, once stopped).
    @ivar stopped: whether the connection was dropped: nothing more is held or delivered.
    @ivar controlBytesReceived: bytes of PING and PONG tokens received so far.
    @ivar held: the L{HeldInput} kept while paused.
    @ivar decoder: the connection's L{Decoder} (given by L{connect}).
    @ivar transport: the connection's L{protocols.CoalescingTransport} (given by L{connect}).
    @ivar ledger: the connection's L{Ledger} (given by L{connect}).
    """

    decoder: Decoder
    transport: Any
    ledger: Ledger

    def __init__(
        self,
        receiver: Any,
        observers: list[Any],
        pings: Pings,
        drop: Callable[[ProtocolError], object],
        backlogChanged: Callable[[bool], object],
    ) -> None:
        """
        @param receiver: the first receiver.
        @param observers: the connection's observers (added to later by the protocol).
        @param pings: the connection's L{Pings}, which answers the PINGs and takes the PONGs read.
        @param drop: drops the connection for a L{ProtocolError} (the protocol's C{failConnection}).
        @param backlogChanged: told C{True}/C{False} when reading stops/starts because too much
            waits to be sent (the protocol's C{sendBacklogChanged}).
        """
        self.receiver = receiver
        self.observers = observers
        self.paused = False
        self.stopped = False
        self.controlBytesReceived = 0
        self.held = HeldInput()
        self._pings = pings
        self._drop = drop
        self._backlogChanged = backlogChanged
        self._trace: Callable[[bytes], None] | None = None
        self._inRead = False
        self._sendBacklogged = False

    def connect(
        self, decoder: Decoder, transport: Any, ledger: Ledger, traceReceived: Callable[[bytes], None] | None = None
    ) -> None:
        """
        The connection is made: read through C{decoder}, hold C{transport}
        per read, charge C{ledger}; give each read to C{traceReceived} first
        if tracing (L{protocols._tracing}).
        """
        self.decoder = decoder
        self.transport = transport
        self.ledger = ledger
        self._trace = traceReceived

    def dataReceived(self, data: bytes) -> None:
        """Decode C{data} and deliver what it completes, unless reading is paused."""
        if self._trace is not None:
            self._trace(data)
        if self.paused or self.held.count:
            for observer in self.observers:
                observer.dataArrived(len(data))
            if not self.stopped:
                self._hold(data)
            return
        self._inRead = True
        # Everything sent while this read is handled shares one write.
        transport = self.transport
        transport.hold()
        try:
            self._decode(data, True)  # (arrived: positional, so that 3.11 specializes the call)
        finally:
            self._inRead = False
            transport.release()

    def _decode(self, data: bytes, arrived: bool = False) -> None:
        """
        Decode C{data} and deliver what it completes; C{arrived}: it was just
        read (observers are told with one L{IConnectionObserver.dataRead}),
        else it was held (they were told of its arrival, and now of its decoding).
        """
        decoder = self.decoder
        try:
            results = decoder.feed(data)
        except ProtocolError as error:
            if arrived:
                for observer in self.observers:
                    observer.dataArrived(len(data))
            # What the same bytes completed before the break was whole and
            # valid: deliver it, then drop the connection.
            self.dispatch(getattr(error, "results", ()))
            self._drop(error)
            return
        controlBytes = self._controlEvents() if decoder.control_events else 0
        receiver = self.receiver
        # (counted by hand: an enumerate object and its pairs cost more, and a read completes one object mostly)
        delivered = 0
        for obj in results:
            if self.paused:
                self.held.holdObjects(results[delivered:])
                break
            if isinstance(obj, Violation):
                receiver.objectRefused(obj)
            else:
                receiver.objectReceived(obj)
            delivered += 1
        observers = self.observers
        if observers:
            # (the objects this read completed are the decoder's count of them: the results, refusals included)
            length, done = len(data), len(results)
            for observer in observers:
                if arrived:
                    observer.dataRead(length, done, controlBytes)
                else:
                    observer.dataDecoded(length, done, controlBytes)

    def dispatch(self, results: Iterable[Any]) -> None:
        """Hand C{results} (objects and refusals) to the receiver, in order, until the connection is dropped."""
        receiver = self.receiver
        for obj in results:
            if self.stopped:
                # (the receiver dropped the connection for an object before: nothing after it is acted on)
                return
            if isinstance(obj, Violation):
                receiver.objectRefused(obj)
            else:
                receiver.objectReceived(obj)

    def _controlEvents(self) -> int:
        """Answer the PINGs and take the PONGs the decoder read; return how many bytes their tokens took."""
        controlBytes: int
        pongs, controlBytes = self._pings.controlEvents(self.decoder.control_events)
        self.controlBytesReceived += controlBytes
        if pongs:
            self.transport.writeSequence(pongs)
            self.transport.flush()
        return controlBytes

    @property
    def bufferedBytes(self) -> int:
        """Received bytes held: undecoded while paused, plus the decoder's."""
        return self.held.heldBytes + self.decoder.buffered

    def _hold(self, data: bytes) -> None:
        self.held.holdRead(data)
        self.ledger.settle(HELD_READS, self.held.heldBytes)
        buffered = self.bufferedBytes
        limit = self.decoder.limits.max_buffered_bytes
        if buffered > limit:
            self._drop(
                BufferLimitExceeded(
                    f"{buffered} received bytes held while reading is paused, more than the limit of {limit}"
                )
            )

    def readingChanged(self, paused: bool) -> None:
        """The transport paused or resumed reading: note it, tell of back-pressure, catch up."""
        self.paused = paused or self.stopped
        backlogged = self.transport.sendBacklogged
        if backlogged != self._sendBacklogged:
            self._sendBacklogged = backlogged
            self._backlogChanged(backlogged)
            for observer in self.observers:
                observer.sendBacklogChanged(backlogged)
        if not self.paused and not self._inRead:
            self._catchUp()

    def _catchUp(self) -> None:
        """Deliver what was held back while paused, until paused again."""
        self._inRead = True
        transport = self.transport
        transport.hold()
        try:
            held = self.held
            while not self.paused:
                obj = held.nextObject()
                if obj is not NOTHING_HELD:
                    self.dispatch((obj,))
                    continue
                data = held.nextRead()
                if data is NOTHING_HELD:
                    break
                self._decode(data)
        finally:
            self._inRead = False
            self.ledger.settle(HELD_READS, self.held.heldBytes)
            transport.release()

    def stop(self) -> None:
        """The connection is being dropped: pause for good and drop what is held."""
        self.stopped = self.paused = True
        self.held.clear()

    def close(self) -> None:
        """
        The connection is gone: stop, and let go of the protocol's calls and
        observers (no reference cycle); reads still handed in are dropped.
        (The protocol sets its L{receiver} to one that takes nothing.)
        """
        self.stop()
        self.observers = []
        self._drop = self._backlogChanged = _ignore


def _ignore(argument: object) -> None:
    """What a closed L{Inbound} calls instead of its protocol."""
