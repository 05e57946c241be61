# -*- test-case-name: tests.protocols.bulk.test_copies,tests.protocols.bulk.test_tcp -*-
"""Where an incoming stream's bytes go: files, consumers, callbacks.

Contract: a L{Sink} is handed each piece as it comes off the socket and
calls the piece's C{release(n)} once it is done with it; the stream returns
flow-control credit to the sender only for released bytes, so a sink that
holds pieces (a paused consumer, a callback still running) stops its own
stream and no other, and holds at most the stream's window.  Nothing is
accumulated beyond that: a file sink writes each piece at its offset at
once (C{os.pwrite}, one copy into the page cache) and releases it.  A file
named by path is written under a temporary name beside it and renamed into
place only by L{Sink.complete}, which the stream calls after the digest
verified; a failed or abandoned transfer removes it, so a partial file is
never presented as complete.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Callable
from types import CoroutineType
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IConsumer, IPushProducer
from zope.interface import implementer

Release = Callable[[int], None]
Failed = Callable[[BaseException], None]
Piece = bytes | memoryview
"""A piece of a stream as it came off the socket: C{bytes}, or a read-only
view into the C{bytes} of a read that also held a neighbouring token (its
buffer never changes, so it may be kept; it keeps that read alive)."""


class Sink:
    """
    The base of sinks; see the module docstring.

    @cvar sequential: whether pieces must arrive in order from offset 0
        (consumers and callbacks); a random-access sink takes any order.
    @cvar verifies: whether the sink checks integrity itself (an assembly
        of ranges), so the stream need not.
    @cvar views: whether L{write} takes a piece as it came off the socket
        (a L{Piece}: perhaps a C{memoryview}), saving a copy of every piece
        cut from a read that also held a neighbouring token; a sink that
        keeps pieces or hands them to code expecting C{bytes} (a consumer,
        a callback) leaves it false and gets C{bytes}.
    """

    sequential = True
    verifies = False
    views = False

    def start(self, size: int | None, failed: Failed) -> None:
        """The stream is starting; C{failed(error)} abandons it (a sink that cannot go on)."""

    def write(self, offset: int, data: Piece, release: Release) -> None:
        """Take the piece C{data} at C{offset} (C{bytes} unless L{views}); call C{release(len(data))} when done."""
        raise NotImplementedError

    def complete(self) -> Deferred[None] | None:
        """Everything arrived and verified: make it final (may return a Deferred)."""
        return None

    def fail(self, reason: BaseException) -> None:
        """The transfer failed or was abandoned: drop what is partial."""


class FileSink(Sink):
    """
    A file by path: written under a temporary name in the same directory,
    renamed over C{path} once verified, removed otherwise.

    @ivar path: the final path.
    @ivar partPath: the temporary path while receiving, or C{None}.
    """

    sequential = False
    views = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.partPath: str | None = None
        self._fd: int | None = None

    def start(self, size: int | None, failed: Failed) -> None:
        directory, name = os.path.split(os.path.abspath(self.path))
        self._fd, self.partPath = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".part")

    def write(self, offset: int, data: Piece, release: Release) -> None:
        fd = self._fd
        assert fd is not None
        writeAt(fd, data, offset)
        release(len(data))

    def complete(self) -> None:
        self._close()
        assert self.partPath is not None
        os.replace(self.partPath, self.path)
        self.partPath = None

    def fail(self, reason: BaseException) -> None:
        self._close()
        if self.partPath is not None:
            try:
                os.unlink(self.partPath)
            except OSError:
                pass
            self.partPath = None

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def writeAt(fd: int, data: bytes | memoryview, offset: int) -> None:
    """
    Write all of C{data} at C{offset} of C{fd}: one C{pwrite}, which takes a
    whole piece on tmpfs and local disks, then more only after a short write
    (a view of the rest: nothing is copied).
    """
    written = os.pwrite(fd, data, offset)
    while written < len(data):
        data = memoryview(data)[written:]
        offset += written
        written = os.pwrite(fd, data, offset)


class OpenFileSink(Sink):
    """
    A binary file object the caller opened (and closes): written at each
    piece's offset if it has a file descriptor, else in order.
    """

    def __init__(self, file: Any) -> None:
        self._file = file
        try:
            self._fd: int | None = file.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self.sequential = self._fd is None or not hasattr(os, "pwrite")
        # Written at its offset through the descriptor: a view will do.  The
        # file object's own write may be anyone's: it gets bytes.
        self.views = not self.sequential

    def write(self, offset: int, data: Piece, release: Release) -> None:
        if self.sequential:
            self._file.write(data)
        else:
            assert self._fd is not None
            writeAt(self._fd, data, offset)
        release(len(data))

    def complete(self) -> None:
        flush = getattr(self._file, "flush", None)
        if flush is not None:
            flush()


@implementer(IPushProducer)
class ConsumerSink(Sink):
    """
    Any L{IConsumer}: this sink registers itself with it as a push producer,
    writes each piece to it, and holds the pieces that arrive while the
    consumer has paused it (the stream's credit stops meanwhile).  The
    consumer's C{stopProducing} abandons the stream.
    """

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self._held: deque[tuple[bytes, Release]] = deque()
        self._paused = False
        self._failed: Failed | None = None
        self._registered = False

    def start(self, size: int | None, failed: Failed) -> None:
        self._failed = failed
        self.consumer.registerProducer(self, True)
        self._registered = True

    def write(self, offset: int, data: Piece, release: Release) -> None:
        assert type(data) is bytes  # views is false: the receiver copied any view
        if self._paused or self._held:
            self._held.append((data, release))
            return
        self.consumer.write(data)
        release(len(data))

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        held = self._held
        while held and not self._paused:
            data, release = held.popleft()
            self.consumer.write(data)
            release(len(data))

    def stopProducing(self) -> None:
        self._unregister()
        if self._failed is not None:
            self._failed(ConnectionAbortedByConsumer("the consumer stopped the stream"))

    def complete(self) -> None:
        self._unregister()

    def fail(self, reason: BaseException) -> None:
        self._held.clear()
        self._unregister()

    def _unregister(self) -> None:
        if self._registered:
            self._registered = False
            self.consumer.unregisterProducer()


class ConnectionAbortedByConsumer(Exception):
    """The receiving consumer called C{stopProducing}: the stream was abandoned."""


class CallbackSink(Sink):
    """
    A callable taking each piece: it may return C{None}, a L{Deferred} or a
    coroutine; the next piece is passed only once the previous call is done
    (so an async callback that awaits a slow write pauses its stream).  A
    call that raises or fails abandons the stream with that error.
    """

    def __init__(self, callback: Callable[[bytes], Any]) -> None:
        self.callback = callback
        self._held: deque[tuple[bytes, Release]] = deque()
        self._busy = False
        self._failed: Failed | None = None

    def start(self, size: int | None, failed: Failed) -> None:
        self._failed = failed

    def write(self, offset: int, data: Piece, release: Release) -> None:
        assert type(data) is bytes  # views is false: the receiver copied any view
        self._held.append((data, release))
        if not self._busy:
            self._next()

    def _next(self) -> None:
        held = self._held
        while held and not self._busy:
            data, release = held.popleft()
            try:
                result = self.callback(data)
            except Exception as error:
                self._abandon(error)
                return
            if type(result) is CoroutineType:
                result = Deferred.fromCoroutine(result)
            if isinstance(result, Deferred):
                self._busy = True
                result.addCallbacks(self._called, self._callFailed, callbackArgs=(release, len(data)))
            else:
                release(len(data))

    def _called(self, _: object, release: Release, count: int) -> None:
        self._busy = False
        release(count)
        self._next()

    def _callFailed(self, failure: Any) -> None:
        self._busy = False
        self._abandon(failure.value)

    def _abandon(self, error: BaseException) -> None:
        self._held.clear()
        if self._failed is not None:
            self._failed(error)

    def fail(self, reason: BaseException) -> None:
        self._held.clear()


def makeSink(target: Any) -> Sink:
    """
    Adapt what a receiver names as the destination: a L{Sink} as is, a path
    (L{FileSink}), an L{IConsumer} (L{ConsumerSink}), a binary file object
    (L{OpenFileSink}), or a callable (L{CallbackSink}).

    @raise TypeError: for anything else.
    """
    if isinstance(target, Sink):
        return target
    if isinstance(target, (str, os.PathLike)):
        return FileSink(target)
    if IConsumer.providedBy(target) or callable(getattr(target, "registerProducer", None)):
        return ConsumerSink(target)
    if callable(getattr(target, "write", None)):
        return OpenFileSink(target)
    if callable(target):
        return CallbackSink(target)
    raise TypeError(f"cannot receive a stream into {type(target).__name__}")
