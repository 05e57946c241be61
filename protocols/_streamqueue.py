# -*- test-case-name: tests.protocols.test_flusher,tests.protocols.test_coalescing_parts -*-
"""StreamQueue: streams written one unit per write, and the messages flushed behind them.

Contract: a L{StreamQueue} keeps streams and whole messages in the order
they were queued and hands them to the write it is given: a message as the
blocks it was flushed as, a stream one unit (a list of byte pieces, joined
into as few blocks as a L{framing.BlockBuffer} makes) per write.  A
stream's next unit is pulled from its iterator only while the
L{protocols._writegate.WriteGate} is open, so a peer that reads slowly pauses
the pulling, and nothing piles up beyond the wrapped transport's own
buffer.  Each unit is one write; queuing a message costs O(its blocks).
The queue keeps no reference to whoever writes for it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from framing import BlockBuffer

from ._writegate import WriteGate


class _Stream:
    """One queued stream: its units still to write and who waits for the end."""

    __slots__ = ("units", "done")

    def __init__(self, units: Iterator[list[bytes]], done: Deferred[None]) -> None:
        self.units = units
        self.done = done


class StreamQueue:
    """
    Streams, and the messages flushed while a stream is being written, in
    the order they were queued.

    @ivar items: what waits, oldest first: a queued stream, or a flushed
        message's blocks.  Test it to know whether anything waits; only
        this queue changes it.
    @ivar queuedBytes: the bytes of the messages waiting behind a stream.
    """

    def __init__(self, gate: WriteGate) -> None:
        """
        @param gate: the gate whose L{WriteGate.paused} stops the pulling.
        """
        self.items: deque[_Stream | list[bytes]] = deque()
        self.queuedBytes = 0
        self._gate = gate
        self._unitBuffer = BlockBuffer()
        self._pumping = False

    def __repr__(self) -> str:
        return f"<StreamQueue {len(self.items)} queued, {self.queuedBytes} bytes of messages>"

    def addStream(self, units: Iterable[list[bytes]]) -> Deferred[None]:
        """
        Queue a stream: each item of C{units} (a list of byte pieces) will be
        one write.

        @return: a L{Deferred} that fires with C{None} once the last unit was
            written, or fails with the iterator's exception or the reason
            given to L{abandon}.
        """
        done: Deferred[None] = Deferred()
        self.items.append(_Stream(iter(units), done))
        return done

    def addMessage(self, blocks: list[bytes], size: int) -> None:
        """Queue a flushed message's C{blocks} (C{size} bytes), to be written whole after what is queued already."""
        self.items.append(blocks)
        self.queuedBytes += size

    def pump(self, write: Callable[[list[bytes], int], None]) -> bool:
        """
        Hand queued messages and units to C{write}, each with its size in
        bytes, until nothing waits or the gate is paused.  A call made while pumping (from a write or a
        Deferred's callback) does nothing: the outer call goes on.

        @return: whether this call pumped and left nothing waiting.
        """
        if self._pumping:
            return False
        self._pumping = True
        try:
            self._pumpItems(write)
        finally:
            self._pumping = False
        return not self.items

    def _pumpItems(self, write: Callable[[list[bytes], int], None]) -> None:
        items, gate = self.items, self._gate
        while items and not gate.paused:
            head = items[0]
            if isinstance(head, list):
                items.popleft()
                size = sum(map(len, head))
                self.queuedBytes -= size
                write(head, size)
                continue
            try:
                unit = next(head.units)
            except StopIteration:
                items.popleft()
                head.done.callback(None)
                continue
            except Exception:
                items.popleft()
                head.done.errback()
                continue
            self._writeUnit(unit, write)

    def _writeUnit(self, unit: list[bytes], write: Callable[[list[bytes], int], None]) -> None:
        buf = self._unitBuffer
        for piece in unit:
            buf.write_piece(piece)
        blocks, size = buf.take_sized()
        if blocks:
            write(blocks, size)
        self._gate.unitWritten()

    def abandon(self, reason: BaseException | Failure) -> None:
        """Fail every queued stream with C{reason}, without writing the rest of it; queued messages are dropped."""
        abandoned = list(self.items)
        self.items.clear()
        self.queuedBytes = 0
        for item in abandoned:
            if isinstance(item, _Stream):
                item.done.errback(reason)
