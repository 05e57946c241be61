# -*- test-case-name: tests.protocols.bulk.test_allocator -*-
"""Steady buffers: an opt-in that keeps glibc from giving a transfer's buffers back to the kernel between reads.

Contract: L{steadyAllocator} is for processes that move bulk data.  On
Linux with glibc it fixes malloc's two thresholds (C{M_MMAP_THRESHOLD},
C{M_TRIM_THRESHOLD}), so the megabyte buffers a transfer allocates and
frees for every socket read come from the heap and stay there; anywhere
else it does nothing and says so.  L{allocatorSteady} tells whether it
succeeded in this process (a bulk connection then reads
L{protocols.bulk.STEADY_READ_SIZE} per turn).  C{rpc.serve} and the
Twisted clients with bulk options call it unless their
C{BulkOptions.steadyAllocator} is C{False}, and so does
L{protocols.blockingbulk.connect} (its bulk connections then read
L{protocols.bulk.STEADY_READ_SIZE} too); the setting is the whole
process's.  Imports no Twisted.

Cost: up to C{trimThreshold} bytes of freed memory stay with the process
(the peak is unchanged), and blocks of C{mmapThreshold} or more are always
mapped on their own.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

MiB = 1 << 20

M_TRIM_THRESHOLD = -1
"""glibc's C{mallopt} parameter: free memory at the heap's top kept before it is given back."""
M_MMAP_THRESHOLD = -3
"""glibc's C{mallopt} parameter: allocations this large get their own mapping (setting it stops it moving)."""

_steady = False
"""Whether L{steadyAllocator} fixed this process's thresholds (a test's C library does not count)."""


def steadyAllocator(mmapThreshold: int = 4 * MiB, trimThreshold: int = 32 * MiB, libc: Any = None) -> bool:
    """
    Fix glibc's malloc thresholds for a process that moves bulk data (see
    the module docstring).

    @param mmapThreshold: allocations at least this large are mapped on their
        own (4 MiB: above every buffer a transfer makes).
    @param trimThreshold: free memory at the top of the heap kept for reuse
        (32 MiB: a few windows' worth).
    @param libc: the C library to configure (default: this process's, if
        it is glibc); for tests.
    @return: whether both thresholds were set (C{False} on anything but
        glibc, where nothing is done).
    """
    global _steady
    own = libc is None
    if own:
        libc = _glibc()
        if libc is None:
            return False
    mallopt = libc.mallopt
    done = bool(mallopt(M_MMAP_THRESHOLD, mmapThreshold) == 1 and mallopt(M_TRIM_THRESHOLD, trimThreshold) == 1)
    if own and done:
        _steady = True
    return done


def allocatorSteady() -> bool:
    """
    Whether L{steadyAllocator} has fixed this process's malloc thresholds
    (what the default L{protocols.bulk.BulkOptions.readSize} depends on).
    """
    return _steady


def _glibc() -> Any:
    """This process's C library if it is glibc (it has C{mallopt} with these parameters), else C{None}."""
    if not sys.platform.startswith("linux") or not _libcVersion().startswith("glibc"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return libc


def _libcVersion() -> str:
    """The C library's name and version (C{"glibc 2.36"}), or C{""} if it does not say."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return ""
