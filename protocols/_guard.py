# -*- test-case-name: tests.protocols.test_guard,tests.protocols.test_guard_caps,tests.protocols.test_guarded_serve -*-
"""Guarding a server's connections against slow, silent, dead and too many peers.

Contract: a guarded connection (one watched by a L{ConnectionGuard}, which
observes it from outside: no subclass, no class swap) is dropped, with a logged reason
sent to the peer in an ERROR token and passed to C{connectionLost} as a
L{GuardError}, when

  - its preamble has not arrived C{preambleTimeout} seconds after connecting;
  - an object has been in progress longer than C{stallTimeout} plus one
    second per C{minRate} bytes received for it (one byte a second, a
    header that never ends and a body that never comes all fail this);
  - one object grows past C{maxObjectBytes} received bytes;
  - nothing at all has arrived for C{keepaliveInterval} seconds, a PING was
    sent, and nothing has arrived C{keepaliveTimeout} seconds after it (any
    byte, the PONG included, shows that the peer is alive);
  - no object has completed for C{idleTimeout} seconds (a connection whose
    receiver's extension says C{flowPaused}, a bulk stream held by flow
    control, is paused, not idle);
  - bytes have been waiting to be sent to it for C{sendStallTimeout}
    seconds and the peer took none of them (a slow reader that takes some
    is not stalled; a bulk stream waiting for credit has nothing waiting);
  - C{maxConnections} connections of its factory, or C{maxPerPeer} from
    the same IP address, are already up (the new one is dropped at once);
    the last C{newPeerReserve} of the C{maxConnections} slots are kept for
    addresses with no connection up, and when every slot is taken the
    connection idle longest (no object in progress, nothing waiting to be
    sent, no call running, idle at least C{evictIdleAfter} seconds) is
    dropped to make room, as nginx closes idle keep-alive connections when
    it runs out; failing that (every connection busy), with C{fairEviction},
    the least recently active connection of the address holding the most
    connections is dropped, if that address holds at least two more than
    the newcomer's would, so that no address holding many connections,
    busy or not, can starve addresses holding fewer; see L{GuardPolicy}
    for the defaults and their trade-off.

Cost: each received chunk stores a time stamp and adds a length; each
connection has at most one pending timer, rescheduled only when it fires, so
the per-byte and per-message cost does not depend on the timeouts; a read
that completes objects moves its connection to the end of its counter's
order of activity and in its address's (O(1)); finding an idle one to
evict looks at no more than L{EVICTION_SCAN} connections, and finding the
address holding the most is O(1) (addresses are kept in buckets by their
count, which moves by one per admission or release).  A dropped
connection that does not read its ERROR is aborted after C{abortAfter}
seconds, so an attacker cannot keep it open by not reading.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from twisted.logger import LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import ProtocolError
from framing._ledger import LedgerPool
from framing.wire import PREAMBLE

from ._base import TokenProtocol
from ._interfaces import IConnectionObserver
from ._logs import LogPolicy, RefusalLog
from ._proxyheader import clientAddress

_PREAMBLE_LENGTH = len(PREAMBLE)
"""The preamble's length (read per decoded read, by L{ConnectionGuard.dataRead})."""


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

    @ivar preambleTimeout: seconds for the peer's preamble to arrive.  10 s.
    @ivar stallTimeout: seconds an object may be in progress, plus one
        second per C{minRate} bytes of it that arrived.  30 s.
    @ivar minRate: bytes per second a peer must keep up while sending an
        object, after C{stallTimeout}.  1 KiB/s.
    @ivar maxObjectBytes: most bytes one object may take on the wire;
        C{None} leaves it to L{framing.Limits}.
    @ivar keepaliveInterval: seconds of silence before a PING.  30 s.
    @ivar keepaliveTimeout: seconds after that PING for any byte to arrive.
        10 s.
    @ivar idleTimeout: seconds without a completed object.  15 min.
    @ivar maxConnections: most connections up at once per factory.  1000:
        below the usual limit of 1,024 file descriptors per process, so the
        guard refuses with a logged reason before C{accept} fails for want
        of a descriptor.
    @ivar maxPerPeer: most connections up at once from one IP address.
        20, so that filling C{maxConnections} takes 50 addresses, not the
        10 it took with 100 per address (1,000 connections from 10 loopback
        addresses left no room for anyone else).  The trade-off: many
        honest clients behind one address (a NAT, a proxy, a busy worker
        host) share those 20, so raise it for such deployments, and raise
        C{maxConnections} with it (and the process's descriptor limit) to
        keep the ratio.  Per-address caps slow a flood from many addresses
        but do not stop one: an attacker with an IPv6 prefix has addresses
        to spare; the idle and keepalive timeouts are what reclaim their
        slots.
    @ivar abortAfter: seconds a dropped connection may take to read its
        ERROR before it is aborted.  2 s.
    @ivar newPeerReserve: how many of the C{maxConnections} slots only an
        address with no connection up may take.  50 (at most a tenth of
        C{maxConnections}): 50 addresses at C{maxPerPeer} no longer fill the
        server (they did: 1,000 connections from 50 addresses left new
        clients 0 of 5); an attacker with more addresses fills the reserve
        too, and then eviction is what makes room.
    @ivar evictIdleAfter: seconds without a completed object after which a
        connection with nothing in progress may be dropped to make room
        when every slot is taken (the longest idle first); C{None} never
        evicts.  5 s: a connection that has just connected or just been
        answered is not cut, and a flood cannot make the server churn
        through connections younger than that.
    @ivar sendStallTimeout: seconds that bytes may wait to be sent to the
        peer without the peer taking any of them.  60 s, as nginx's
        C{send_timeout}: back-pressure (C{Limits.send_high_water}) already
        bounds what is held for such a peer; this frees even that.
    @ivar fairEviction: when every slot is taken and no connection is idle
        enough to evict, drop the least recently active connection of the
        address holding the most connections (busy or not) to admit one
        from an address holding at least two fewer (C{--fair-eviction 1},
        the default; 0 turns it off).  Idleness alone protected nothing
        against busy connections: 950 connections from 50 addresses, each
        making a call every 5 s, plus 60 from new addresses, left fresh
        clients 0 of 3 for 45 s.  Converges on an equal share per address
        (max-min fairness): an address can take another's slot only while
        it holds fewer, so a flood from few addresses gives way to new
        ones, and one from many addresses (each at one connection) evicts
        no one.  The trade-off: a busy honest address holding many
        connections (a NAT) loses its least recently active one to each
        newcomer while the server is full.  Cost: O(1) per admission.
    @ivar headerTimeout: under C{haproxy:}, seconds a trusted proxy has to
        send a connection's PROXY header (C{--header-timeout}).  3 s: a
        proxy sends it with the connection's first bytes.
    @ivar maxAwaitingHeader: under C{haproxy:}, most connections from
        trusted proxies waiting for their PROXY header at once
        (C{--max-awaiting-header}); one more drops the one waiting longest
        (C{proxy-header-evicted}), which has had longer than any honest
        proxy needs.  256: a burst of a proxy's new connections is read
        within a reactor turn or two.  Such a connection is counted from
        its acceptance, under the proxy's address, in C{maxConnections}
        (not in C{maxPerPeer}: the proxy speaks for many clients), then
        under the client's address once the header names it, where the
        per-address cap applies: 1,100 connections that never sent their
        header had exhausted the descriptors in 3 s (fresh clients 0 of 5).
    @ivar maxHeldBytes: most bytes the connections of one listener may
        hold for their peers together (C{--max-held-bytes}), on top of each
        connection's own budget (C{Limits.max_connection_memory}): the
        budget of their shared L{framing._ledger.LedgerPool}, shared fairly:
        each connection may hold up to C{maxHeldBytes // connections}
        whatever the others hold (L{framing._ledger.LedgerPool.share}), past
        that only what the pool has free.  Past it every connection past its
        share stops reading (and stream producers and notifiers wait) until
        the listener is back within it; one within its share reads on.  Without it, N connections may make a
        server hold N budgets (four non-reading connections held 165 MiB of
        stream items and answers).  32 MiB, half of one connection's
        default budget, because the process's memory is more than what it
        holds: with the pool full of 1 MiB values, a kv server on SQLite
        stood 1.5 to 2 times the pool above idle (Python's and the C
        allocator's free blocks; 64 MiB pools left it 100-134 MiB above
        idle, past the hostile-peer catalogue's 96 MiB).
        A C{twist} service with C{--workers N} gives each worker 1/N of it,
        so the server as a whole holds no more than one pool.
    """

    preambleTimeout: float | None = 10.0
    stallTimeout: float | None = 30.0
    minRate: float = 1024.0
    maxObjectBytes: int | None = None
    keepaliveInterval: float | None = 30.0
    keepaliveTimeout: float | None = 10.0
    idleTimeout: float | None = 900.0
    maxConnections: int | None = 1000
    maxPerPeer: int | None = 20
    abortAfter: float = 2.0
    sendStallTimeout: float | None = 60.0
    newPeerReserve: int | None = 50
    evictIdleAfter: float | None = 5.0
    fairEviction: bool = True
    headerTimeout: float | None = 3.0
    maxAwaitingHeader: int | None = 256
    maxHeldBytes: int | None = 32 * 1024 * 1024


DEFAULT_GUARD = GuardPolicy()
"""
The policy a server guards its connections with unless told otherwise
(C{rpc.serve} and C{rpc.serverFactory}, bulk or not, the example servers
and C{twist}): every default of L{GuardPolicy}.
"""

EVICTION_SCAN = 64
"""Most connections looked at, oldest activity first, to find one to evict: busy ones are skipped, not searched past."""


class ConnectionCounter:
    """
    The connections up for one factory; shared by its guarded protocols.
    The per-peer cap is checked first, so a flooding host is told about its
    own cap rather than the global one; C{perPeer} holds only hosts with
    connections up, so its size is bounded by C{active}.

    @ivar active: how many are up now.
    @ivar refused: how many were dropped for being over a limit.
    @ivar evicted: how many idle connections were dropped to make room.
    @ivar evictedFair: how many connections (busy or not) of the address
        holding the most were dropped to make room (L{GuardPolicy.fairEviction}).
    @ivar evictedAwaiting: how many connections waiting for their PROXY
        header were dropped for one more (L{GuardPolicy.maxAwaitingHeader}).
    @ivar perPeer: connections up now per peer host.
    @ivar refusals: the rate-limited log of refused connections, shared by
        the factory's connections: a flood of connections writes a few lines
        and a count, not a line each.
    """

    def __init__(self) -> None:
        self.active = 0
        self.refused = 0
        self.evicted = 0
        self.evictedFair = 0
        self.evictedAwaiting = 0
        self.awaiting: dict[ConnectionGuard, tuple[str, Callable[[], None]]] = {}
        """Connections waiting for their PROXY header, oldest first: their proxy's address, how to drop them."""
        self.perPeer: dict[str, int] = {}
        self.refusals = RefusalLog(LogPolicy(maxRefusals=None))
        # The admitted guards (to their address), least recently active first (a dict keeps insertion order;
        # moving is O(1)).
        self._byActivity: dict[ConnectionGuard, str] = {}
        # The same per address, and the addresses by how many connections each holds (fair eviction's O(1)).
        self._byHost: dict[str, dict[ConnectionGuard, None]] = {}
        self._hostsByCount: dict[int, dict[str, None]] = {}
        self._most = 0
        self.latest: ConnectionGuard | None = None
        """The guard last put at the most recently active end (touching it again moves nothing), or C{None}."""
        self.pool: LedgerPool | None = None
        """The ledger pool of the connections counted here (L{poolFor}), made with the first."""

    def poolFor(self, policy: GuardPolicy) -> LedgerPool:
        """The L{LedgerPool} the counted connections' ledgers share, of C{policy.maxHeldBytes} (made once)."""
        if self.pool is None:
            self.pool = LedgerPool(policy.maxHeldBytes)
        return self.pool

    def admit(self, host: str, policy: GuardPolicy, guard: ConnectionGuard | None = None) -> str | None:
        """
        Count a new connection from C{host} (watched by C{guard}, which may
        then be evicted to make room), or say why it is over a limit.  When
        every slot is taken, the connection idle longest is evicted first;
        failing that, with C{policy.fairEviction}, the least recently active
        connection of the address holding the most (L{GuardPolicy.fairEviction}),
        which also lets an address already up past the new-address reserve
        in, one in for one out, if it holds at least two fewer.
        """
        total, mine = policy.maxConnections, policy.maxPerPeer
        seen = self.perPeer.get(host, 0)
        if mine is not None and seen >= mine:
            self.refused += 1
            return f"{seen} connections from {host} are up, the limit per peer is {mine}"
        if total is not None:
            reserve = min(policy.newPeerReserve or 0, total // 10)
            if seen and self.active >= total - reserve and not self._evictFair(policy, seen):
                # (one in, one out: the reserve is not touched)
                self.refused += 1
                return (
                    f"{self.active} connections are up; the last {reserve} of the {total} allowed are kept "
                    f"for addresses with none up, and {host} has {seen}"
                )
            if self.active >= total and not self._evictOne(policy) and not self._evictFair(policy, seen):
                self.refused += 1
                return (
                    f"{self.active} connections are up, the limit is {total}, none has been idle long, "
                    f"and no address holds more than {seen + 1}"
                )
        self.active += 1
        self._count(host, guard, seen)
        return None

    def admitAwaiting(
        self, host: str, policy: GuardPolicy, guard: ConnectionGuard, drop: Callable[[], None]
    ) -> str | None:
        """
        Count a connection from a trusted proxy at C{host} that waits for its
        PROXY header (C{drop} drops it), or say why it is over a limit: it
        takes a slot of C{maxConnections} at once, under the proxy's
        address; past C{maxAwaitingHeader} the one waiting longest is
        dropped.  Then L{named} (its header came) or L{abandoned} (it ended).
        """
        cap = policy.maxAwaitingHeader
        if cap is not None and len(self.awaiting) >= cap:
            oldest = next(iter(self.awaiting))
            self.evictedAwaiting += 1
            self.abandoned(oldest)[1]()
        total = policy.maxConnections
        seen = self.perPeer.get(host, 0)
        if total is not None and self.active >= total:
            if not self._evictOne(policy) and not self._evictFair(policy, seen):
                self.refused += 1
                return f"{self.active} connections are up, the limit is {total}, and none could make room"
            seen = self.perPeer.get(host, 0)
        self.active += 1
        self._count(host, None, seen)
        self.awaiting[guard] = (host, drop)
        return None

    def abandoned(self, guard: ConnectionGuard) -> tuple[str, Callable[[], None]]:
        """Uncount C{guard}'s connection, which waited for its PROXY header; its proxy's address and dropper."""
        entry = self.awaiting.pop(guard, None)
        if entry is None:
            return "", _nothing
        self.active -= 1
        self._uncountHost(entry[0], None)
        return entry

    def named(self, guard: ConnectionGuard, host: str, policy: GuardPolicy) -> str | None:
        """
        C{guard}'s connection, counted while it waited for its PROXY header,
        is from C{host}: move it there, keeping its slot, or say why C{host}
        is over its limit (the slot is then free).
        """
        self.abandoned(guard)
        refusal = self.admit(host, policy, guard)
        return refusal

    def _count(self, host: str, guard: ConnectionGuard | None, seen: int) -> None:
        """Count one more connection from C{host}, which had C{seen}."""
        self.perPeer[host] = seen + 1
        self._moveHost(host, seen, seen + 1)
        if guard is not None:
            self._byActivity[guard] = host
            self._byHost.setdefault(host, {})[guard] = None
            self.latest = guard

    def _moveHost(self, host: str, old: int, new: int) -> None:
        """C{host}'s count went from C{old} to C{new} (one apart): move it between buckets, in O(1)."""
        buckets = self._hostsByCount
        if old:
            bucket = buckets[old]
            del bucket[host]
            if not bucket:
                del buckets[old]
        if new:
            buckets.setdefault(new, {})[host] = None
        if new > self._most:
            self._most = new
        elif old == self._most and old not in buckets:
            # Counts move by one: the bucket below holds C{host} itself (or none is left, at 0).
            self._most = new

    def _evictOne(self, policy: GuardPolicy) -> bool:
        """Drop the connection idle longest, if one has been idle long enough; whether one was."""
        if policy.evictIdleAfter is None:
            return False
        for guard in list(islice(self._byActivity, EVICTION_SCAN)):
            if guard.idleFor() >= policy.evictIdleAfter:
                self.evicted += 1
                guard.evict()
                return True
        return False

    def _evictFair(self, policy: GuardPolicy, seen: int) -> bool:
        """
        Drop the least recently active connection of an address holding the
        most, if it holds at least two more than C{seen} (the newcomer's
        address's count, before it); whether one was.  O(1): the first
        watched address of the top bucket (at most L{EVICTION_SCAN} looked at).
        """
        most = self._most
        if not policy.fairEviction or most < seen + 2:
            return False
        for host in list(islice(self._hostsByCount.get(most, ()), EVICTION_SCAN)):
            guards = self._byHost.get(host)
            if guards:
                self.evictedFair += 1
                next(iter(guards)).evict(
                    "evicted-fair",
                    f"the server is full and this connection's address held the most connections ({most})",
                )
                return True
        return False

    def touched(self, guard: ConnectionGuard) -> None:
        """C{guard}'s connection completed an object: it is now the most recently active."""
        host = self._byActivity.pop(guard, None)
        if host is not None:
            self._byActivity[guard] = host
            self.latest = guard
            mine = self._byHost.get(host)
            if mine is not None and guard in mine:
                del mine[guard]
                mine[guard] = None

    def release(self, host: str, guard: ConnectionGuard | None = None) -> None:
        """Uncount a connection from C{host}."""
        self.active -= 1
        self._uncountHost(host, guard)
        if guard is not None:
            self._byActivity.pop(guard, None)
            if self.latest is guard:
                self.latest = None

    def _uncountHost(self, host: str, guard: ConnectionGuard | None) -> None:
        had = self.perPeer.pop(host, 1)
        if had > 1:
            self.perPeer[host] = had - 1
        if host in self._hostsByCount.get(had, ()):
            self._moveHost(host, had, had - 1)
        mine = self._byHost.get(host)
        if guard is not None and mine is not None:
            mine.pop(guard, None)
            if not mine:
                del self._byHost[host]


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
        self._confirming = False
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
        # The connection's decoder, read on every read: held here, as the proxy's reads cost several plain ones.
        self._decoder: Any = None

    def awaitingHeader(self, proxy: str, drop: Callable[[], None]) -> str | None:
        """
        The connection (not started yet) comes from a trusted proxy at
        C{proxy} and waits for its PROXY header: count it now, under
        C{proxy}, until L{connectionStarted} moves it to the client's
        address (L{ConnectionCounter.admitAwaiting}); C{drop} drops it.
        The refusal, if it is over a limit.
        """
        counter = self.counter
        if counter is None:
            return None
        # (a refusal is logged by the PROXY layer, which drops the connection: the protocol has no transport yet)
        return counter.admitAwaiting(proxy, self.policy, self, drop)

    def headerAbandoned(self) -> None:
        """The connection ended while it waited for its PROXY header: uncount it."""
        if self.counter is not None:
            self.counter.abandoned(self)

    def connectionStarted(self, protocol: Any) -> None:
        """Start the clocks, count the connection, and refuse it if too many are up."""
        self._decoder = self.protocol.decoder  # (made before the connection starts, and kept for its life)
        now = self.clock.seconds()
        self._connected = self._lastByte = self._lastObject = now
        counter, protocol = self.counter, self.protocol
        if counter is not None and protocol.failure is None:
            # The one client address (a PROXY header's only from a trusted proxy), as the throttle and the log use.
            host = clientAddress(protocol.transport)
            if self in counter.awaiting:
                # Counted since it was accepted, under its proxy's address: now under its client's.
                refusal = counter.named(self, host, self.policy)
            else:
                refusal = counter.admit(host, self.policy, self)
            if refusal is not None:
                _logDrop(counter, protocol, "refused connections", "too-many-connections", refusal)
                self._drop("too-many-connections", refusal, logged=False)
                return
            self._host = host
        if protocol.failure is None:
            self._schedule()

    # -- what the peer does ----------------------------------------------------

    def dataArrived(self, length: int) -> None:
        """Note the time and the count (of a read held undecoded)."""
        self._lastByte = self.clock.seconds()
        self._received += length

    def dataDecoded(self, length: int, completed: int, controlBytes: int) -> None:
        """Note the progress of the object in progress (held bytes, decoded now): see L{dataRead}."""
        self.dataRead(length, completed, controlBytes, arrived=False)

    def dataRead(self, length: int, completed: int, controlBytes: int, arrived: bool = True) -> None:
        """
        Note the time and the count of a read decoded as it arrived (unless
        C{arrived} is false: L{dataDecoded}), then the progress of the object
        in progress.  This is counted where bytes are decoded, not where they
        arrive: bytes held while reading is paused belong to no object yet.
        PINGs and PONGs between an object's tokens keep the connection alive;
        they are not progress of it.  (One method for both, so that the
        commonest read is one call with one look at the clock.)  A dropped
        connection is judged no more: its object in progress is not followed.
        """
        now = None
        if arrived:
            self._lastByte = now = self.clock.seconds()
            self._received += length
        if completed:
            self._lastObject = self.clock.seconds() if now is None else now
            counter = self.counter
            # (a connection already the most recently active, as one busy connection's every read finds, moves nothing)
            if counter is not None and self._host is not None and counter.latest is not self:
                counter.touched(self)
        if self._decoder.at_boundary or self._received <= _PREAMBLE_LENGTH:
            # (A partial preamble is the preamble rule's business.)
            self._objectStart = None
            self._objectBytes = 0
            return
        # (Asked only here, of the protocol's proxy: above, a dropped connection's clocks move, which no rule
        # reads once it is dropped, and it moves in the counter's order of activity, where idleFor skips it.)
        if self.protocol.failure is not None:
            return
        progress = length - controlBytes
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
        limit = self.policy.maxObjectBytes
        if limit is not None and self._objectBytes > limit:
            self._drop("object-too-large", f"an object took more than {limit} bytes on the wire")

    def _stallStarted(self) -> None:
        """An object is now in progress: make sure the timer fires by its stall deadline."""
        stall, timer = self.policy.stallTimeout, self._timer
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
        self._uncount()

    def _uncount(self) -> None:
        host, self._host = self._host, None
        if host is not None and self.counter is not None:
            self.counter.release(host, self)

    # -- making room -----------------------------------------------------------

    def idleFor(self) -> float:
        """
        Seconds this connection has been idle: since its last completed
        object (or its start), or 0 while anything is in progress (an
        object arriving, bytes waiting to be sent, a call running or
        waiting, a stream paused by flow control).
        """
        protocol = self.protocol
        if protocol.failure is not None or protocol.transport is None:
            return 0.0
        if self._objectStart is not None or protocol.transport.pendingBytes or _busy(protocol):
            return 0.0
        return float(self.clock.seconds() - self._lastObject)

    def evict(
        self,
        code: str = "evicted-idle",
        reason: str = "the server is full and this connection was the one idle longest",
    ) -> None:
        """
        Drop this connection to make room for a new one (C{code} and
        C{reason} say why: idle longest, or its address held the most): its
        slot is free at once, and it is aborted at once (its descriptor is
        what the new connection needs).
        """
        counter, protocol = self.counter, self.protocol
        self._uncount()
        transport = protocol.transport
        if counter is not None:
            # Rate-limited with the refusals: a flood of evictions writes a few lines and a count.
            _logDrop(counter, protocol, "evicted connections", code, reason)
        self._drop(code, reason, logged=False)
        _abortIfOpen(transport)

    # -- the timer -------------------------------------------------------------

    def _deadlines(self) -> list[tuple[float, str]]:
        """Each active rule's next deadline with its name."""
        policy = self.policy
        deadlines = []
        if policy.preambleTimeout is not None and self._received < len(PREAMBLE):
            deadlines.append((self._connected + policy.preambleTimeout, "preamble"))
        start = self._objectStart
        if policy.stallTimeout is not None and start is not None and not self.protocol.readingPaused:
            allowed = policy.stallTimeout + self._objectBytes / policy.minRate
            deadlines.append((start + allowed, "stall"))
        if policy.keepaliveInterval is not None:
            if self._pingAt is None or self._lastByte > self._pingAt:
                deadlines.append((self._lastByte + policy.keepaliveInterval, "ping"))
            elif policy.keepaliveTimeout is not None:
                deadlines.append((self._pingAt + policy.keepaliveTimeout, "keepalive"))
        if policy.idleTimeout is not None:
            deadlines.append((self._lastObject + policy.idleTimeout, "idle"))
        waiting = self._sendWaitingSince
        if policy.sendStallTimeout is not None and waiting is not None:
            # Look again a few times per timeout, to see whether it moved.
            deadlines.append((waiting + policy.sendStallTimeout, "send-stall"))
            deadlines.append((self.clock.seconds() + policy.sendStallTimeout / 4, "send-check"))
        return deadlines

    def _schedule(self) -> None:
        self._confirming = False
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
        if self.policy.sendStallTimeout is not None:
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
            if rule == "idle" and _flowPaused(protocol):
                # A stream paused by flow control: the peer waits, it is not idle.
                self._lastObject = now
                continue
            if not self._confirming:
                # A busy reactor runs its timers before it reads: bytes that beat the deadline may be waiting
                # unread (an honest client's preamble, after a two-second stall under load).  Look again once
                # the reactor has read them, one turn later; a peer that sent nothing is dropped then.
                self._confirming = True
                self._timer = self.clock.callLater(0, self._check)
                return
            self._drop(*self._reason(rule, now))
            return
        self._schedule()

    def _reason(self, rule: str, now: float) -> tuple[str, str]:
        policy = self.policy
        if rule == "preamble":
            return "preamble-timeout", f"no preamble within {policy.preambleTimeout} s ({self._received} bytes)"
        if rule == "stall":
            return (
                "stalled",
                f"an object was in progress for {now - (self._objectStart or now):.1f} s with only "
                f"{self._objectBytes} bytes received (at least {policy.minRate:g} bytes/s "
                f"after {policy.stallTimeout} s)",
            )
        if rule == "send-stall":
            return (
                "send-stalled",
                f"the peer took none of the {self.protocol.transport.pendingBytes} bytes waiting for it "
                f"in {policy.sendStallTimeout} s",
            )
        if rule == "keepalive":
            return "keepalive-timeout", f"nothing received within {policy.keepaliveTimeout} s of a PING"
        return "idle-timeout", f"no object received for {policy.idleTimeout} s"

    def _drop(self, code: str, message: str, logged: bool = True) -> None:
        """Drop the connection as for a ProtocolError, and abort it if it lingers."""
        protocol = self.protocol
        if protocol.failure is not None:
            return
        transport = protocol.transport
        protocol.failConnection(GuardError(code, message), logged)
        self._abort = self.clock.callLater(self.policy.abortAfter, _abortIfOpen, transport)


def _ignore(_: object) -> None:
    return None


def _nothing() -> None:
    return None


def _flowPaused(protocol: Any) -> bool:
    """Whether an extension of the connection's receiver (a bulk channel) says a stream is paused by flow control."""
    return any(getattr(extension, "flowPaused", False) for extension in getattr(protocol.receiver, "extensions", ()))


def _busy(protocol: Any) -> bool:
    """Whether the connection's receiver (an RPC broker) has calls running or waiting, or a stream paused."""
    receiver = protocol.receiver
    if getattr(receiver, "runningCount", 0) or getattr(receiver, "pendingCount", 0):
        return True
    return _flowPaused(protocol)


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
    C{protocol}.  Its L{ConnectionGuard} is its C{guard} attribute.  A
    connection has one guard: guarding it again replaces the guard it had,
    so that a L{GuardedFactory} around a factory that guards its own
    connections (C{rpc.serverFactory}) applies the wrapper's policy alone.
    """
    if clock is None:
        from twisted.internet import reactor

        clock = reactor
    connection = connectionOf(protocol)
    if connection.guard is not None:
        connection.removeObserver(connection.guard)
    watcher = ConnectionGuard(connection, policy, counter, clock)
    connection.addObserver(watcher)
    connection.guard = watcher
    if counter is not None:
        connection.ledgerPool = counter.poolFor(policy)
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
    """
    Add the command-line options of a L{GuardPolicy} to an C{argparse}
    parser.  The flags are spelled the command-line way (C{--preamble-timeout});
    each one's C{dest} is its L{GuardPolicy} field (C{preambleTimeout}).
    """
    policy = policy or GuardPolicy()

    def seconds(text: str) -> float | None:
        value = float(text)
        return None if value <= 0 else value

    for option, dest, help in [
        ("--preamble-timeout", "preambleTimeout", "seconds for a client's preamble to arrive"),
        ("--stall-timeout", "stallTimeout", "seconds an object may take, plus one per --min-rate bytes"),
        ("--keepalive-interval", "keepaliveInterval", "seconds of silence before a PING"),
        ("--keepalive-timeout", "keepaliveTimeout", "seconds after a PING for the client to answer"),
        ("--idle-timeout", "idleTimeout", "seconds without a complete object"),
        ("--send-stall-timeout", "sendStallTimeout", "seconds a client may take none of the bytes waiting for it"),
        ("--evict-idle-after", "evictIdleAfter", "idle seconds after which a connection may make room when full"),
        ("--header-timeout", "headerTimeout", "seconds a trusted proxy has to send a PROXY header (haproxy:)"),
    ]:
        parser.add_argument(
            option, dest=dest, type=seconds, default=getattr(policy, dest), metavar="S", help=f"{help} (0: never)"
        )
    for option, dest, kind, help in [
        ("--min-rate", "minRate", float, "bytes/s while sending an object"),
        ("--max-object-bytes", "maxObjectBytes", int, "wire bytes per object"),
        ("--max-connections", "maxConnections", int, "connections up at once (0: no limit)"),
        ("--max-per-peer", "maxPerPeer", int, "connections up at once per IP (0: no limit)"),
        ("--new-peer-reserve", "newPeerReserve", int, "of --max-connections, kept for addresses with none up"),
        ("--fair-eviction", "fairEviction", int, "1: when full, evict from the address holding the most (0: never)"),
        ("--max-awaiting-header", "maxAwaitingHeader", int, "connections waiting for a PROXY header (0: no limit)"),
        ("--max-held-bytes", "maxHeldBytes", int, "bytes all connections hold for peers (0: none; --workers share it)"),
    ]:
        parser.add_argument(option, dest=dest, type=kind, default=getattr(policy, dest), help=help)


def policyFromArguments(args: Any) -> GuardPolicy:
    """The L{GuardPolicy} that the options of L{addGuardArguments} describe."""
    return GuardPolicy(
        preambleTimeout=args.preambleTimeout,
        stallTimeout=args.stallTimeout,
        minRate=args.minRate,
        maxObjectBytes=args.maxObjectBytes or None,
        keepaliveInterval=args.keepaliveInterval,
        keepaliveTimeout=args.keepaliveTimeout,
        idleTimeout=args.idleTimeout,
        sendStallTimeout=args.sendStallTimeout,
        maxConnections=args.maxConnections or None,
        maxPerPeer=args.maxPerPeer or None,
        newPeerReserve=getattr(args, "newPeerReserve", GuardPolicy.newPeerReserve),
        evictIdleAfter=getattr(args, "evictIdleAfter", GuardPolicy.evictIdleAfter),
        fairEviction=bool(getattr(args, "fairEviction", GuardPolicy.fairEviction)),
        headerTimeout=getattr(args, "headerTimeout", GuardPolicy.headerTimeout),
        maxAwaitingHeader=getattr(args, "maxAwaitingHeader", GuardPolicy.maxAwaitingHeader) or None,
        maxHeldBytes=getattr(args, "maxHeldBytes", GuardPolicy.maxHeldBytes) or None,
    )


def _logDrop(counter: ConnectionCounter, protocol: TokenProtocol, summary: str, code: str, reason: str) -> None:
    """
    Log dropping C{protocol}'s connection for C{code}, within the rate of
    C{counter}'s refusal log (C{summary} names the drops its summary line counts).
    """
    counter.refusals.failure(
        protocol.log,
        summary,
        code,
        "Dropping connection from {address}: {code}: {error}",
        LogLevel.warn,
        address=protocol.peerName(),
        code=code,
        error=reason,
    )
