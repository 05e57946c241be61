"""Guarding a server's connections against slow, silent, dead and too many peers.

Contract: a guarded connection (one watched by a L{ConnectionGuard}, which
observes it from outside: no subclass, no class swap) is dropped, with a logged reason
sent to the peer in an ERROR token and passed to C{connectionLost} as a
L{GuardError}, when

  - its preamble has not arrived C{preamble_timeout} seconds after connecting;
  - an object has been in progress longer than C{stall_timeout} plus one
    second per C{min_rate} bytes received for it (one byte a second, a
    header that never ends and a body that never comes all fail this);
  - one object grows past C{max_object_bytes} received bytes;
  - nothing at all has arrived for C{keepalive_interval} seconds, a PING was
    sent, and nothing has arrived C{keepalive_timeout} seconds after it (any
    byte, the PONG included, shows that the peer is alive);
  - no object has completed for C{idle_timeout} seconds;
  - bytes have been waiting to be sent to it for C{send_stall_timeout}
    seconds and the peer took none of them (a slow reader that takes some
    is not stalled; a bulk stream waiting for credit has nothing waiting);
  - C{max_connections} connections of its factory, or C{max_per_peer} from
    the same IP address, are already up (the new one is dropped at once);
    see L{GuardPolicy} for the defaults and their trade-off.

Cost: each received chunk stores a time stamp and adds a length; each
connection has at most one pending timer, rescheduled only when it fires, so
the per-byte and per-message cost does not depend on the timeouts.  A dropped
connection that does not read its ERROR is aborted after C{abort_after}
seconds, so an attacker cannot keep it open by not reading.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from twisted.logger import LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import ProtocolError
from framing.wire import PREAMBLE

from .base import TokenProtocol
from .interfaces import IConnectionObserver
from .logs import LogPolicy, RefusalLog


class GuardError(ProtocolError):
    """A guard dropped the connection; C{code} says which rule."""

    code = "guard"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class GuardPolicy:
    """
    The timeouts and caps of a guarded server; C{None} turns a rule off.

    @ivar preamble_timeout: seconds for the peer's preamble to arrive.  10 s.
    @ivar stall_timeout: seconds an object may be in progress, plus one
        second per C{min_rate} bytes of it that arrived.  30 s.
    @ivar min_rate: bytes per second a peer must keep up while sending an
        object, after C{stall_timeout}.  1 KiB/s.
    @ivar max_object_bytes: most bytes one object may take on the wire;
        C{None} leaves it to L{framing.Limits}.
    @ivar keepalive_interval: seconds of silence before a PING.  30 s.
    @ivar keepalive_timeout: seconds after that PING for any byte to arrive.
        10 s.
    @ivar idle_timeout: seconds without a completed object.  15 min.
    @ivar max_connections: most connections up at once per factory.  1000:
        below the usual limit of 1,024 file descriptors per process, so the
        guard refuses with a logged reason before C{accept} fails for want
        of a descriptor.
    @ivar max_per_peer: most connections up at once from one IP address.
        20, so that filling C{max_connections} takes 50 addresses, not the
        10 it took with 100 per address (1,000 connections from 10 loopback
        addresses left no room for anyone else).  The trade-off: many
        honest clients behind one address (a NAT, a proxy, a busy worker
        host) share those 20, so raise it for such deployments, and raise
        C{max_connections} with it (and the process's descriptor limit) to
        keep the ratio.  Per-address caps slow a flood from many addresses
        but do not stop one: an attacker with an IPv6 prefix has addresses
        to spare; the idle and keepalive timeouts are what reclaim their
        slots.
    @ivar abort_after: seconds a dropped connection may take to read its
        ERROR before it is aborted.  2 s.
    @ivar send_stall_timeout: seconds that bytes may wait to be sent to the
        peer without the peer taking any of them.  60 s, as nginx's
        C{send_timeout}: back-pressure (C{Limits.send_high_water}) already
        bounds what is held for such a peer; this frees even that.
    """

    preamble_timeout: float | None = 10.0
    stall_timeout: float | None = 30.0
    min_rate: float = 1024.0
    max_object_bytes: int | None = None
    keepalive_interval: float | None = 30.0
    keepalive_timeout: float | None = 10.0
    idle_timeout: float | None = 900.0
    max_connections: int | None = 1000
    max_per_peer: int | None = 20
    abort_after: float = 2.0
    send_stall_timeout: float | None = 60.0


class ConnectionCounter:
    """
    The connections up for one factory; shared by its guarded protocols.
    The per-peer cap is checked first, so a flooding host is told about its
    own cap rather than the global one; C{perPeer} holds only hosts with
    connections up, so its size is bounded by C{active}.

    @ivar active: how many are up now.
    @ivar refused: how many were dropped for being over a limit.
    @ivar perPeer: connections up now per peer host.
    @ivar refusals: the rate-limited log of refused connections, shared by
        the factory's connections: a flood of connections writes a few lines
        and a count, not a line each.
    """

    def __init__(self) -> None:
        self.active = 0
        self.refused = 0
        self.perPeer: dict[str, int] = {}
        self.refusals = RefusalLog(LogPolicy(max_refusals=None))

    def admit(self, host: str, policy: GuardPolicy) -> str | None:
        """Count a new connection from C{host}, or say why it is over a limit."""
        total, mine = policy.max_connections, policy.max_per_peer
        if mine is not None and self.perPeer.get(host, 0) >= mine:
            self.refused += 1
            return f"{self.perPeer[host]} connections from {host} are up, the limit per peer is {mine}"
        if total is not None and self.active >= total:
            self.refused += 1
            return f"{self.active} connections are up, the limit is {total}"
        self.active += 1
        self.perPeer[host] = self.perPeer.get(host, 0) + 1
        return None

    def release(self, host: str) -> None:
        """Uncount a connection from C{host}."""
        self.active -= 1
        left = self.perPeer.pop(host, 1) - 1
        if left:
            self.perPeer[host] = left


@implementer(IConnectionObserver)
class ConnectionGuard:
    """
    Applies a L{GuardPolicy} to one connection, watching it from outside
    (an L{IConnectionObserver}) through its public state only.

    @ivar protocol: the L{TokenProtocol} guarded.
    @ivar policy: the rules.
    @ivar clock: an C{IReactorTime}.
    @ivar counter: the L{ConnectionCounter} shared with the other
        connections of the same factory, or C{None} for no connection cap.
    @ivar pingsSent: keepalive PINGs sent so far.
    """

    def __init__(
        self, protocol: TokenProtocol, policy: GuardPolicy, counter: ConnectionCounter | None, clock: Any
    ) -> None:
        # A proxy: the protocol holds its guard, which must not keep it alive.
        self.protocol: Any = weakref.proxy(protocol)
        self.policy = policy
        self.counter = counter
        self.clock = clock
        self.pingsSent = 0
        self._timer: Any = None
        self._abort: Any = None
        self._host: str | None = None
        self._received = 0
        self._objectStart: float | None = None
        self._objectBytes = 0
        self._pingAt: float | None = None
        self._sent = 0
        self._sendWaitingSince: float | None = None
        self._backloggedAt: float | None = None
        self._connected = self._lastByte = self._lastObject = clock.seconds()

    def connectionStarted(self, protocol: Any) -> None:
        """Start the clocks, count the connection, and refuse it if too many are up."""
        now = self.clock.seconds()
        self._connected = self._lastByte = self._lastObject = now
        counter, protocol = self.counter, self.protocol
        if counter is not None and protocol.failure is None:
            host = _host(protocol.transport)
            refusal = counter.admit(host, self.policy)
            if refusal is not None:
                protocol.transport.flush()  # a held preamble first, so that the peer can read the ERROR
                counter.refusals.failure(
                    protocol.log,
                    "refused connections",
                    "too-many-connections",
                    "Dropping connection from {address}: {code}: {error}",
                    LogLevel.warn,
                    address=protocol.peerName(),
                    code="too-many-connections",
                    error=refusal,
                )
                self._drop("too-many-connections", refusal, logged=False)
                return
            self._host = host
        if protocol.failure is None:
            self._schedule()

    # -- what the peer does ----------------------------------------------------

    def dataArrived(self, length: int) -> None:
        """Note the time and the count."""
        self._lastByte = self.clock.seconds()
        self._received += length

    def dataDecoded(self, length: int, completed: int, controlBytes: int) -> None:
        """
        Note the progress of the object in progress.  This is counted where
        bytes are decoded, not where they arrive: bytes held while reading is
        paused belong to no object yet.  PINGs and PONGs between an object's
        tokens keep the connection alive; they are not progress of it.
        """
        protocol = self.protocol
        if protocol.failure is not None:
            return
        progress = length - controlBytes
        if completed:
            self._lastObject = self.clock.seconds()
        if protocol.decoder.at_boundary or self._received <= len(PREAMBLE):
            # (A partial preamble is the preamble rule's business.)
            self._objectStart = None
            self._objectBytes = 0
            return
        if completed:
            # Objects ended in this read: the one in progress began after
            # them, in at most this read's bytes.
            self._objectStart = None
            self._objectBytes = progress
        else:
            self._objectBytes += progress
        if self._objectStart is None:
            self._objectStart = self.clock.seconds()
            self._stallStarted()
        limit = self.policy.max_object_bytes
        if limit is not None and self._objectBytes > limit:
            self._drop("object-too-large", f"an object took more than {limit} bytes on the wire")

    def _stallStarted(self) -> None:
        """An object is now in progress: make sure the timer fires by its stall deadline."""
        stall, timer = self.policy.stall_timeout, self._timer
        if stall is None or timer is None or not timer.active():
            return
        if timer.getTime() > self.clock.seconds() + stall:
            timer.cancel()
            self._schedule()

    def sendBacklogChanged(self, backlogged: bool) -> None:
        """
        Reading stopped for a peer that does not read: see that the
        send-stall rule watches it.  When reading starts again, the object
        in progress is given back the time it was not read, so that the
        stall rule does not count our own pause against the peer.
        """
        now = self.clock.seconds()
        if not backlogged:
            if self._objectStart is not None and self._backloggedAt is not None:
                self._objectStart += now - self._backloggedAt
            self._backloggedAt = None
            return
        self._backloggedAt = now
        if self.protocol.failure is None:
            self._watchSends(now)
            timer = self._timer
            if timer is not None and timer.active():
                timer.cancel()
            self._schedule()

    def _watchSends(self, now: float) -> None:
        """
        Note whether bytes wait to be sent and whether the peer took any
        since the last look: the send-stall clock runs from the last time it
        took some.
        """
        transport = self.protocol.transport
        sent = transport.bytesSent
        if not transport.pendingBytes:
            self._sendWaitingSince = None
        elif sent != self._sent or self._sendWaitingSince is None:
            self._sendWaitingSince = now
        self._sent = sent

    def connectionEnded(self, reason: Failure) -> None:
        """Stop the timer and uncount the connection."""
        for timer in (self._timer, self._abort):
            if timer is not None and timer.active():
                timer.cancel()
        self._timer = self._abort = None
        host, self._host = self._host, None
        if host is not None and self.counter is not None:
            self.counter.release(host)

    # -- the timer -------------------------------------------------------------

    def _deadlines(self) -> list[tuple[float, str]]:
        """Each active rule's next deadline with its name."""
        policy = self.policy
        deadlines = []
        if policy.preamble_timeout is not None and self._received < len(PREAMBLE):
            deadlines.append((self._connected + policy.preamble_timeout, "preamble"))
        start = self._objectStart
        if policy.stall_timeout is not None and start is not None and not self.protocol.readingPaused:
            allowed = policy.stall_timeout + self._objectBytes / policy.min_rate
            deadlines.append((start + allowed, "stall"))
        if policy.keepalive_interval is not None:
            if self._pingAt is None or self._lastByte > self._pingAt:
                deadlines.append((self._lastByte + policy.keepalive_interval, "ping"))
            elif policy.keepalive_timeout is not None:
                deadlines.append((self._pingAt + policy.keepalive_timeout, "keepalive"))
        if policy.idle_timeout is not None:
            deadlines.append((self._lastObject + policy.idle_timeout, "idle"))
        waiting = self._sendWaitingSince
        if policy.send_stall_timeout is not None and waiting is not None:
            # Look again a few times per timeout, to see whether it moved.
            deadlines.append((waiting + policy.send_stall_timeout, "send-stall"))
            deadlines.append((self.clock.seconds() + policy.send_stall_timeout / 4, "send-check"))
        return deadlines

    def _schedule(self) -> None:
        deadlines = self._deadlines()
        if deadlines:
            when = min(deadline for deadline, _ in deadlines)
            delay = max(0.0, when - self.clock.seconds())
            self._timer = self.clock.callLater(delay, self._check)

    def _check(self) -> None:
        self._timer = None
        protocol = self.protocol
        if protocol.failure is not None or protocol.transport is None:
            return
        now = self.clock.seconds()
        if self.policy.send_stall_timeout is not None:
            self._watchSends(now)
        for deadline, rule in sorted(self._deadlines()):
            if deadline > now:
                break
            if rule == "ping":
                self._pingAt = now
                self.pingsSent += 1
                # Any byte back counts (the timer's keepalive rule): the answer itself is not waited on.
                protocol.sendPing().addErrback(_ignore)
                continue
            if rule == "send-check":
                continue
            self._drop(*self._reason(rule, now))
            return
        self._schedule()

    def _reason(self, rule: str, now: float) -> tuple[str, str]:
        policy = self.policy
        if rule == "preamble":
            return "preamble-timeout", f"no preamble within {policy.preamble_timeout} s ({self._received} bytes)"
        if rule == "stall":
            return (
                "stalled",
                f"an object was in progress for {now - (self._objectStart or now):.1f} s with only "
                f"{self._objectBytes} bytes received (at least {policy.min_rate:g} bytes/s "
                f"after {policy.stall_timeout} s)",
            )
        if rule == "send-stall":
            return (
                "send-stalled",
                f"the peer took none of the {self.protocol.transport.pendingBytes} bytes waiting for it "
                f"in {policy.send_stall_timeout} s",
            )
        if rule == "keepalive":
            return "keepalive-timeout", f"nothing received within {policy.keepalive_timeout} s of a PING"
        return "idle-timeout", f"no object received for {policy.idle_timeout} s"

    def _drop(self, code: str, message: str, logged: bool = True) -> None:
        """Drop the connection as for a ProtocolError, and abort it if it lingers."""
        protocol = self.protocol
        if protocol.failure is not None:
            return
        transport = protocol.transport
        protocol.failConnection(GuardError(code, message), logged)
        self._abort = self.clock.callLater(self.policy.abort_after, _abortIfOpen, transport)


def _ignore(_: object) -> None:
    return None


def _host(transport: Any) -> str:
    try:
        return str(getattr(transport.getPeer(), "host", "?"))
    except Exception:
        return "?"


def _abortIfOpen(transport: Any) -> None:
    inner = getattr(transport, "transport", transport)
    if getattr(inner, "connected", False):
        transport.abortConnection()


def connectionOf(protocolOrReceiver: Any) -> TokenProtocol:
    """
    The L{TokenProtocol} of C{protocolOrReceiver}: itself, or the
    C{connection} of a receiver (an RPC broker) that made its own.
    """
    if isinstance(protocolOrReceiver, TokenProtocol):
        return protocolOrReceiver
    connection = getattr(protocolOrReceiver, "connection", None)
    if not isinstance(connection, TokenProtocol):
        raise TypeError(f"{protocolOrReceiver!r} is neither a TokenProtocol nor a receiver with one")
    return connection


def guard(protocol: Any, policy: GuardPolicy, counter: ConnectionCounter | None, clock: Any = None) -> Any:
    """
    Guard C{protocol} (a L{TokenProtocol}, or a receiver with its
    C{connection}), just built and not yet connected, with C{policy},
    C{counter} and C{clock} (the global reactor if C{None}); returns
    C{protocol}.  Its L{ConnectionGuard} is its C{guard} attribute.
    """
    if clock is None:
        from twisted.internet import reactor

        clock = reactor
    connection = connectionOf(protocol)
    watcher = ConnectionGuard(connection, policy, counter, clock)
    connection.addObserver(watcher)
    connection.guard = watcher
    return protocol


class GuardedFactory:
    """
    Wraps a factory of L{TokenProtocol}s so that each protocol it builds is
    L{guard}ed, all sharing one L{ConnectionCounter}.  Other attributes are
    the wrapped factory's.

    @ivar counter: the connections up now and refused so far.
    """

    def __init__(self, factory: Any, policy: GuardPolicy | None = None, clock: Any = None) -> None:
        self.wrappedFactory = factory
        self.policy = policy or GuardPolicy()
        self.clock = clock
        self.counter = ConnectionCounter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrappedFactory, name)

    def buildProtocol(self, addr: Any) -> Any:
        protocol = self.wrappedFactory.buildProtocol(addr)
        if protocol is None:
            return None
        return guard(protocol, self.policy, self.counter, self.clock)


