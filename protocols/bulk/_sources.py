# -*- test-case-name: tests.protocols.bulk.test_streams,tests.benchmarks.test_bulk_floor -*-
"""Where a stream's bytes come from: one interface, two kinds of source.

Contract: a L{Stream} reads from one L{StreamSource}, whatever it was given,
and never asks which kind it holds.  L{openSource} adapts what the
application passes:

  - random access (L{RangeSource}, over a L{SeekableSource}: a path, a
    bytes-like, a file that can seek): any byte range of an object of known
    size, on demand, from any thread (a file is read with C{os.pread}, which
    moves no shared file position, so the sending reactor thread and a
    hashing thread can read it at once); sent in any order and in part,
    which is what resuming and striping need;
  - sequential (L{SequentialSource}: producers, iterators, async iterators,
    writes through the stream's C{IConsumer} side): sent once, from its
    start, in the order it is produced, buffered no further ahead than one
    chunk.

A source tells its owner (an L{ISourceOwner}: the stream) when it has more
to give and when it failed; it never calls anything else.  Per frame the
cost is O(1): one read, or one cut from the buffer.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import AsyncIterable, Iterable
from typing import Any, BinaryIO, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorThreads
from twisted.python.failure import Failure

from framing.bulk._digests import IntegrityError

from ._integrity import OrderedHasher


class SeekableSource:
    """
    Random access to an object's bytes.

    @ivar size: the object's length in bytes.
    """

    size: int = 0

    def read(self, offset: int, length: int) -> bytes:
        """
        Return C{length} bytes from C{offset} (fewer only at the end).
        Must be safe to call from any thread.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release what the source holds (a file it opened)."""


class FileSource(SeekableSource):
    """
    A regular file, by path or as an open binary file object (read whole,
    from offset 0, whatever its current position).  A file it opened is
    closed by L{close}; a file object given is closed too if C{own}.

    @ivar path: the file's path, if known.
    """

    def __init__(self, file: str | os.PathLike[str] | BinaryIO, *, own: bool = False) -> None:
        if isinstance(file, (str, os.PathLike)):
            self.path: str | None = os.fspath(file)
            self._file: Any = open(self.path, "rb")  # noqa: SIM115 (closed by close())
            self._owned = True
        else:
            self.path = getattr(file, "name", None) if isinstance(getattr(file, "name", None), str) else None
            self._file = file
            self._owned = own
        self._lock = threading.Lock()
        try:
            self._fd: int | None = self._file.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        if self._fd is not None and hasattr(os, "pread"):
            self.size = os.fstat(self._fd).st_size
        else:
            self._fd = None
            with self._lock:
                self.size = self._file.seek(0, os.SEEK_END)

    def read(self, offset: int, length: int) -> bytes:
        if self._fd is not None:
            return os.pread(self._fd, length, offset)
        # No file descriptor (an in-memory file): the shared position needs a lock.
        with self._lock:
            self._file.seek(offset)
            data: bytes = self._file.read(length)
            return data

    def close(self) -> None:
        if self._owned:
            self._file.close()


class BytesSource(SeekableSource):
    """An object already in memory (any bytes-like)."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data).cast("B")
        self.size = len(self._view)

    def read(self, offset: int, length: int) -> bytes:
        # One copy per byte sent: the transport needs immutable bytes.
        return self._view[offset : offset + length].tobytes()


