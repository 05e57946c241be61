# -*- test-case-name: tests.framing.test_blocks,tests.framing.test_outgoing,tests.protocols.test_coalescing -*-
"""BlockBuffer: the send buffer.

Contract: output is kept as a list of blocks.  Small pieces are appended to
the current block (an C{io.BytesIO}, so one append is one C-level copy),
except the first piece written to an empty buffer, which, as a large one,
is kept by reference (a single message, the commonest output, is then
handed out as it was written, with no copy and no block started);
a block is sealed without copying (C{BytesIO.getvalue()} hands over its
buffer once nothing else shares it) when it reaches its cap, and caps grow
geometrically from L{FIRST_BLOCK} to L{MAX_BLOCK}, as in CPython's
C{_BlocksOutputBuffer}, so no single reallocation is ever larger than one
block.  An immutable piece of at least L{LARGE_PIECE} bytes becomes a block of
its own by reference: a large body is never copied into the buffer.  Once a
full block of the largest size is sealed (a large output is under way), the
next block is allocated whole up front, so filling it never reallocates.
Peak memory is the output plus at most one block of slack.
"""

from __future__ import annotations

import io
from collections.abc import Callable

FIRST_BLOCK = 16 * 1024
MAX_BLOCK = 1024 * 1024
LARGE_PIECE = 32 * 1024


def _preallocated(size: int) -> io.BytesIO:
    """
    A BytesIO whose buffer already holds C{size} bytes: a block that fills it
    is never reallocated (growing by 1/8 steps from empty would copy the block
    several times over once it is past the allocator's in-place range).
    """
    block = io.BytesIO()
    block.seek(size - 1)
    block.write(b"\0")
    block.seek(0)
    return block


class BlockBuffer:
    """
    An append-only output buffer that hands out what was written with
    L{take} (one C{bytes}) or L{take_blocks} (a list for C{writeSequence};
    L{take_sized} adds the bytes in it).

    @ivar write: append a small piece to the current block.  This is the
        current block's own C{write}, so the hot path is one C call; it is
        rebound whenever a block is sealed, so callers look it up on the
        buffer each time rather than keeping it across L{seal_if_full},
        L{write_piece} or L{take}.
    @ivar sealed: the bytes in sealed blocks: all of the buffer but the
        current block.
    @ivar tell: the bytes in the current block: the current block's own
        C{tell}, rebound as L{write} is, so that C{sealed + tell()} is
        C{len(buffer)} without a call into Python (for per-message checks).
    """

    __slots__ = ("write", "tell", "_current", "_blocks", "sealed", "_cap")

    write: Callable[[bytes], int]
    tell: Callable[[], int]
    sealed: int

    def __init__(self) -> None:
        self._blocks: list[bytes] = []
        self.sealed = 0
        self._cap = FIRST_BLOCK
        self._start_block(io.BytesIO())

    def __len__(self) -> int:
        return self.sealed + self._current.tell()

    def write_piece(self, data: bytes) -> None:
        """
        Append C{data}; a large immutable piece, or the first piece of an
        empty buffer, is kept by reference as a block of its own instead of
        being copied.
        """
        if type(data) is bytes:
            if not self.sealed and not self._current.tell():
                # The first piece of an empty buffer (often one whole message, all that is sent).
                if data:
                    self._blocks.append(data)
                    self.sealed = len(data)
                return
            if len(data) >= LARGE_PIECE:
                self._seal()
                self._blocks.append(data)
                self.sealed += len(data)
                return
        self._current.write(data)
        if self._current.tell() >= self._cap:
            self._seal()

    def seal_if_full(self) -> None:
        """Start a new block if the current one has reached its cap."""
        if self._current.tell() >= self._cap:
            self._seal()

    def mark(self) -> tuple[int, int, int, int]:
        """
        Remember the current end of the buffer, for L{rollback}: an encoder
        that fails halfway through an object drops what it wrote of it
        without touching what was buffered before.
        """
        return (len(self._blocks), self._current.tell(), self.sealed, self._cap)

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        """Drop everything written since L{mark} returned C{mark}."""
        count, size, sealed, cap = mark
        if len(self._blocks) == count:
            # Still in the same block: stepping back is enough, since sealing
            # truncates a block at its position.
            self._current.seek(size)
            return
        # The block that was current at the mark was sealed as blocks[count]
        # (if it held anything); start again from a copy of its marked part.
        head = self._blocks[count][:size] if size else b""
        del self._blocks[count:]
        self.sealed = sealed
        self._cap = cap
        block = io.BytesIO()
        block.write(head)
        self._start_block(block)

    def take(self) -> bytes:
        """Return everything written as one C{bytes} and empty the buffer."""
        blocks = self.take_sized()[0]
        if len(blocks) == 1:
            return blocks[0]
        return b"".join(blocks)

    def take_blocks(self) -> list[bytes]:
        """Return everything written as a list of blocks and empty the buffer."""
        return self.take_sized()[0]

    def take_sized(self) -> tuple[list[bytes], int]:
        """
        Return everything written as a list of blocks, with the bytes in
        them (counted as they were written: the caller need not count them
        again), and empty the buffer.
        """
        size = self._current.tell()
        if not size and not self._blocks:
            return [], 0
        blocks = self._blocks
        if size:
            self._seal(more=False)
        total = self.sealed
        self._blocks = []
        self.sealed = 0
        if size or self._cap != FIRST_BLOCK:
            # The current block was used up (or replaced by one preallocated whole): a fresh one.
            # Else it is still the empty one the last take started, and is kept.
            self._start_block(io.BytesIO())
        self._cap = FIRST_BLOCK
        return blocks, total

    def _seal(self, more: bool = True) -> None:
        """Seal the current block; C{more}: output goes on after it (else the caller starts the next block)."""
        size = self._current.tell()
        if not size:
            return
        # truncate() drops a preallocated tail; getvalue() then gives up the
        # BytesIO's own buffer (shrunk in place) since nothing else shares
        # it, so sealing copies nothing.
        self._current.truncate(size)
        self._blocks.append(self._current.getvalue())
        self.sealed += size
        self._cap = min(self._cap * 2, MAX_BLOCK)
        if more:
            self._start_block(_preallocated(MAX_BLOCK) if size >= MAX_BLOCK else io.BytesIO())

    def _start_block(self, block: io.BytesIO) -> None:
        self._current = block
        self.write = block.write
        self.tell = block.tell

    def __repr__(self) -> str:
        return f"<BlockBuffer {len(self)} bytes in {len(self._blocks)} sealed blocks>"
