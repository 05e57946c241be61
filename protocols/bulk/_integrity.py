# -*- test-case-name: tests.protocols.bulk.test_integrity,tests.protocols.bulk.test_digests -*-
"""End-to-end integrity: the digest of an object whose bytes arrive in any order.

Contract: an L{OrderedHasher} computes the digest (any of
L{availableDigests}) of bytes C{[0, size)} exactly once each, however they
are offered: a piece at the hashed position is hashed from the buffer that
carried it, a piece ahead of it is read back later through the owner's
C{readBack} once allowed (L{OrderedHasher.allowReadBack}), and a repeat is
ignored.  Each piece's C{release} tells the caller it is no longer needed.
With a C{reactor}, hashing runs in the process's shared L{HashPool} (at most
L{HASH_THREADS} threads, fair between hashers); without one, at once in the
caller's thread.

Cost: no copy for pieces in order; memory held for hashing is bounded by
what the caller lets in flight; no thread per hasher.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

# The digests' names and choice are framing.bulk._digests'; callers have always imported them here.
from framing.bulk._digests import (  # noqa: F401
    BLAKE3,
    DEFAULT_DIGEST,
    NEGOTIATED,
    PREFERENCE,
    DigestUnavailable,
    IntegrityError,
    availableDigests,
    checkAlgorithm,
    chooseDigest,
    newHash,
)

_log = Logger()


def inlineHashing(hashing: str) -> bool:
    """Whether a file transfer hashes the pieces that move in order in the
    reactor thread: yes for C{"inline"}, no for C{"thread"} (a worker
    thread hashes them), and for C{"auto"} unless a core stays free beside
    both ends of a transfer (the load average plus two under the core
    count less one: never on two cores, where inline measured cheaper).
    Design (the measurements): docs/design/bulk-options.md
    """
    if hashing != "auto":
        return hashing == "inline"
    try:
        return os.getloadavg()[0] + 2 > (os.cpu_count() or 1) - 1
    except (AttributeError, OSError):  # no load average (Windows): the cheaper choice
        return True


READ_BACK_STEP = 1024 * 1024
"""Bytes read back per step when catching up: large enough that a step's
system call and hash call cost little per byte, small enough to stay cheap
in memory."""

_RELEASE_BATCH = 1024 * 1024
"""The worker reports releases at least this often (in bytes), and whenever
it runs out of work, so credit flows back while it is busy."""

Release = Callable[[int], None]
ReadBack = Callable[[int, int], bytes]

HASH_THREADS = max(2, min(8, os.cpu_count() or 2))
"""The most hashing threads the shared L{HashPool} runs: hashing is CPU
work, so more threads than cores only adds memory and switching; at least
two, so a long read-back never holds up every other transfer."""


class HashPool:
    """
    A bounded set of worker threads running hashers' work; see the module
    docstring.

    @ivar maxThreads: the most worker threads at once.
    @ivar idleTimeout: seconds a worker waits for work before it ends.
    @ivar threads: worker threads running now.
    """

    def __init__(self, maxThreads: int = HASH_THREADS, idleTimeout: float = 2.0) -> None:
        if maxThreads < 1:
            raise ValueError("a hash pool needs at least one thread")
        self.maxThreads = maxThreads
        self.idleTimeout = idleTimeout
        self.threads = 0
        self._idle = 0
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def submit(self, job: Callable[[], None]) -> None:
        """Run C{job()} in a worker thread, after the jobs queued before it."""
        self._jobs.put(job)
        with self._lock:
            if self._idle or self.threads >= self.maxThreads:
                return
            self.threads += 1
        worker = threading.Thread(target=self._work, name="chunkwire-hash", daemon=True)
        worker.start()

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            with self._lock:
                self._idle += 1
            try:
                job = jobs.get(timeout=self.idleTimeout)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    # A job queued just now found this worker idle and
                    # started none: take it instead of ending.
                    if jobs.empty():
                        self.threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
            try:
                job()
            except Exception:
                _log.failure("A hashing job failed")


POOL = HashPool()
"""The pool every L{OrderedHasher} with a reactor hashes in."""


_STOP = object()
_BATCH = 64
"""Items a worker takes from one hasher before it goes to the back of the pool's queue."""


