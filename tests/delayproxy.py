"""A link with latency, for tests and benchmarks: a TCP delay proxy on loopback, and an in-memory delayed pair.

This kernel has no C{sch_netem}, so latency is added in user space.

L{DelayProxy} listens on 127.0.0.1 and, for every connection it accepts,
connects to a target address and forwards each direction's bytes after
C{delay} seconds.  Each received chunk is forwarded with one write at its own
due time (arrival + C{delay}), in arrival order; chunks that fall due in the
same reactor turn may leave in one send.  A close is forwarded after the
bytes before it.  It accepts at once, so the TCP handshake costs no added
delay: a round trip (RTT) over the proxy is C{2 * delay}.  Due times are
absolute (arrival time + delay), so time spent elsewhere in the reactor does
not add up; each forward is late by at most the reactor's timer granularity
(about 1 ms with epoll).

With C{rate} (bytes per second) each direction is also a link of that
bandwidth, as C{netem rate} makes one: a chunk starts to cross once the
chunks before it have crossed, takes C{len / rate} seconds to do so, and is
delivered C{delay} after it has crossed.  So a byte never arrives sooner
than C{delay} after it was sent, and a direction never delivers more than
C{rate} bytes a second on average.  The proxy itself reads without limit
(the queue is unbounded, like a netem queue with a large C{limit}): the
sender's own flow control decides how much waits in it.

L{DelayedPair} joins two protocols in memory on a L{Clock}, delivering each
write C{delay} seconds of simulated time after it was made: exact figures,
no sockets, no reactor.

Contract: nothing here imports chunkwire; both record what crossed, with
times, so that tests can ask which bytes travelled together and when.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

UP = "up"
"""The direction from the connecting side (client) to the target (server)."""
DOWN = "down"
"""The direction from the target back to the client."""


class _Queue:
    """One direction of one link: chunks waiting for their due time, forwarded in order."""

    def __init__(
        self,
        clock: Any,
        delay: float,
        forward: Callable[[bytes], None],
        close: Callable[[], None],
        rate: float | None = None,
    ) -> None:
        self.clock, self.delay, self.rate = clock, delay, rate
        self.forward, self.close = forward, close
        self.waiting: deque[tuple[float, bytes | None]] = deque()
        self.timer: Any = None
        self.ready = False  # whether the far side is connected and can be written to
        self.linkFree = 0.0  # with a rate: when the link has finished carrying what is queued

    def push(self, data: bytes | None) -> None:
        """Queue C{data} (C{None}: close) to leave C{delay} seconds from now (after crossing the link, with a rate)."""
        now = self.clock.seconds()
        crossed = now
        if self.rate is not None:
            # A serial link: this chunk starts once the link is free, then takes len/rate to cross.
            crossed = max(now, self.linkFree) + (len(data) if data else 0) / self.rate
            self.linkFree = crossed
        self.waiting.append((crossed + self.delay, data))
        self._schedule()

    def open(self) -> None:
        """The far side is connected: forward what is due."""
        self.ready = True
        self._release()

    def _schedule(self) -> None:
        if self.timer is None and self.waiting and self.ready:
            wait = max(self.waiting[0][0] - self.clock.seconds(), 0.0)
            self.timer = self.clock.callLater(wait, self._release)

    def _release(self) -> None:
        self.timer = None
        now = self.clock.seconds()
        while self.waiting and self.waiting[0][0] <= now and self.ready:
            _, data = self.waiting.popleft()
            if data is None:
                self.ready = False
                self.waiting.clear()
                self.close()
                return
            self.forward(data)
        self._schedule()

    def cancel(self) -> None:
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        self.waiting.clear()
        self.ready = False


class Link:
    """
    One proxied connection.

    @ivar chunks: C{(direction, arrival time, bytes)} for every chunk the
        proxy received, in order (when the proxy records).
    @ivar acceptedAt: when the client's connection was accepted.
    """

    def __init__(self, proxy: DelayProxy) -> None:
        self.proxy = proxy
        self.chunks: list[tuple[str, float, bytes]] = []
        self.acceptedAt = proxy.clock.seconds()
        self.client: _ClientSide | None = None
        self.server: _ServerSide | None = None
        self.up = _Queue(proxy.clock, proxy.delay, self._toServer, self._closeServer, proxy.rate)
        self.down = _Queue(proxy.clock, proxy.delay, self._toClient, self._closeClient, proxy.rate)
        self.closed: Deferred[None] = Deferred()
        self._ends = 2

    def received(self, direction: str, data: bytes) -> None:
        if self.proxy.record:
            self.chunks.append((direction, self.proxy.clock.seconds(), data))
        (self.up if direction == UP else self.down).push(data)

    def firstChunk(self, direction: str) -> tuple[float, bytes] | None:
        """The first chunk received in C{direction}, with its arrival time."""
        for chunk_direction, at, data in self.chunks:
            if chunk_direction == direction:
                return at, data
        return None

    def _toServer(self, data: bytes) -> None:
        assert self.server is not None and self.server.transport is not None
        self.server.transport.write(data)

    def _toClient(self, data: bytes) -> None:
        assert self.client is not None and self.client.transport is not None
        self.client.transport.write(data)

    def _closeServer(self) -> None:
        if self.server is not None and self.server.transport is not None:
            self.server.transport.loseConnection()

    def _closeClient(self) -> None:
        if self.client is not None and self.client.transport is not None:
            self.client.transport.loseConnection()

    def ended(self) -> None:
        self._ends -= 1
        if self._ends == 0 and not self.closed.called:
            self.up.cancel()
            self.down.cancel()
            self.closed.callback(None)


def _noDelay(transport: Any) -> None:
    """
    Turn Nagle off on one of the proxy's sockets: the link is the proxy's
    queues, and Nagle would hold a forwarded chunk until the previous one is
    acknowledged, which with delayed ACKs on loopback adds up to 40 ms now
    and then.
    """
    setTcpNoDelay = getattr(transport, "setTcpNoDelay", None)
    if setTcpNoDelay is not None:
        setTcpNoDelay(True)


class _ClientSide(Protocol):
    """The accepted connection from the client."""

    def __init__(self, link: Link) -> None:
        self.link = link
        link.client = self

    def connectionMade(self) -> None:
        _noDelay(self.transport)
        self.link.down.open()
        self.link.proxy._connectUpstream(self.link)

    def dataReceived(self, data: bytes) -> None:
        self.link.received(UP, data)

    def connectionLost(self, reason: Any = None) -> None:
        self.link.up.push(None)
        self.link.ended()


class _ServerSide(Protocol):
    """The proxy's own connection to the target."""

    def __init__(self, link: Link) -> None:
        self.link = link
        link.server = self

    def connectionMade(self) -> None:
        _noDelay(self.transport)
        self.link.up.open()

    def dataReceived(self, data: bytes) -> None:
        self.link.received(DOWN, data)

    def connectionLost(self, reason: Any = None) -> None:
        self.link.down.push(None)
        self.link.ended()


