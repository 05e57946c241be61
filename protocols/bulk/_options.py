# -*- test-case-name: tests.protocols.rpc.test_options,tests.protocols.bulk.test_allocator -*-
"""BulkOptions: how a connection moves streams, one frozen record.

Contract: every field has a documented default (the reasons, measured:
docs/design/bulk-options.md); a bad value fails at construction
(C{ValueError}), never later on the wire.  A L{BulkOptions} is what
C{ServerOptions.bulk} and C{ClientOptions.bulk} take (it is a
L{protocols.options.ConnectionExtension}): each connection's broker then
loads a L{protocols.bulk.BulkChannel} (L{BulkOptions.brokerExtension}).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from framing import Limits
from framing.bulk._digests import DigestUnavailable, availableDigests, checkAlgorithm

from .._allocator import allocatorSteady
from .._allocator import steadyAllocator as makeAllocatorSteady

KiB = 1024
MiB = 1024 * KiB


STEADY_READ_SIZE = 1 * MiB
"""
The read size of a bulk connection (L{BulkOptions.readSize} left to its
default) in a process whose malloc thresholds L{protocols.bulk.steadyAllocator}
fixed: a read then takes everything a window has in flight (up to a chunk),
so the receiver makes one reactor turn, one grant and about one file write
per frame instead of two to four, and the sender gets its credit back in one
piece and sends whole chunks (256 MiB CLI upload: 276 frames, 291 reads, 281
grants and 348 C{pwrite}s, against 511, 517, 517 and 1,023 with 512 KiB
reads).
"""

PLAIN_READ_SIZE = 512 * KiB
"""
The default read size anywhere else (no glibc, or C{steadyAllocator=False}):
without the steady allocator each fresh megabyte buffer was faulted in
again, page by page (66,600 minor faults per 256 MiB received, against 600),
so half a megabyte does better there.
"""

ADAPTIVE_READ_SIZE = 0
"""
L{BulkOptions.readSize}'s default: decided when each connection is made,
L{STEADY_READ_SIZE} if L{protocols.bulk.allocatorSteady}, else
L{PLAIN_READ_SIZE} (see L{BulkOptions.socketReadSize}).
"""


@dataclass(frozen=True)
class BulkOptions:
    """How a connection moves streams; a bad value fails at construction.

    @ivar chunkSize: payload bytes per data frame, hence per transport write (1 MiB).
    @ivar window: the most bytes a receiver holds per stream, and the most a sender has in flight (1.875 MiB).
    @ivar maxWindow: how far autotuning may grow a stream's window on a latent path (32 MiB; 0 turns it off).
    @ivar grantStep: the least credit per grant (or a quarter window, if less).
    @ivar hashing: C{"inline"} (the reactor thread, default) or C{"thread"} (a thread per stream).
    @ivar hashBudget: how far hashing may lag behind the data, in bytes, before the stream waits (8 MiB).
    @ivar readSize: bytes per TCP read (L{ADAPTIVE_READ_SIZE}: set per connection; C{None}: untouched).
    @ivar sendLimit: most bytes sent per reactor turn on TCP (C{None}: untouched).
    @ivar digests: digests computed and accepted, by preference (default L{availableDigests}).
    @ivar initialWindow: credit every stream has before any grant, stated in the HELLO (1 MiB; 0: none).
    @ivar unreadTimeout: seconds an announced stream waits for C{receive()} before it is dropped (60).
    @ivar maxStreams: most live incoming streams; one more is L{TooManyStreams} (64).
    @ivar steadyAllocator: whether C{rpc.serve} and the Twisted clients call
        L{protocols.bulk.steadyAllocator}, a B{whole-process} setting (C{True}).

    Design: docs/design/bulk-options.md
    """

    chunkSize: int = 1 * MiB
    window: int = 1920 * KiB
    maxWindow: int = 32 * MiB
    grantStep: int = 512 * KiB
    hashing: str = "inline"
    hashBudget: int = 8 * MiB
    readSize: int | None = ADAPTIVE_READ_SIZE
    sendLimit: int | None = 1 * MiB
    maxStreams: int = 64
    digests: tuple[str, ...] = field(default_factory=availableDigests)
    initialWindow: int = 1 * MiB
    unreadTimeout: float = 60.0
    steadyAllocator: bool = True

    @property
    def startWindow(self) -> int:
        """The initial window this side states in its HELLO: C{initialWindow}, never more than C{window}."""
        return min(self.initialWindow, self.window)

    def socketReadSize(self) -> int | None:
        """
        The bytes a connection made now asks of its socket per read:
        C{readSize}, or if that is L{ADAPTIVE_READ_SIZE}, L{STEADY_READ_SIZE}
        when L{protocols.bulk.allocatorSteady} says so and L{PLAIN_READ_SIZE}
        otherwise.
        """
        if self.readSize == ADAPTIVE_READ_SIZE:
            return STEADY_READ_SIZE if allocatorSteady() else PLAIN_READ_SIZE
        return self.readSize

    def prepareProcess(self) -> None:
        """
        What serving or connecting with these options does first (C{rpc.serve}
        and every Twisted client; not C{rpc.serverFactory}): unless
        C{steadyAllocator} is C{False}, call L{protocols.bulk.steadyAllocator},
        which on Linux with glibc fixes the B{whole process's} malloc
        thresholds, so that per-read buffers stay with the process and
        connections read L{STEADY_READ_SIZE} per turn (otherwise
        L{PLAIN_READ_SIZE}, unless C{readSize} says).
        """
        if self.steadyAllocator:
            makeAllocatorSteady()

    def connectionLimits(self) -> Limits:
        """
        The L{Limits} of a connection carrying streams whose options give
        none: the defaults, but room to hold four of the largest windows of
        received bytes while the application pauses reading (a stream's
        window may be in flight when it does).
        """
        largest = max(self.window, self.maxWindow)
        return Limits(max_buffered_bytes=max(Limits().max_buffered_bytes, 4 * largest))

    def brokerExtension(self, clock: Any) -> Any:
        """A new L{protocols.bulk.BulkChannel} with these options on C{clock}, for one connection's broker."""
        return _channel[0](self, clock)

    def __post_init__(self) -> None:
        if self.chunkSize <= 0 or self.window <= 0 or self.grantStep <= 0 or self.maxStreams <= 0:
            raise ValueError("chunkSize, window, grantStep and maxStreams must be positive")
        if self.maxWindow < 0:
            raise ValueError("maxWindow must be 0 (no autotuning) or more")
        if self.hashing not in ("thread", "inline"):
            raise ValueError("hashing is 'thread' or 'inline'")
        if self.readSize is not None and self.readSize < 0:
            raise ValueError("readSize must be None, 0 (adaptive) or positive")
        if self.initialWindow < 0 or self.unreadTimeout <= 0:
            raise ValueError("initialWindow must be 0 or more and unreadTimeout positive")
        if not isinstance(self.steadyAllocator, bool):
            raise TypeError(f"steadyAllocator must be True or False, not {self.steadyAllocator!r}")
        if not self.digests:
            raise DigestUnavailable("a bulk connection needs at least one digest")
        for name in self.digests:
            checkAlgorithm(name)
        object.__setattr__(self, "digests", tuple(self.digests))


_channel: list[Callable[[BulkOptions, Any], Any]] = []
"""What L{BulkOptions.brokerExtension} builds: L{carriedBy} sets it."""


def carriedBy(channel: Callable[[BulkOptions, Any], Any]) -> None:
    """
    Make C{channel(options, clock)} what L{BulkOptions.brokerExtension}
    builds: L{protocols.bulk._channel} names its C{BulkChannel} when imported
    (which importing this module's package does first).  It imports this
    module, so this one cannot import it.
    """
    _channel[:] = [channel]