def seekableSource(obj: Any) -> SeekableSource | None:
    """
    Adapt C{obj} for random access: a L{SeekableSource} as is, a path, a
    bytes-like, or a binary file that can seek.  C{None} for anything else.
    """
    if isinstance(obj, SeekableSource):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return FileSource(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return BytesSource(obj)
    seekable = getattr(obj, "seekable", None)
    if callable(getattr(obj, "read", None)) and seekable is not None and seekable():
        return FileSource(obj)
    return None


# -- what a stream reads from ---------------------------------------------------------


class ISourceOwner(Protocol):
    """What a L{StreamSource} may tell the stream that reads it."""

    def sourceReady(self) -> None:
        """The source has more to give (or has ended): the stream may send."""

    def sourceFailed(self, error: BaseException) -> None:
        """The source raised or its producer failed: the stream fails."""


class StreamSource(Protocol):
    """
    What a L{Stream} reads from (see the module docstring).  Nothing is
    produced before L{begin}; after L{stop}, nothing more is kept.

    @ivar size: the object's size if known (a random-access source always
        knows it).
    @ivar randomAccess: whether it can be sent in ranges.
    @ivar buffered: bytes produced and not yet taken.
    """

    size: int | None
    randomAccess: bool

    @property
    def buffered(self) -> int: ...

    def limit(self, highWater: int) -> None:
        """Buffer no more than C{highWater} bytes ahead (one chunk of the connection)."""

    def begin(self, owner: ISourceOwner, consumer: Any) -> None:
        """Start producing for C{owner} (C{consumer}: the stream, for producers that write to it)."""

    def available(self) -> int:
        """How many bytes one frame could take now."""

    def take(self, length: int) -> tuple[int, bytes]:
        """The next C{length} bytes (at most C{available()}) and their offset."""

    def exhausted(self) -> bool:
        """Whether everything was taken."""

    def refill(self) -> None:
        """Ask for more if less than C{highWater} is buffered."""

    def given(self) -> int | None:
        """
        What a sequential source gave in all (bytes), or C{None} for a
        random-access one (the object has its announced size): what
        L{framing.bulk._connection.SendSide.allSent} checks.
        """

    def makeHasher(self, algorithm: str, hashReactor: Any, clock: Any) -> OrderedHasher:
        """An L{OrderedHasher} for what is sent from this source."""

    def write(self, data: bytes) -> None:
        """Take C{data} written by a producer (the stream's C{IConsumer} side)."""

    def finish(self) -> None:
        """No more writes."""

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """Take data from C{producer}."""

    def unregisterProducer(self) -> None:
        """Forget the producer."""

    def stop(self) -> None:
        """The stream is over: stop any producer and keep nothing more."""

    def close(self) -> None:
        """Release what the source holds (a file it opened)."""


def openSource(source: Any, size: int | None, ranges: Iterable[tuple[int, int]] | None) -> StreamSource:
    """
    The L{StreamSource} for what the application passed to a L{Stream}.

    @raise TypeError: nothing can be streamed from C{source}.
    @raise ValueError: C{ranges} for a sequential source, or ranges outside
        the object.
    """
    seekable = seekableSource(source) if source is not None else None
    if seekable is not None:
        return RangeSource(seekable, ranges)
    if ranges is not None:
        raise ValueError("only a random-access source can be sent in ranges")
    return SequentialSource(source, size)


class RangeSource:
    """Byte ranges of a L{SeekableSource}, sent in order of the ranges."""

    randomAccess = True
    buffered = 0

    def __init__(self, seekable: SeekableSource, ranges: Iterable[tuple[int, int]] | None) -> None:
        self.seekable = seekable
        self.size: int | None = seekable.size
        self.ranges: deque[tuple[int, int]] = deque(self._checked(ranges))

    def _checked(self, ranges: Iterable[tuple[int, int]] | None) -> list[tuple[int, int]]:
        size = self.seekable.size
        if ranges is None:
            return [(0, size)] if size else []
        checked = []
        for start, end in ranges:
            if not 0 <= start <= end <= size:
                raise ValueError(f"range [{start}, {end}) is outside the object of {size} bytes")
            if end > start:
                checked.append((start, end))
        return checked

    def limit(self, highWater: int) -> None:
        """Nothing is buffered: ranges are read on demand."""

    def begin(self, owner: ISourceOwner, consumer: Any) -> None:
        """Nothing to start: ranges are read on demand."""

    def available(self) -> int:
        ranges = self.ranges
        return ranges[0][1] - ranges[0][0] if ranges else 0

    def take(self, length: int) -> tuple[int, bytes]:
        start, end = self.ranges[0]
        data = self.seekable.read(start, length)
        if not data:
            raise IntegrityError(f"the source ended at {start} bytes, before its size of {self.size}")
        if start + len(data) >= end:
            self.ranges.popleft()
        else:
            self.ranges[0] = (start + len(data), end)
        return start, data

    def exhausted(self) -> bool:
        return not self.ranges

    def refill(self) -> None:
        """Nothing to ask for: ranges are read on demand."""

    def given(self) -> int | None:
        return None

    def makeHasher(self, algorithm: str, hashReactor: Any, clock: Any) -> OrderedHasher:
        reactor = hashReactor
        partial = list(self.ranges) != [(0, self.seekable.size)]
        if partial and reactor is None and IReactorThreads.providedBy(clock):
            # The ranges not sent must be read back and hashed: not in the reactor thread.
            reactor = clock
        return OrderedHasher(algorithm, self.seekable.read, reactor)

    def write(self, data: bytes) -> None:
        raise RuntimeError("this stream takes no more data")

    def finish(self) -> None:
        """A random-access stream ends with its ranges."""

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """Nothing is taken from a producer: the ranges are the data."""

    def unregisterProducer(self) -> None:
        """Nothing registered."""

    def stop(self) -> None:
        """Nothing produces."""

    def close(self) -> None:
        self.seekable.close()


class SequentialSource:
    """
    Bytes in the order they are produced: pulled from an iterator or an
    async iterator, or written by a producer (Twisted's C{IBodyProducer}, or
    any push or pull producer registered with the stream), buffered up to
    one chunk ahead.
    """

    randomAccess = False

    def __init__(self, source: Any, size: int | None) -> None:
        self.size = size
        self._iterator: Any = None
        self._asyncIterator: Any = None
        self._bodyProducer: Any = None
        if source is None:
            pass
        elif callable(getattr(source, "startProducing", None)):
            self._bodyProducer = source
        elif isinstance(source, AsyncIterable):
            self._asyncIterator = source.__aiter__()
        elif isinstance(source, Iterable):
            self._iterator = iter(source)
        else:
            raise TypeError(f"cannot stream from {type(source).__name__}")
        self._owner: ISourceOwner | None = None
        self._highWater = 1 << 20
        # What was produced and not yet taken.
        self._buffer: deque[bytes | memoryview] = deque()
        self._buffered = 0
        self._position = 0
        self._finished = False
        self._stopped = False
        self._producer: Any = None
        self._streamingProducer = False
        self._producerPaused = False
        self._pulling = False
        self._awaiting = False

    @property
    def buffered(self) -> int:
        return self._buffered

    def limit(self, highWater: int) -> None:
        self._highWater = highWater

    def begin(self, owner: ISourceOwner, consumer: Any) -> None:
        self._owner = owner
        if self._bodyProducer is not None:
            started = self._bodyProducer.startProducing(consumer)
            if self._producer is None:
                # It did not register a producer of its own: pause and resume it.
                self._producer, self._streamingProducer = self._bodyProducer, True
            started.addCallbacks(lambda _: self.finish(), self._failed)
        self.refill()

    def available(self) -> int:
        return self._buffered

    def take(self, length: int) -> tuple[int, bytes]:
        buffer = self._buffer
        first = buffer[0]
        if len(first) > length:
            # Copy out one frame; keep the rest as a view, so a large write
            # is not copied again for every frame cut from it.
            view = memoryview(first)
            data = view[:length].tobytes()
            buffer[0] = view[length:]
        elif len(first) == length or len(buffer) == 1:
            head = buffer.popleft()
            data = head if type(head) is bytes else bytes(head)
        else:
            pieces, taken = [], 0
            while buffer and taken + len(buffer[0]) <= length:
                piece = buffer.popleft()
                pieces.append(piece)
                taken += len(piece)
            data = b"".join(pieces)
        offset = self._position
        self._position += len(data)
        self._buffered -= len(data)
        return offset, data

    def exhausted(self) -> bool:
        return self._finished and not self._buffered

    def given(self) -> int | None:
        return self._position

    def makeHasher(self, algorithm: str, hashReactor: Any, clock: Any) -> OrderedHasher:
        return OrderedHasher(algorithm, None, hashReactor)

    # -- written by producers -------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._finished:
            raise RuntimeError("this stream takes no more data")
        if not data or self._stopped:
            # A producer that has not yet seen stopProducing: nothing to keep.
            return
        data = bytes(data) if type(data) is not bytes else data
        self._buffer.append(data)
        self._buffered += len(data)
        if self._streamingProducer and self._producer is not None and self._buffered >= self._highWater:
            self._producerPaused = True
            self._producer.pauseProducing()
        if self._owner is not None:
            self._owner.sourceReady()

    def finish(self) -> None:
        self._finished = True
        if self._owner is not None:
            self._owner.sourceReady()

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self._producer is not None:
            raise RuntimeError(f"{producer!r} cannot register: {self._producer!r} is registered")
        self._producer, self._streamingProducer, self._producerPaused = producer, bool(streaming), False
        if self._owner is not None:
            self.refill()

    def unregisterProducer(self) -> None:
        self._producer = None

    def stop(self) -> None:
        self._stopped = True
        if self._producer is not None:
            producer, self._producer = self._producer, None
            stopProducing = getattr(producer, "stopProducing", None)
            if stopProducing is not None:
                stopProducing()

    def close(self) -> None:
        """Nothing held: the buffer goes with the source."""

    # -- pulled from iterators and producers ----------------------------------------------

    def refill(self) -> None:
        if self._pulling or self._finished or self._stopped or self._owner is None:
            return
        self._pulling = True
        try:
            high = self._highWater
            if self._producer is not None:
                self._resumeProducer(high)
            elif self._iterator is not None:
                self._pullIterator(high)
            elif self._asyncIterator is not None and not self._awaiting and self._buffered < high:
                self._pullAsync()
        finally:
            self._pulling = False

    def _resumeProducer(self, high: int) -> None:
        if self._buffered >= high:
            return
        if self._streamingProducer:
            if self._producerPaused:
                self._producerPaused = False
                self._producer.resumeProducing()
            return
        while self._producer is not None and self._buffered < high and not self._finished:
            before = self._position + self._buffered
            self._producer.resumeProducing()
            if self._position + self._buffered == before:
                break  # it will write later; write() wakes the stream

    def _pullIterator(self, high: int) -> None:
        try:
            while self._buffered < high:
                self.write(next(self._iterator))
        except StopIteration:
            self.finish()
        except Exception as error:
            self._failed(Failure(error))  # type: ignore[no-untyped-call]

    def _pullAsync(self) -> None:
        self._awaiting = True
        Deferred.fromCoroutine(self._next()).addCallbacks(self._gotAsync, self._failed)

    async def _next(self) -> Any:
        try:
            return await self._asyncIterator.__anext__()
        except StopAsyncIteration:
            return None

    def _gotAsync(self, data: bytes | None) -> None:
        self._awaiting = False
        if self._stopped:
            return
        if data is None:
            self.finish()
            return
        self.write(data)
        self.refill()

    def _failed(self, failure: Failure) -> None:
        self._awaiting = False
        error = failure.value
        assert error is not None
        if self._owner is not None:
            self._owner.sourceFailed(error)
