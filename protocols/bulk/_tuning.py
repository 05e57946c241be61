# -*- test-case-name: tests.protocols.bulk.test_tuning,tests.protocols.bulk.test_streams -*-
"""Receive windows: each stream's starting window, then autotuning from the base round trip and delivery rate.

Contract: L{receiveWindow} chooses an incoming stream's window and grant
step when it starts: the connection's window (cut by L{inlineHashingWindow}
when the stream is hashed in the reactor thread), or the one the
application asked for, which is then never tuned.  L{RoundTrips} keeps the
smallest round trip its PING probes measured (one in flight, at most one per
interval).  A L{WindowTuner} raises a stream's window to C{2 * rate *
baseRTT} (at most C{maxWindow}) when the sender ran out of credit over an
interval; it never lowers it, and does nothing on paths under
L{MIN_TUNED_RTT} (loopback, a LAN, which send one probe).

Cost: O(1) amortized per frame; a tuner keeps one pair per grant sent in the
last base round trip and one per frame in the last interval.

Design: docs/design/bulk.md
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from ._options import BulkOptions

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
    """The starting window of a stream hashed in the reactor thread, on a
    connection whose reads hand in at most C{readSize} bytes (C{None}: not
    known).

    Half the connection's window (hashing inline halves how fast bytes are
    taken in); but where a read plus a grant step would not fit in that half,
    a read plus a grant step (at most the connection's window), so the sender
    keeps credit in flight while the receiver works.  With the defaults:
    960 KiB for 512 KiB reads (no steady allocator), 1.5 MiB for 1 MiB reads.

    Design (and the measurements): docs/design/bulk.md
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
