# -*- test-case-name: tests.framing.bulk.test_credit -*-
"""The sender's side of a stream's flow control: what credit allows it to send, and in what frames.

Contract: a L{SendCredit} never lets its stream send more than the receiver
granted.  It sizes each frame: a full chunk if the credit allows one, else
as much as the credit allows once that is at least a credit step (a quarter
of the receiver's first grant, its whole window, and at most the
connection's C{grantStep}): waiting for a whole chunk of credit would let
the pipe run dry between chunks, and sending less than a step would only
cut frames small.  O(1) per frame; no call of its own on the per-chunk path
beyond the one that takes the frame.
"""

from __future__ import annotations

from typing import Protocol


class StreamSource(Protocol):
    """What credit takes frames from: the bytes ready to send, and the next frame of them."""

    def available(self) -> int:
        """How many bytes could be taken now."""

    def take(self, count: int) -> tuple[int, bytes]:
        """The next frame of at most C{count} bytes: C{(offset, data)}."""


class SendCredit:
    """
    An outgoing stream's credit: the bytes the receiver granted that are not
    sent yet, and the smallest frame worth sending (see the module docstring).

    @ivar remaining: bytes granted and not sent yet.
    @ivar minFrame: the credit step: no frame smaller than this is sent
        while the source has more.
    """

    __slots__ = ("remaining", "minFrame")

    def __init__(self) -> None:
        self.remaining = 0
        self.minFrame = 1

    def grant(self, count: int) -> None:
        """The receiver granted C{count} more bytes."""
        self.remaining += count

    def firstGrant(self, count: int, grantStep: int) -> None:
        """
        The receiver's first credit, C{count} bytes: its whole window.  A
        frame goes as soon as a quarter of it is free (a receiver grants in
        such steps, at most C{grantStep}), so several frames are in flight
        whatever the window.
        """
        self.remaining += count
        self.minFrame = max(1, min(grantStep, count // 4))

    def short(self) -> bool:
        """Whether less than a credit step is left (a source with more then waits for a grant)."""
        return self.remaining < self.minFrame

    def take(self, source: StreamSource, chunkSize: int) -> tuple[int, bytes] | None:
        """
        The next frame the credit allows, C{(offset, data)}, taken from
        C{source} and from the credit; C{None} if none fits yet.
        """
        available = source.available()
        if not available:
            return None
        remaining = self.remaining
        wanted = min(chunkSize, available, remaining)
        if wanted < min(chunkSize, available, self.minFrame):
            return None
        frame = source.take(wanted)
        self.remaining = remaining - len(frame[1])
        return frame
