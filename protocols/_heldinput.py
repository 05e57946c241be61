# -*- test-case-name: tests.protocols.test_heldinput -*-
"""HeldInput: what a paused connection keeps for later, in arrival order.

Contract: while a connection's application has paused reading, reads that
arrive are kept undecoded (so a paused connection costs no decoding and
holds no half-built objects beyond the decoder's), and objects a read had
already completed when the pause came are kept decoded; both come back
out in the order they came in, the decoded objects first (they were
earlier on the wire).  O(1) per read and per object; the bytes kept are
counted, so the connection can bound them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

NOTHING_HELD = object()
"""What L{HeldInput.nextObject} and L{HeldInput.nextRead} return when nothing is held."""


class HeldInput:
    """
    The held reads and objects of one connection.

    @ivar heldBytes: the bytes of the reads held.
    @ivar count: the reads and objects held (a plain attribute: every read
        asks whether anything is held, so that asking calls nothing).
    """

    def __init__(self) -> None:
        self._reads: deque[bytes] = deque()
        self._objects: deque[Any] = deque()
        self.heldBytes = 0
        self.count = 0

    def __bool__(self) -> bool:
        """Whether anything is held."""
        return self.count > 0

    def holdRead(self, data: bytes) -> None:
        """Keep a read, undecoded."""
        self._reads.append(data)
        self.heldBytes += len(data)
        self.count += 1

    def holdObjects(self, objects: Iterable[Any]) -> None:
        """Keep objects (and refusals) already decoded but not delivered."""
        self._objects.extend(objects)
        self.count = len(self._reads) + len(self._objects)

    def nextObject(self) -> Any:
        """The oldest decoded object held, or L{NOTHING_HELD}."""
        if not self._objects:
            return NOTHING_HELD
        self.count -= 1
        return self._objects.popleft()

    def nextRead(self) -> Any:
        """The oldest read held, or L{NOTHING_HELD}."""
        if not self._reads:
            return NOTHING_HELD
        data = self._reads.popleft()
        self.heldBytes -= len(data)
        self.count -= 1
        return data

    def clear(self) -> None:
        """Drop everything held (the connection is being dropped)."""
        self._reads.clear()
        self._objects.clear()
        self.heldBytes = self.count = 0
