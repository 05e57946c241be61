# -*- test-case-name: tests.framing.test_chain -*-
"""ChunkChain: the receive buffer.

Contract: C{append} keeps a reference to the chunk and copies nothing;
C{len()} is O(1); C{popleft(n)} copies each byte it returns once (a slice when
the bytes lie in one chunk, one C{join} of buffer views when they span
several) and returns a whole chunk without copying when it can; C{skip(n)}
copies nothing; C{peek(n)} copies at most C{n} bytes.  Consumed chunks are
released at once, so nothing is kept alive past its last unread byte.
"""

from __future__ import annotations

from collections import deque


class ChunkChain:
    """
    A byte queue made of the chunks C{dataReceived} delivered, plus the
    number of bytes already consumed from the first chunk.

    @ivar _chunks: the chunks, oldest first; never empty chunks.
    @ivar _offset: bytes already consumed from C{_chunks[0]}.
    @ivar size: unread bytes held in all chunks together (C{len()} without a call: read on every chunk).
    """

    __slots__ = ("_chunks", "_offset", "size")

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._offset = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def append(self, data: bytes) -> None:
        """
        Add C{data} at the end, by reference (no copy).

        @raise TypeError: if C{data} is not C{bytes}; a mutable buffer could
            change under us after it was queued.
        """
        if type(data) is not bytes:
            raise TypeError(f"ChunkChain takes bytes, not {type(data).__name__}")
        if data:
            self._chunks.append(data)
            self.size += len(data)

    def head(self) -> tuple[bytes, int]:
        """
        Return the first chunk and the offset of its first unread byte, so a
        scanner can read many small tokens in place before one C{skip}.

        @raise IndexError: if the chain is empty.
        """
        if not self.size:
            raise IndexError("head of an empty ChunkChain")
        return self._chunks[0], self._offset

    def peek(self, n: int) -> bytes:
        """
        Return up to C{n} bytes from the front without consuming them (fewer
        when fewer are held).
        """
        self._check_count(n)
        if not self.size or not n:
            return b""
        first = self._chunks[0]
        start = self._offset
        if len(first) - start >= n:
            return first[start : start + n]
        return self._gather(n)

    def popleft(self, n: int) -> bytes:
        """
        Remove and return exactly C{n} bytes from the front.

        @raise ValueError: if fewer than C{n} bytes are held; nothing is
            consumed then.
        """
        self._check_available(n)
        if not n:
            return b""
        first = self._chunks[0]
        start = self._offset
        available = len(first) - start
        if available > n:
            self._offset = start + n
            self.size -= n
            return first[start : start + n]
        if available == n:
            self._drop_head()
            self.size -= n
            # A whole chunk comes back as the same object: no copy.
            return first[start:] if start else first
        data = self._gather(n)
        self.skip(n)
        return data

    def skip(self, n: int) -> None:
        """
        Discard C{n} bytes from the front without copying them.

        @raise ValueError: if fewer than C{n} bytes are held; nothing is
            discarded then.
        """
        self._check_available(n)
        self.size -= n
        chunks = self._chunks
        offset = self._offset + n
        while chunks and offset >= len(chunks[0]):
            offset -= len(chunks.popleft())
        self._offset = offset

    def chunks(self) -> list[memoryview]:
        """
        Return views of every unread byte, in order, without copying, for a
        caller that moves the whole content elsewhere before calling
        L{clear}.
        """
        views = [memoryview(chunk) for chunk in self._chunks]
        if views:
            views[0] = views[0][self._offset :]
        return views

    def clear(self) -> None:
        """Discard everything held."""
        self._chunks.clear()
        self._offset = 0
        self.size = 0

    def _drop_head(self) -> None:
        self._chunks.popleft()
        self._offset = 0

    def _gather(self, n: int) -> bytes:
        # Join views of just the chunks needed: each byte is copied once.
        views: list[memoryview] = []
        needed = n
        offset = self._offset
        for chunk in self._chunks:
            view = memoryview(chunk)[offset : offset + needed]
            views.append(view)
            needed -= len(view)
            offset = 0
            if not needed:
                break
        return b"".join(views)

    def _check_count(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"byte count must not be negative, got {n}")

    def _check_available(self, n: int) -> None:
        self._check_count(n)
        if n > self.size:
            raise ValueError(f"asked for {n} bytes but only {self.size} are held")

    def __repr__(self) -> str:
        return f"<ChunkChain {self.size} bytes in {len(self._chunks)} chunks>"
