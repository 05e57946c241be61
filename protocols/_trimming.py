# -*- test-case-name: tests.protocols.test_trimming -*-
"""Trimming: give the C allocator's free memory back to the system after a connection that held much ends.

Contract: L{connectionReleased} is told, by the Twisted shell
(L{protocols._base.TokenProtocol.connectionLost}), the most a connection's
ledger held at once; when that was at least L{TRIM_AFTER_PEAK}, glibc's
C{malloc_trim(0)} runs soon after on a thread of its own (once the
connection's objects are freed: L{TRIM_DELAY}), at most once per
L{TRIM_INTERVAL}, however many connections end meanwhile.  Why: glibc
keeps the pages of freed chunks below a live one, so a server stood tens of
MiB above idle after a hostile peer's large objects were let go, more after
some rounds than others (interop x never-read left 23, 36, then 62 MiB above
idle after three rounds, which the hostile-peer catalogue takes for a
leak).  C{malloc_trim} returns every whole free page of every arena
(C{madvise}), not only the heap's top.  CPython's own allocator frees an
arena once all of it is free; what it keeps is not trimmed here.

Cost: a short-lived thread per trim (none between trims); a trim walks the heap's free chunks (8.6 ms in a process
of 198 MiB, half its small blocks freed, on this 2-core machine under
load) without the GIL, never on the reactor thread; nothing at all where C{malloc_trim} does not exist (not glibc).
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable

TRIM_AFTER_PEAK = 1 << 20
"""A connection whose ledger held at least this much at once (1 MiB) asks for a trim when it ends."""
TRIM_INTERVAL = 1.0
"""The least time, in seconds, between two trims."""
TRIM_DELAY = 0.1
"""Seconds between the request and the trim: the ended connection's objects are freed at the end of its turn."""


def _mallocTrim() -> Callable[[], object] | None:
    """glibc's C{malloc_trim(0)}, or C{None} where there is none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class Trimmer:
    """
    Runs C{trim} on a thread of its own when asked (L{request}), no sooner
    than C{delay} after the request and C{interval} after the last run; the
    thread ends with the trim (a server's thread count is back at idle).

    @ivar trims: how many times C{trim} ran.
    """

    def __init__(
        self,
        trim: Callable[[], object] | None,
        interval: float = TRIM_INTERVAL,
        delay: float = TRIM_DELAY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._trim = trim
        self._interval = interval
        self._delay = delay
        self._clock = clock
        self._sleep = sleep
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = False
        self._last = -interval
        self.trims = 0

    def request(self) -> None:
        """Ask for a trim (O(1); starts the thread that makes it, unless one is waiting to)."""
        if self._trim is None:
            return
        with self._lock:
            if self._pending:
                return
            self._pending = True
            self._thread = threading.Thread(target=self._run, name="chunkwire-trim", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        trim = self._trim
        assert trim is not None
        self._sleep(max(self._delay, self._last + self._interval - self._clock()))
        with self._lock:
            self._pending = False  # (a request from now on is served by a trim after this one)
            self._last = self._clock()
        trim()
        self.trims += 1


TRIMMER = Trimmer(_mallocTrim())
"""The process's trimmer (glibc's C{malloc_trim}, or none)."""


def connectionReleased(peak: int) -> None:
    """A connection ended whose ledger held at most C{peak} bytes at once: ask for a trim if that was much."""
    if peak >= TRIM_AFTER_PEAK:
        TRIMMER.request()
