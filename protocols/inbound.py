# -*- test-case-name: tests.protocols.rpc.test_served_call -*-
"""Inbound: a connection's reads, through its decoder, to its receiver.

Contract: each read goes once through the decoder and each object it
completes to the receiver, in stream order, with the transport held for
the read so everything sent meanwhile shares one write.  While reading is
paused (by the application or by send back-pressure) reads are held
undecoded in a L{HeldInput}, bounded by C{Limits.max_buffered_bytes}, and
caught up in order when it resumes.  A L{ProtocolError} delivers what the
same read completed before the break, then drops the connection.  O(1)
per read plus one call per object.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from framing import ProtocolError, Violation
from framing.errors import BufferLimitExceeded

from .heldinput import NOTHING_HELD, HeldInput

HELD_READS = "held-reads"
"""The ledger account of the reads a paused connection keeps undecoded (L{HeldInput}, capped by max_buffered_bytes)."""


class Inbound:
    """
    The receive side of one L{protocols.TokenProtocol}.

    @ivar paused: whether delivery is paused.
    @ivar controlBytesReceived: bytes of PING and PONG tokens received so far.
    @ivar held: the L{HeldInput} kept while paused.
    """

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.paused = False
        self.controlBytesReceived = 0
        self.held = HeldInput()
        self._inRead = False
        self._sendBacklogged = False

    def dataReceived(self, data: bytes) -> None:
        """Decode C{data} and deliver what it completes, unless reading is paused."""
        protocol = self.protocol
        if protocol.failure is not None or self.paused or self.held.count:
            for observer in protocol.observers:
                observer.dataArrived(len(data))
            if protocol.failure is None:
                self._hold(data)
            return
        self._inRead = True
        # Everything sent while this read is handled shares one write.
        transport = protocol.transport
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
        protocol = self.protocol
        decoder = protocol.decoder
        try:
            results = decoder.feed(data)
        except ProtocolError as error:
            if arrived:
                for observer in protocol.observers:
                    observer.dataArrived(len(data))
            # What the same bytes completed before the break was whole and
            # valid: deliver it, then drop the connection.
            self.dispatch(getattr(error, "results", ()))
            protocol.failConnection(error)
            return
        controlBytes = self._controlEvents() if decoder.control_events else 0
        receiver = protocol.receiver
        for index, obj in enumerate(results):
            if self.paused:
                self.held.holdObjects(results[index:])
                break
            if isinstance(obj, Violation):
                receiver.objectRefused(obj)
            else:
                receiver.objectReceived(obj)
        observers = protocol.observers
        if observers:
            # (the objects this read completed are the decoder's count of them: the results, refusals included)
            length, done = len(data), len(results)
            for observer in observers:
                if arrived:
                    observer.dataRead(length, done, controlBytes)
                else:
                    observer.dataDecoded(length, done, controlBytes)

    def dispatch(self, results: Iterable[Any]) -> None:
        """Hand C{results} (objects and refusals) to the receiver, in order."""
        receiver = self.protocol.receiver
        for obj in results:
            if isinstance(obj, Violation):
                receiver.objectRefused(obj)
            else:
                receiver.objectReceived(obj)

    def _controlEvents(self) -> int:
        """Answer the PINGs and take the PONGs the decoder read; return how many bytes their tokens took."""
        protocol = self.protocol
        controlBytes: int
        pongs, controlBytes = protocol.pings.controlEvents(protocol.decoder.control_events)
        self.controlBytesReceived += controlBytes
        if pongs:
            protocol.transport.writeSequence(pongs)
            protocol.transport.flush()
        return controlBytes

    def _hold(self, data: bytes) -> None:
        self.held.holdRead(data)
        protocol = self.protocol
        protocol.ledger.settle(HELD_READS, self.held.heldBytes)
        buffered = protocol.bufferedBytes
        limit = protocol.decoder.limits.max_buffered_bytes
        if buffered > limit:
            protocol.failConnection(
                BufferLimitExceeded(
                    f"{buffered} received bytes held while reading is paused, more than the limit of {limit}"
                )
            )

    def readingChanged(self, paused: bool) -> None:
        """The transport paused or resumed reading: note it, tell of back-pressure, catch up."""
        self.paused = paused
        protocol = self.protocol
        backlogged = protocol.transport.sendBacklogged
        if backlogged != self._sendBacklogged:
            self._sendBacklogged = backlogged
            protocol.sendBacklogChanged(backlogged)
            for observer in protocol.observers:
                observer.sendBacklogChanged(backlogged)
        if not paused and not self._inRead:
            self._catchUp()

    def _catchUp(self) -> None:
        """Deliver what was held back while paused, until paused again."""
        self._inRead = True
        protocol = self.protocol
        transport = protocol.transport
        transport.hold()
        try:
            held = self.held
            while not self.paused and protocol.failure is None:
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
            protocol.ledger.settle(HELD_READS, self.held.heldBytes)
            transport.release()

    def stop(self) -> None:
        """The connection is being dropped: pause for good and drop what is held."""
        self.paused = True
        self.held.clear()

    def close(self) -> None:
        """The connection is gone: let the protocol go (no reference cycle), and take nothing more."""
        self.stop()
        self.protocol = _CLOSED


class _Closed:
    """The protocol of a closed L{Inbound}: reads still handed in are dropped."""

    failure = "closed"
    observers = ()


_CLOSED = _Closed()
