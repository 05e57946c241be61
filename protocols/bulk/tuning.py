"""Receive windows: each stream's starting window, then autotuning from the base round trip and delivery rate.

Contract: L{receiveWindow} chooses an incoming stream's window and grant
step when it starts: the connection's window (cut by L{inlineHashingWindow}
when the stream is hashed in the reactor thread), or the one the
application asked for, which is then never tuned.

Contract: L{RoundTrips} estimates a connection's base round-trip time from
PING/PONG probes (every stream starts with the receiver's initial window,
so its first frame follows no grant and gives no sample; the first probe
goes out with the first frame of a tuned stream, and no window grows before
one confirmed the path), sent with the connection's C{sendPing} (each PING
has its own id, so an application's or the guard's pings never answer a
probe), one in flight at a time, at most one per measuring interval.  It
keeps the minimum sample: queueing and a busy peer only ever add to a
sample, so the smallest is the closest to the path itself.  A connection
on loopback or a LAN sends one probe: its answer is under
L{MIN_TUNED_RTT}, so nothing more changes on the wire there.

A L{WindowTuner} watches one incoming stream and raises its window to
C{2 * rate * baseRTT} (at most C{maxWindow}) when, over an interval of at
least L{INTERVAL_RTTS} base round trips, the sender ran out of credit: the
window, not the link or the source, was what held the stream back.  It
never lowers the window, and leaves it alone on paths with a base RTT under
L{MIN_TUNED_RTT}: on loopback and a LAN nothing changes.  Per frame the
cost is O(1) amortized; a tuner keeps one C{(time, granted)} pair per grant
sent within the last base RTT, and one C{(time, received)} pair per frame
arrived within the last measuring interval.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from .options import BulkOptions

INTERVAL_RTTS = 2
"""A rate is measured over at least this many base RTTs: enough that the
bursts of a window-limited stream (a window per round trip) average out.
A probe goes out at most once per such interval."""

MIN_TUNED_RTT = 0.025
"""No window grows on a path whose base RTT is under this (25 ms): there a
round trip measured by the peers may be mostly their own work, not the
path (on a busy loopback a PONG waits behind data for 5 ms and more, a
first frame for a chunk to be read and copied), and C{2 * rate * RTT} would
grow windows for nothing, making cuts resend more and calls wait longer;
and the configured window already serves such a path at 75 MiB/s per
stream (1.875 MiB per 25 ms).  The in-memory test networks, whose clocks
step by 10 ms, stay under it too."""


class RoundTrips:
    """
    A connection's base round-trip time, from its own PING/PONG probes and
    the samples its streams take (L{sample}).

    @ivar base: the smallest round trip measured so far, in seconds, or
        C{None} before the first sample.
    @ivar samples: samples taken so far.
    @ivar probed: samples taken so far from probes.
    """

    def __init__(self, clock: Any, sendPing: Callable[[], Deferred[float]]) -> None:
        """
        @param clock: the C{IReactorTime} that times probes.
        @param sendPing: sends a PING; its result fires when the PONG came back.
        """
        self.base: float | None = None
        self.samples = 0
        self.probed = 0
        self._clock = clock
        self._sendPing = sendPing
        self._inFlight = False

    def probe(self) -> None:
        """Send a probe, unless one is already waiting for its answer."""
        if self._inFlight:
            return
        self._inFlight = True
        sentAt = self._clock.seconds()
        self._sendPing().addCallbacks(self._answered, self._lost, callbackArgs=(sentAt,))

    def _answered(self, _: float, sentAt: float) -> None:
        self._inFlight = False
        self.probed += 1
        self.sample(self._clock.seconds() - sentAt)

    def _lost(self, reason: Failure) -> None:
        """The connection went before the probe's answer: nothing to measure (and no error to log)."""
        self._inFlight = False

    def sample(self, seconds: float) -> None:
        """
        Take a round trip measured otherwise: the time from a stream's
        first grant to its first frame (the sender sends nothing before).
        """
        seconds = max(0.0, seconds)
        self.base = seconds if self.base is None else min(self.base, seconds)
        self.samples += 1


