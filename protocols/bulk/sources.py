"""Where a stream's bytes come from: random-access sources, and how others are adapted.

Contract: a L{SeekableSource} gives any byte range of an object of known
size on demand (C{read(offset, length)}), from any thread: a file is read
with C{os.pread}, which moves no shared file position, so the sending
reactor thread and a hashing thread can read it at once.  Such a source
can be sent in any order and in part, which is what resuming and striping
need.  Anything else (producers, iterators, async iterators, writes through
the stream's C{IConsumer} side) is sequential: sent once, from its start,
in the order it is produced, and buffered no further ahead than one chunk
(see L{protocols.bulk.streams.Stream}).
"""

from __future__ import annotations

import os
import threading
from typing import Any, BinaryIO


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
    from offset 0, whatever its current position).

    @ivar path: the file's path, if known.
    """

    def __init__(self, file: str | os.PathLike[str] | BinaryIO) -> None:
        if isinstance(file, (str, os.PathLike)):
            self.path: str | None = os.fspath(file)
            self._file: Any = open(self.path, "rb")  # noqa: SIM115 (closed by close())
            self._owned = True
        else:
            self.path = getattr(file, "name", None) if isinstance(getattr(file, "name", None), str) else None
            self._file = file
            self._owned = False
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
