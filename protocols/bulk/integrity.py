"""End-to-end integrity: the digest of an object whose bytes arrive in any order.

Contract: an L{OrderedHasher} computes the digest (SHA-256 by default) of
bytes C{[0, size)} exactly once each, however they are offered: a piece
offered at the hashed position (the common case, a transfer in order) is
hashed from the buffer that carried it, with no copy; a piece offered ahead
of it is not kept (that would hold the whole gap in memory) but read back
later, through the owner's C{readBack(offset, length)}, once the owner says
those bytes are there (L{OrderedHasher.allowReadBack}); a piece behind it
(a repeat) is ignored.  The caller learns when each piece is no longer
needed (its C{release} callable), so memory held for hashing is bounded by
what the caller lets in flight.

With a C{reactor}, hashing runs in one worker thread per hasher, in order:
C{hashlib} releases the GIL on buffers over 2 KiB, so hashing overlaps the
reactor's I/O; releases come back to the reactor thread in batches with
C{callFromThread}.  Without one, everything runs at once in the caller's
thread (deterministic, for tests and for reactors without threads).
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred

DEFAULT_DIGEST = "sha256"
"""The digest every transfer is checked with unless told otherwise."""

READ_BACK_STEP = 1024 * 1024
"""Bytes read back per step when catching up: large enough that a step's
system call and hash call cost little per byte, small enough to stay cheap
in memory."""

_RELEASE_BATCH = 1024 * 1024
"""The worker reports releases at least this often (in bytes), and whenever
it runs out of work, so credit flows back while it is busy."""

Release = Callable[[int], None]
ReadBack = Callable[[int, int], bytes]


class IntegrityError(Exception):
    """
    The digest of what arrived is not the digest the sender computed (or the
    size is not the size it announced): the data must not be used.

    @ivar expected: the sender's digest, hex (or C{""}).
    @ivar actual: the receiver's digest, hex (or C{""}).
    """

    def __init__(self, message: str, expected: str = "", actual: str = "") -> None:
        super().__init__(message, expected, actual)
        self.message = message
        self.expected = expected
        self.actual = actual

    def __str__(self) -> str:
        return self.message


def checkAlgorithm(name: str | None) -> str | None:
    """
    Return C{name} if it is a fixed-length C{hashlib} algorithm available on
    every platform (or C{None}, meaning no digest).

    @raise ValueError: it is not.
    """
    if name is None:
        return None
    if name not in hashlib.algorithms_guaranteed or name.startswith("shake_"):
        raise ValueError(f"{name!r} is not a fixed-length hashlib algorithm available everywhere")
    return name


_STOP = object()


class OrderedHasher:
    """
    Hashes an object's bytes in order from pieces offered in any order.

    @ivar algorithm: the C{hashlib} name.
    @ivar position: how many leading bytes have been hashed (read from the
        worker thread's side; exact once L{finish} has fired).
    """

    def __init__(self, algorithm: str = DEFAULT_DIGEST, readBack: ReadBack | None = None, reactor: Any = None) -> None:
        """
        @param readBack: C{readBack(offset, length)} returns those bytes of
            the object (from a file or a seekable source); without it, only
            pieces offered in order can be hashed.
        @param reactor: hash in a worker thread and report back through this
            reactor's C{callFromThread}; C{None} hashes at once in the
            caller's thread.
        """
        self.algorithm = algorithm
        self.position = 0
        self._hash = hashlib.new(algorithm)
        self._readBack = readBack
        self._readable = 0
        self._finishing: tuple[int, Deferred[bytes]] | None = None
        self._finished = False
        self._error: BaseException | None = None
        self._reactor = reactor
        self._queue: queue.SimpleQueue[Any] | None = None
        self._pending: list[tuple[Release, int]] = []
        self._pendingBytes = 0
        if reactor is not None:
            self._queue = queue.SimpleQueue()
            worker = threading.Thread(target=self._work, name=f"chunkwire-{algorithm}", daemon=True)
            worker.start()

    # -- the owner's side (reactor thread) --------------------------------

    def offer(self, offset: int, data: bytes, release: Release | None = None) -> None:
        """
        Offer the object's bytes at C{offset}; C{release(len(data))} is
        called (in the reactor thread) once C{data} is no longer needed.
        """
        if self._queue is not None:
            self._queue.put((offset, data, release))
        else:
            self._consume(offset, data)
            if release is not None:
                release(len(data))

    def allowReadBack(self, upto: int) -> None:
        """Bytes up to C{upto} may now be read back with C{readBack} when they were not offered in order."""
        if self._queue is not None:
            self._queue.put(upto)
        else:
            self._raiseReadable(upto)
            self._catchUp()

    def finish(self, size: int) -> Deferred[bytes]:
        """
        Hash whatever of C{[0, size)} is still missing (reading it back),
        then fire with the digest.

        @return: a L{Deferred} failing with L{IntegrityError} if more than
            C{size} bytes were offered in order, or with the C{readBack}
            error.
        """
        done: Deferred[bytes] = Deferred()
        if self._queue is not None:
            self._queue.put((size, done))
        else:
            self._startFinish(size, done)
            self._catchUp()
            self._checkFinished()
        return done

    def abort(self) -> None:
        """
        Stop: nothing more will be offered and no digest is wanted.  (After
        L{finish} has fired, the worker has already stopped.)
        """
        if self._queue is not None:
            self._queue.put(_STOP)

    # -- hashing (the worker thread, or the caller's without a reactor) ---

    def _consume(self, offset: int, data: bytes) -> None:
        position = self.position
        end = offset + len(data)
        if offset <= position < end:
            self._hash.update(data if offset == position else memoryview(data)[position - offset :])
            self.position = end

    def _raiseReadable(self, upto: int) -> None:
        if upto > self._readable:
            self._readable = upto

    def _startFinish(self, size: int, done: Deferred[bytes]) -> None:
        self._finishing = (size, done)
        self._raiseReadable(size)

    def _catchUp(self, steps: int | None = None) -> None:
        """Read back and hash what may be read back, C{steps} steps at most."""
        while self._readBack is not None and self._error is None and self.position < self._readable:
            if steps is not None:
                if not steps:
                    return
                steps -= 1
            self._readBackStep()

    def _readBackStep(self) -> None:
        length = min(READ_BACK_STEP, self._readable - self.position)
        assert self._readBack is not None
        try:
            data = self._readBack(self.position, length)
        except Exception as error:
            self._error = error
            return
        if not data:
            self._error = IntegrityError(f"the data ends at {self.position} bytes, before {self._readable}")
            return
        self._hash.update(data)
        self.position += len(data)

    def _checkFinished(self) -> None:
        """If finishing and done (or failed), fire the finish Deferred."""
        if self._finishing is None:
            return
        size, done = self._finishing
        if self._error is not None:
            error: BaseException = self._error
        elif self.position > size:
            error = IntegrityError(f"more than the {size} bytes announced arrived")
        elif self.position < size and (self._readBack is None or self._readable < size):
            error = IntegrityError(f"only {self.position} of {size} bytes could be hashed in order")
        elif self.position < size:
            return
        else:
            self._finishing = None
            self._finished = True
            self._report(done.callback, self._hash.digest())
            return
        self._finishing = None
        self._finished = True
        self._report(done.errback, error)

    def _report(self, call: Callable[[Any], object], value: Any) -> None:
        if self._reactor is None:
            call(value)
        else:
            self._flushReleases()
            self._reactor.callFromThread(call, value)

    # -- the worker thread ----------------------------------------------------

    def _work(self) -> None:
        work = self._queue
        assert work is not None
        while not self._finished:
            idle = self.position >= self._readable or self._readBack is None or self._error is not None
            try:
                item = work.get(block=idle)
            except queue.Empty:
                # Nothing offered: catch up by reading back, one step at a
                # time so that new offers are looked at in between.
                self._flushReleases()
                self._catchUp(steps=1)
                self._checkFinished()
                continue
            if item is _STOP:
                self._flushReleases()
                return
            self._handle(item)
            if work.empty() or self._pendingBytes >= _RELEASE_BATCH:
                self._flushReleases()

    def _handle(self, item: Any) -> None:
        if type(item) is int:
            self._raiseReadable(item)
        elif len(item) == 2:
            self._startFinish(*item)
        else:
            offset, data, release = item
            self._consume(offset, data)
            if release is not None:
                self._pending.append((release, len(data)))
                self._pendingBytes += len(data)
        self._checkFinished()

    def _flushReleases(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self._pendingBytes = 0
            self._reactor.callFromThread(_runReleases, pending)


def _runReleases(pending: list[tuple[Release, int]]) -> None:
    for release, count in pending:
        release(count)