class _ProxyFactory(Factory):
    def __init__(self, proxy: DelayProxy) -> None:
        self.proxy = proxy

    def buildProtocol(self, addr: Any) -> Protocol:
        link = Link(self.proxy)
        self.proxy.links.append(link)
        return _ClientSide(link)


class DelayProxy:
    """
    A TCP proxy on 127.0.0.1 adding C{delay} seconds each way, and
    limiting each direction to C{rate} bytes per second if C{rate} is given.

    Use::

        proxy = DelayProxy(reactor, targetPort, delay=0.05)
        port = await proxy.start()        # connect to 127.0.0.1:port
        ...
        await proxy.stop()

    @ivar links: every connection accepted, in order.
    @ivar record: whether each L{Link} keeps the chunks it saw (for tests).
    @ivar port: the listening port, once started.
    @ivar rate: the bandwidth of each direction in bytes per second, or C{None} (unlimited).
    """

    def __init__(
        self,
        reactor: Any,
        targetPort: int,
        delay: float = 0.05,
        targetHost: str = "127.0.0.1",
        record: bool = True,
        rate: float | None = None,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.reactor = self.clock = reactor
        self.targetHost, self.targetPort = targetHost, targetPort
        self.delay = delay
        self.rate = rate
        self.record = record
        self.links: list[Link] = []
        self.port: Any = None

    @property
    def rtt(self) -> float:
        """The round trip the proxy adds: twice the delay."""
        return 2 * self.delay

    async def start(self) -> int:
        """Listen on an ephemeral port of 127.0.0.1; return it."""
        self.port = await TCP4ServerEndpoint(self.reactor, 0, interface="127.0.0.1").listen(_ProxyFactory(self))
        port: int = self.port.getHost().port
        return port

    def _connectUpstream(self, link: Link) -> None:
        endpoint = TCP4ClientEndpoint(self.reactor, self.targetHost, self.targetPort)
        connecting = connectProtocol(endpoint, _ServerSide(link))

        def failed(reason: Any) -> None:
            link.down.push(None)
            link.ended()
            link.ended()
            if link.client is not None and link.client.transport is not None:
                link.client.transport.loseConnection()

        connecting.addErrback(failed)

    async def stop(self) -> None:
        """Stop listening, close every link, and wait until they are closed."""
        if self.port is not None:
            await self.port.stopListening()
        waiting = []
        for link in self.links:
            if link.closed.called:
                continue
            waiting.append(link.closed)
            for side in (link.client, link.server):
                if side is not None and side.transport is not None:
                    side.transport.abortConnection()
        if waiting:
            await gatherResults(waiting)


# -- in memory, on a simulated clock ---------------------------------------------------------------


class _RecordingStringTransport(StringTransport):
    """A StringTransport that counts its write calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self.writeCalls = 0

    def write(self, data: bytes) -> None:
        self.writeCalls += 1
        super().write(data)  # type: ignore[no-untyped-call]

    def writeSequence(self, data: Any) -> None:
        self.writeCalls += 1
        super().write(b"".join(data))  # type: ignore[no-untyped-call]


class DelayedPair:
    """
    Two protocols joined in memory on C{clock}: what either side wrote
    between two events is delivered to the other in one C{dataReceived},
    exactly C{delay} seconds of simulated time later.

    @ivar chunks: C{(direction, sent at, bytes)} for what each side wrote
        between two events, in order (while C{record} is true).
    @ivar record: whether to keep C{chunks}.
    @ivar serverTransport: the server's transport (C{writeCalls} counts its
        writes); C{clientTransport} likewise.
    """

    def __init__(self, server: Protocol, client: Protocol, clock: Clock, delay: float = 0.05) -> None:
        self.server, self.client, self.clock, self.delay = server, client, clock, delay
        self.chunks: list[tuple[str, float, bytes]] = []
        self.record = True
        server_address = IPv4Address("TCP", "127.0.0.1", 8750)
        client_address = IPv4Address("TCP", "127.0.0.1", 40000)
        self.serverTransport = _RecordingStringTransport(hostAddress=server_address, peerAddress=client_address)
        self.clientTransport = _RecordingStringTransport(hostAddress=client_address, peerAddress=server_address)
        server.makeConnection(self.serverTransport)
        client.makeConnection(self.clientTransport)
        self.collect()

    @property
    def rtt(self) -> float:
        return 2 * self.delay

    def collect(self) -> None:
        """Put what each side wrote since the last look on the wire, due C{delay} from now."""
        for direction, transport, receiver in (
            (UP, self.clientTransport, self.server),
            (DOWN, self.serverTransport, self.client),
        ):
            data = transport.value()
            if data:
                transport.clear()
                if self.record:
                    self.chunks.append((direction, self.clock.seconds(), data))
                self.clock.callLater(self.delay, self._deliver, receiver, data)

    def _deliver(self, receiver: Protocol, data: bytes) -> None:
        receiver.dataReceived(data)
        self.collect()

    def runUntil(self, done: Callable[[], bool], limit: float = 60.0) -> float:
        """
        Advance the clock from one due event to the next until C{done()} or
        C{limit} simulated seconds have passed.

        @return: the simulated time then.
        """
        end = self.clock.seconds() + limit
        self.collect()
        while not done() and self.clock.seconds() < end:
            calls = self.clock.getDelayedCalls()
            if not calls:
                break
            due = min(call.getTime() for call in calls)
            self.clock.advance(max(due - self.clock.seconds(), 0.0))
            self.collect()
        return self.clock.seconds()


# -- as a process ------------------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    """
    C{python -m tests.delayproxy TARGET_PORT [DELAY_S [RATE_BYTES_PER_S]]}:
    proxy 127.0.0.1:TARGET_PORT on an ephemeral port, print that port as one
    JSON line, run until killed.

    It runs on Twisted's select() reactor: select takes its timeout in
    microseconds where epoll rounds up to whole milliseconds, so each
    forward leaves within a few tens of microseconds of its due time.
    """
    import json
    import sys

    from twisted.internet import selectreactor

    selectreactor.install()
    from twisted.internet import reactor as installed

    reactor: Any = installed
    target = int(argv[0])
    delay = float(argv[1]) if len(argv) > 1 else 0.05
    rate = float(argv[2]) if len(argv) > 2 else None

    async def start() -> None:
        port = await DelayProxy(reactor, target, delay, record=False, rate=rate).start()
        sys.stdout.write(json.dumps({"port": port}) + "\n")
        sys.stdout.flush()

    Deferred.fromCoroutine(start()).addErrback(lambda failure: (failure.printTraceback(), reactor.stop()))
    reactor.run()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