def addGuardArguments(parser: Any, policy: GuardPolicy | None = None) -> None:
    """Add the command-line options of a L{GuardPolicy} to an C{argparse} parser."""
    policy = policy or GuardPolicy()

    def seconds(text: str) -> float | None:
        value = float(text)
        return None if value <= 0 else value

    for name, help in [
        ("preamble_timeout", "seconds for a client's preamble to arrive"),
        ("stall_timeout", "seconds an object may take, plus one per --min-rate bytes"),
        ("keepalive_interval", "seconds of silence before a PING"),
        ("keepalive_timeout", "seconds after a PING for the client to answer"),
        ("idle_timeout", "seconds without a complete object"),
        ("send_stall_timeout", "seconds a client may take none of the bytes waiting for it"),
    ]:
        option = "--" + name.replace("_", "-")
        parser.add_argument(option, type=seconds, default=getattr(policy, name), metavar="S", help=f"{help} (0: never)")
    parser.add_argument("--min-rate", type=float, default=policy.min_rate, help="bytes/s while sending an object")
    parser.add_argument("--max-object-bytes", type=int, default=policy.max_object_bytes, help="wire bytes per object")
    parser.add_argument(
        "--max-connections", type=int, default=policy.max_connections, help="connections up at once (0: no limit)"
    )
    parser.add_argument(
        "--max-per-peer", type=int, default=policy.max_per_peer, help="connections up at once per IP (0: no limit)"
    )


def policyFromArguments(args: Any) -> GuardPolicy:
    """The L{GuardPolicy} that the options of L{addGuardArguments} describe."""
    return GuardPolicy(
        preamble_timeout=args.preamble_timeout,
        stall_timeout=args.stall_timeout,
        min_rate=args.min_rate,
        max_object_bytes=args.max_object_bytes or None,
        keepalive_interval=args.keepalive_interval,
        keepalive_timeout=args.keepalive_timeout,
        idle_timeout=args.idle_timeout,
        send_stall_timeout=args.send_stall_timeout,
        max_connections=args.max_connections or None,
        max_per_peer=args.max_per_peer or None,
    )