class OrderedHasher:
    """
    Hashes an object's bytes in order from pieces offered in any order.

    @ivar algorithm: the digest's name (a C{hashlib} name or C{"blake3"}).
    @ivar position: how many leading bytes have been hashed (read from the
        worker thread's side; exact once L{finish} has fired).
    """

    def __init__(
        self,
        algorithm: str = DEFAULT_DIGEST,
        readBack: ReadBack | None = None,
        reactor: Any = None,
        pool: HashPool | None = None,
        inline: bool = False,
    ) -> None:
        """
        @param readBack: C{readBack(offset, length)} returns those bytes of
            the object (from a file or a seekable source); without it, only
            pieces offered in order can be hashed.
        @param reactor: hash in a worker thread of C{pool} and report back
            through this reactor's C{callFromThread}; C{None} hashes at once
            in the caller's thread.
        @param pool: the L{HashPool} (default: the shared L{POOL}).
        @param inline: with a C{reactor}, still hash a piece offered while
            no worker holds this hasher at once, in the caller's thread, and
            release it at once: only read-backs (a gap, a resume) go to the
            pool.  On two cores shared by both ends of a transfer this
            measured faster than handing every piece to a thread (see
            L{protocols.bulk.BulkOptions.hashing}).
        """
        self.algorithm = algorithm
        self._inline = inline
        self.position = 0
        self._hash = newHash(algorithm)
        self._readBack = readBack
        self._readable = 0
        self._finishing: tuple[int, Deferred[bytes]] | None = None
        self._finished = False
        self._error: BaseException | None = None
        self._reactor = reactor
        self._pool = (pool or POOL) if reactor is not None else None
        # Work offered from the reactor thread, taken by whichever worker
        # runs this hasher; _queued says one is running or queued to.
        self._inbox: deque[Any] = deque()
        self._lock = threading.Lock()
        self._queued = False
        self._pending: list[tuple[Release, int]] = []
        self._pendingBytes = 0

    # -- the owner's side (reactor thread) --------------------------------

    def offer(self, offset: int, data: bytes | memoryview, release: Release | None = None) -> None:
        """
        Offer the object's bytes at C{offset} (C{bytes}, or a view of a
        buffer that does not change); C{release(len(data))} is called (in
        the reactor thread) once C{data} is no longer needed.
        """
        if self._pool is not None and not (self._inline and not self._queued and not self._finished):
            # (Only this thread sets _queued; a worker clears it once it
            # holds nothing more, so a hasher seen unqueued stays so here.)
            self._submit((offset, data, release))
        else:
            self._consume(offset, data)
            if release is not None:
                release(len(data))

    def allowReadBack(self, upto: int) -> None:
        """Bytes up to C{upto} may now be read back with C{readBack} when they were not offered in order."""
        if self._pool is not None:
            self._submit(upto)
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
        if self._pool is not None:
            self._submit((size, done))
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
        if self._pool is not None:
            self._submit(_STOP)
        else:
            self._finished = True
            # The owner's readBack is usually its bound method: let the
            # owner go without a garbage collection.
            self._readBack = None

    def _submit(self, item: Any) -> None:
        if self._finished:
            return  # stopped or finished: nothing more is hashed
        self._inbox.append(item)
        with self._lock:
            if self._queued:
                return
            self._queued = True
        assert self._pool is not None
        self._pool.submit(self._run)

    # -- hashing (the worker thread, or the caller's without a reactor) ---

    def _consume(self, offset: int, data: bytes | memoryview) -> None:
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

    def _run(self) -> None:
        """Hash what was offered (a bounded batch) and one read-back step; queue again if more is left."""
        inbox = self._inbox
        for _ in range(_BATCH):
            if self._finished or not inbox:
                break
            item = inbox.popleft()
            if item is _STOP:
                self._finished = True
                inbox.clear()
                break
            self._handle(item)
            if self._pendingBytes >= _RELEASE_BATCH:
                self._flushReleases()
        if not self._finished and self._readBack is not None and self._error is None:
            if self.position < self._readable:
                self._catchUp(steps=1)
                self._checkFinished()
        self._flushReleases()
        with self._lock:
            more = not self._finished and (
                bool(inbox) or (self._readBack is not None and self._error is None and self.position < self._readable)
            )
            if not more:
                # Finished or stopped hashers stay marked queued: never run again.
                self._queued = self._finished
                if self._finished:
                    inbox.clear()
                    self._readBack = None  # see abort
                return
        assert self._pool is not None
        self._pool.submit(self._run)

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