class WindowTuner:
    """
    Grows one incoming stream's window to what the path needs.

    The receiver tells it of every grant it sends (L{granted}) and every
    data frame that arrives (L{frameArrived}).  A frame shows that the
    sender ran out of credit when it leaves less than C{slack} bytes of the
    credit granted at least one base RTT earlier (what the sender could
    have had when it sent the frame).  The delivery rate is measured over
    the last L{INTERVAL_RTTS} base RTTs, a span that slides with each frame, so a grown window is used as soon as it
    shows in what arrives.

    @ivar window: the window now (never below the one it started with).
    @ivar maxWindow: the most it may grow to.
    @ivar fixed: whether the window is known never to grow: the base RTT
        is under L{MIN_TUNED_RTT} (and a minimum only goes down), as on
        loopback and a LAN.  Its receiver then lets it go, and reads no
        clock per frame and per grant for it.
    """

    def __init__(self, window: int, maxWindow: int, slack: int, roundTrips: RoundTrips) -> None:
        self.window = window
        self.maxWindow = max(window, maxWindow)
        self._slack = slack
        self._roundTrips = roundTrips
        # Both oldest first, pruned to the newest entry at least a span (a
        # base RTT for grants) old and those since: (time, bytes granted in
        # all) per grant sent, (time, bytes received before it) per frame.
        self._grants: deque[tuple[float, int]] = deque()
        self._arrivals: deque[tuple[float, int]] = deque()
        self._lastLimited = -1.0
        self._nextProbe = 0.0
        self.fixed = False

    def granted(self, now: float, total: int) -> None:
        """The receiver has now granted C{total} bytes in all."""
        self._grants.append((now, total))
        _newestBefore(self._grants, now - (self._roundTrips.base or 0.0))

    def frameArrived(self, now: float, announced: int, received: int) -> bool:
        """
        A frame's header arrived, taking the bytes the sender has sent to
        C{announced}; C{received} bytes came before it.  Returns whether
        the window grew (the receiver should grant the difference).
        """
        roundTrips = self._roundTrips
        base = roundTrips.base
        if base is None:
            # Nothing measured yet: a stream's first frame follows no grant
            # (the initial window), so only a probe tells the path.
            roundTrips.probe()
            return False
        if base < MIN_TUNED_RTT:
            # Nothing to tune, ever: the minimum only goes down.
            self.fixed = True
            return False
        if _newestBefore(self._grants, now - base) - announced < self._slack:
            self._lastLimited = now
        span = INTERVAL_RTTS * base
        arrivals = self._arrivals
        arrivals.append((now, received))
        _newestBefore(arrivals, now - span)
        if now >= self._nextProbe:
            # A fresh sample now and then: one taken while the path was
            # busy may have been inflated, and only the minimum is kept.
            self._nextProbe = now + span
            roundTrips.probe()
        since, before = arrivals[0]
        if now - since < span or not roundTrips.probed:
            # A first frame may have been late for reasons of the sender's
            # own (a source slow to start): a probe must confirm the path.
            return False
        target = min(int(2 * (received - before) / (now - since) * base), self.maxWindow)
        if self._lastLimited >= since and target > self.window:
            self.window = target
            return True
        return False


def _newestBefore(entries: deque[tuple[float, int]], cutoff: float) -> int:
    """Drop the entries older than the newest one at or before C{cutoff}; return its value (or the oldest's, or 0)."""
    while len(entries) > 1 and entries[1][0] <= cutoff:
        entries.popleft()
    return entries[0][1] if entries else 0


def grantStepOf(options: BulkOptions, window: int) -> int:
    """The grant step of a stream starting with C{window}: C{grantStep}, at most a quarter of the window."""
    return min(options.grantStep, max(window // 4, 1))


def inlineHashingWindow(options: BulkOptions, readSize: int | None) -> int:
    """
    The starting window of a stream hashed in the reactor thread, on a
    connection whose reads hand in at most C{readSize} bytes (C{None}: not
    known).

    Half the connection's window: hashing in the reactor thread about
    halves how fast a receiver takes bytes in, and a call waits behind what
    is in flight, so the window is kept to the same time, not the same
    bytes.  But a receiver grants what a read freed only once it has
    written and hashed that read, so a read that can take in (nearly) all
    the window leaves the sender without credit, and nothing in flight,
    while the receiver works: the two ends then take turns instead of
    working at once.  So when a read could leave less than a grant step of
    the halved window in flight, the window is a read and a grant step
    instead (never more than the connection's window).  With the defaults:
    960 KiB where reads are 512 KiB (the plain read size), 1.5 MiB where
    they are 1 MiB (the steady allocator's).  (C{bench_bulk}'s library
    send, 512 MiB, three runs: with 960 KiB and 1 MiB reads, 91 of 1,166,
    288 of 906 and 546 of 547 grants left less than a grant step in
    flight; with 1.5 MiB none of about 1,024.)

    A process without the steady allocator keeps its halved window: there,
    with glibc's own thresholds, a 1.5 MiB window made the top of the heap
    go back to the kernel after a read and be faulted in again for the
    next (C{bench_bulk}'s chunkwire case, 256 MiB, its server reading 512
    KiB: 800 to 1,600 C{brk} calls and 60,000 to 124,000 minor faults,
    against 100 to 200 and under 9,000 with 960 KiB), about twice the
    receiver's CPU per byte.
    """
    half = options.window // 2
    if readSize is None or readSize + grantStepOf(options, half) <= half:
        return half
    return min(options.window, readSize + options.grantStep)


def receiveWindow(
    options: BulkOptions,
    asked: int | None,
    autotuning: bool,
    hashingInline: bool,
    roundTrips: RoundTrips,
    readSize: int | None = None,
) -> tuple[int, int, WindowTuner | None]:
    """
    The window, grant step and L{WindowTuner} (C{None}: the window stays)
    of an incoming stream that starts now.

    @param asked: the window the application asked for, or C{None} for the
        connection's (C{options.window}).
    @param autotuning: whether the connection's windows may grow.
    @param hashingInline: whether the stream is hashed in the reactor thread.
    @param readSize: the most bytes one read of the connection hands in,
        if known (see L{inlineHashingWindow}).
    """
    # A window asked for by name is kept; the connection's may grow.
    tunable = asked is None and autotuning
    window = asked
    if window is None:
        window = options.window
        if hashingInline:
            window = inlineHashingWindow(options, readSize)
    # Steps stay those of the starting window: a grown window only
    # means more steps in flight.
    step = grantStepOf(options, window)
    # A sender sends no frame smaller than its credit step (a quarter of
    # the first grant, at most grantStep): less than a step left means
    # it ran out of credit.
    tuner = WindowTuner(window, options.maxWindow, step, roundTrips) if tunable else None
    return window, step, tuner
