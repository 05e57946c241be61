"""BulkOptions: how a connection moves streams, one frozen record.

Contract: every field has a documented default and the reason for it; a
bad value fails at construction (C{ValueError}), never later on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from framing.bulk.digests import DigestUnavailable, availableDigests, checkAlgorithm

from .allocator import allocatorSteady

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
    """
    How a connection moves streams.  The defaults were measured on loopback
    TCP (see C{tests/benchmarks/bench_bulk.py}).

    @ivar chunkSize: payload bytes per data frame, hence per transport
        write.  1 MiB: per-frame costs (a reactor turn, four headers) vanish
        against the copy, and a frame is still small next to the window.
    @ivar window: the most bytes a receiver keeps in its care per stream
        (received but not yet written and hashed) to begin with, and always
        at least; the sender never has more than the window in flight.
        1.875 MiB: less than two chunks, so a connection cut mid-stream on a
        LAN loses (and a resume resends) less than two chunks, and enough
        that a reactor turn's delay on either side does not starve the
        pipe.  A receiver that hashes in the reactor thread starts from half
        (it takes bytes in about half as fast, and a small call waits behind
        what is in flight: the same time, not the same bytes), or where one
        socket read could take nearly all of that half, from a read and a
        grant step (1.5 MiB with the steady allocator's 1 MiB reads), so
        that it grants while data is still in flight (see
        L{protocols.bulk.tuning.inlineHashingWindow}).  Over a
        latent link a fixed window caps a stream at about C{window / RTT};
        see C{maxWindow}.
    @ivar maxWindow: how far a stream's window may grow on its own
        (autotuning).  The receiver measures the path's base round-trip
        time (each stream's first grant to its first frame, and PINGs) and
        each stream's delivery rate over a few round trips; while the window is what holds the stream back (the sender
        keeps running out of credit), it raises the window to twice the
        bytes delivered per base round trip, up to this.  32 MiB: a 100 ms
        path at up to 160 MiB/s.  Paths with a base RTT under 25 ms
        (loopback, a LAN; see L{protocols.bulk.tuning.MIN_TUNED_RTT}) keep
        C{window}, so nothing changes there.  0 (or anything up to C{window}) turns
        autotuning off, and its probes with it.  A window given to
        L{IncomingStream.receive} is kept as it is.
    @ivar grantStep: credit goes back to the sender in steps of at least
        this many bytes (and of a quarter of the window, if that is less),
        so grants cost a small message per step, not per socket read; a
        sender waits for as much credit before a frame smaller than a chunk.
    @ivar hashing: where the digest of data in flight is computed.
        C{"inline"} (the default): in the reactor thread, piece by piece as
        it is sent or received; on two cores shared by both ends this
        measured faster than handing pieces to a thread, and calls stay
        prompt since a piece is at most one socket read or one chunk.
        C{"thread"}: in a worker thread per stream (C{hashlib} releases the
        GIL), for machines with cores to spare.  Hashing that must read
        bytes back (a stream sent in part, an assembly) always uses a
        thread when the reactor has them; a test clock never does.
    @ivar hashBudget: how far hashing may lag behind the data, in bytes,
        on either side, before the stream waits for it.  The bytes it holds
        have already arrived (a cut loses none of them), so this is memory,
        not window: 8 MiB lets the hashing thread smooth over the moments
        the reactor thread and the peer keep the CPU busy.
    @ivar readSize: bytes asked of the socket per read on a TCP connection
        (Twisted's default is 64 KiB); larger reads mean fewer reactor turns
        per megabyte, and fewer grants (a receiver grants once per read at
        most).  The default, L{ADAPTIVE_READ_SIZE}, is decided as each
        connection is made: L{STEADY_READ_SIZE} (1 MiB) once
        L{protocols.bulk.steadyAllocator} has fixed the process's malloc
        thresholds (L{protocols.bulk.serve} and L{protocols.bulk.connect}
        do it by default), else L{PLAIN_READ_SIZE} (512 KiB: against 256
        KiB, both ends of bench_bulk's chunkwire case took less CPU in four
        runs of four, and 1 MiB reads there cost the receiver a fresh
        megabyte buffer faulted in per read).  C{None} leaves the transport
        alone; any other positive number is used as it is.
    @ivar sendLimit: most bytes handed to the socket per reactor turn on a
        TCP connection (Twisted's default is 128 KiB).  C{None} leaves the
        transport alone.
    @ivar digests: the digests this side computes and accepts, in order of
        preference (default: L{availableDigests}, BLAKE3 first when the
        C{blake3} package is installed, then SHA-256).  Each side states
        them in its HELLO; a stream is checked with the first of its
        sender's list that the receiver also lists.  Leaving one out
        refuses it: a peer that offers none of these gets
        L{DigestUnavailable} before any data moves.
    @ivar initialWindow: the credit every stream has before the receiver
        grants any, as HTTP/2's initial window: stated in this side's
        HELLO, so a sender sends at once (the first byte arrives half a
        round trip after the call, not one and a half).  Data that
        arrives before the application calls C{receive()} is held, up to
        this per stream.  1 MiB (one chunk): the pipe starts full, and at
        most C{maxStreams} such windows are held by streams not yet
        received.  0 restores a first round trip (nothing is sent before
        the first grant).
    @ivar unreadTimeout: seconds an announced stream may wait for
        C{receive()} before it is dropped (its held data freed, the sender
        told, the reason logged).  60: a remote method that keeps a stream
        to receive later has a minute.
    @ivar maxStreams: the most incoming streams the peer may have live on
        the connection at once (announced and neither received to the end,
        failed, cancelled nor dropped unread); one more is a
        L{TooManyStreams} protocol error.  64: each may hold a window of
        memory and an open file, and a client stripes a file over
        connections, not over streams of one connection.
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
        if not self.digests:
            raise DigestUnavailable("a bulk connection needs at least one digest")
        for name in self.digests:
            checkAlgorithm(name)
        object.__setattr__(self, "digests", tuple(self.digests))
