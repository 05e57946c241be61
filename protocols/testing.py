# -*- test-case-name: tests.protocols.test_testing,tests.protocols.test_echo,tests.protocols.test_hold_and_direct -*-
"""Helpers for testing chunkwire protocols under trial and pytest.

Contract: nothing here starts or needs a reactor except L{loopbackTCP}.
L{connectedPair} joins two protocols in memory, delivers only when pumped,
keeps every write boundary, and honours pausing and producers the way
Twisted's TCP transport does, so flow control can be tested without sockets.
L{brokerPair} does it for an RPC service: a server broker exposing a root
and a client broker, on one L{Clock}, as C{rpc.serve} and C{rpc.connect}
(with bulk options, for streams too) would make them.  Its
L{BrokerPair.collect} pulls a stream of objects (a generator's items)
with no reactor, flushing before each item.
L{RecordingTransport} and L{recordWrites} count writes: the number tests pin
("one write per message, one per body chunk").

A trial test (no reactor: C{SynchronousTestCase}, which pytest collects too)::

    from twisted.trial.unittest import SynchronousTestCase
    from protocols.echo import EchoClient, EchoServer
    from protocols.testing import connectedPair

    class EchoTests(SynchronousTestCase):
        def test_echo(self) -> None:
            \"\"\"The echo server answers a request with the same object.\"\"\"
            pair = connectedPair(EchoServer(), EchoClient())
            answer = pair.client.echo({"id": 7, "tags": ("a", "b")})
            pair.flush()
            self.assertEqual(self.successResultOf(answer), {"id": 7, "tags": ("a", "b")})
            self.assertEqual(len(pair.clientTransport.writes), 2)  # preamble, request

A pytest-twisted test over real loopback TCP: C{docs/howto/testing.rst}
(C{docs/snippets/testing_example.py}).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections import deque
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, DeferredList, ensureDeferred, gatherResults
from twisted.internet.endpoints import (
    TCP4ClientEndpoint,
    TCP4ServerEndpoint,
    TCP6ClientEndpoint,
    TCP6ServerEndpoint,
)
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionLost
from twisted.internet.interfaces import IConsumer, IListeningPort, IPushProducer, ITCPTransport
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Registry
from framing._trace import TokenTracer
from framing.rpc._limits import SERVER_CALL_LIMITS
from framing.rpc._referenceable import Referenceable

from ._guard import connectionOf
from .auth._authority import CertificateAuthority, IssuedCertificate
from .rpc._broker import Broker
from .rpc._refs import RemoteReference

T = TypeVar("T")

__all__ = [
    "BrokerPair",
    "CertificateAuthority",
    "IssuedCertificate",
    "LoopbackPair",
    "MemoryPair",
    "MemoryTransport",
    "RecordingTransport",
    "SelfSignedCertificate",
    "TrackingFactory",
    "brokerPair",
    "connectedPair",
    "loopbackTCP",
    "messagesPerWrite",
    "recordSends",
    "recordWrites",
    "tlsRecords",
    "whenLost",
]


class RecordingTransport(StringTransport):
    """
    A L{StringTransport} that also records each C{write} and
    C{writeSequence} call.

    @ivar writes: one C{bytes} per call, in order (a C{writeSequence} call is
        recorded joined, as one entry).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        super().write(data)  # type: ignore[no-untyped-call]

    def writeSequence(self, data: Iterable[bytes]) -> None:
        joined = b"".join(data)
        self.writes.append(joined)
        super().write(joined)  # type: ignore[no-untyped-call]


def recordWrites(transport: Any) -> list[bytes]:
    """
    Record every C{write} and C{writeSequence} call made on C{transport} from
    now on (a real TCP or TLS transport included) by wrapping the two methods
    on the instance.

    @return: the list the calls are appended to, one C{bytes} per call.
    """
    writes: list[bytes] = []
    original_write, original_write_sequence = transport.write, transport.writeSequence

    def recordingWrite(data: bytes) -> None:
        writes.append(data)
        original_write(data)

    def recordingWriteSequence(data: Iterable[bytes]) -> None:
        data = list(data)
        writes.append(b"".join(data))
        original_write_sequence(data)

    transport.write = recordingWrite
    transport.writeSequence = recordingWriteSequence
    return writes


class _RecordingSocket:
    """A socket stand-in that records what each send system call took, and passes everything on."""

    def __init__(self, sock: Any, sends: list[bytes]) -> None:
        self._socket = sock
        self._sends = sends

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)

    def send(self, data: Any, *flags: int) -> int:
        sent: int = self._socket.send(data, *flags)
        self._sends.append(bytes(data[:sent]))
        return sent

    def sendmsg(self, buffers: Iterable[Any], *args: Any) -> int:
        buffers = list(buffers)
        sent: int = self._socket.sendmsg(buffers, *args)
        self._sends.append(b"".join(bytes(buffer) for buffer in buffers)[:sent])
        return sent


def recordSends(transport: Any) -> list[bytes]:
    """
    Record every send system call made on the socket of C{transport}, a
    real TCP or UNIX connection of Twisted's, from now on: Twisted's own
    sends and the ones L{protocols.CoalescingTransport} makes
    directly.  Unlike L{recordWrites}, this leaves C{write} alone, so
    direct sends stay on.

    @return: the list the calls are appended to: the bytes each call sent.
    """
    sends: list[bytes] = []
    transport.socket = _RecordingSocket(transport.socket, sends)
    return sends


def messagesPerWrite(writes: Iterable[bytes], preamble: bool = True) -> list[int]:
    """
    Check that C{writes}, the writes of one direction of a connection in
    order, never split a message, and count the messages in each.

    A message is one top-level object (an OPEN to its matching CLOSE, or a
    single token) or a control token (PING, PONG, ERROR); the preamble is
    not counted.

    @return: the number of messages each write ends, one count per write.
    @raise AssertionError: a write ends in the middle of a token or of an
        object.
    """
    tracer = TokenTracer(preamble)
    depth = 0
    counts = []
    for index, data in enumerate(writes):
        ended = 0
        for event in tracer.feed(data):
            if event.kind == "PREAMBLE":
                continue
            if event.kind == "OPEN":
                depth += 1
                continue
            if event.kind in ("CLOSE", "ABORT"):
                depth -= 1
            if depth == 0:
                ended += 1
        if tracer.broken is not None:
            raise AssertionError(f"write {index} is not a valid chunkwire stream: {tracer.broken}")
        if depth or not tracer.at_boundary:
            raise AssertionError(f"write {index} of {len(data)} bytes ends inside a message")
        counts.append(ended)
    return counts


def tlsRecords(data: bytes) -> list[tuple[int, int]]:
    """
    Split raw TLS bytes into records.

    @return: C{(content_type, length)} per whole record (23 is
        application data, 22 handshake, 21 alert).
    """
    records = []
    offset = 0
    while offset + 5 <= len(data):
        kind, length = data[offset], int.from_bytes(data[offset + 3 : offset + 5], "big")
        records.append((kind, length))
        offset += 5 + length
    return records


def _failure(error: BaseException) -> Failure:
    return Failure(error)  # type: ignore[no-untyped-call]


async def _stopListening(port: Any) -> None:
    stopped = port.stopListening()
    if stopped is not None:
        await stopped


def _quote(value: str) -> str:
    """Escape a value for an endpoint description (as endpoints.quoteStringArgument does)."""
    return value.replace("\\", "\\\\").replace(":", "\\:")


# -- in memory -----------------------------------------------------------------


@implementer(ITCPTransport, IConsumer, IPushProducer)
class MemoryTransport:
    """
    One end of an in-memory connection made by L{connectedPair}.

    It behaves like Twisted's TCP transport where protocols can tell: writes
    are queued until the pair is pumped; a streaming producer is paused when
    more than C{bufferSize} bytes wait and resumed when they have all been
    delivered; a pull producer is asked for more after each delivery;
    L{pauseProducing} stops delivery I{to} this end; C{loseConnection} waits
    for queued bytes and for the producer to be unregistered.

    @ivar protocol: the protocol on this end.
    @ivar writes: one C{bytes} per C{write} or C{writeSequence} call.
    @ivar bufferSize: bytes queued before a streaming producer is paused.
    @ivar readPaused: whether delivery to this end is paused.
    @ivar noDelay: the last value given to C{setTcpNoDelay}.
    """

    def __init__(self, protocol: Any, host: Any, peer: Any, bufferSize: int = 64 * 1024) -> None:
        self.protocol = protocol
        self.host, self.peer = host, peer
        self.bufferSize = bufferSize
        self.writes: list[bytes] = []
        self.outgoing: deque[bytes] = deque()
        self.outgoingBytes = 0
        self.readPaused = False
        self.connected = True
        self.disconnecting = False
        self.disconnected = False
        self.aborted = False
        self.producer: Any = None
        self.streamingProducer = False
        self.producerPaused = False
        self.noDelay = False
        self.keepAlive = False

    def __repr__(self) -> str:
        return f"<MemoryTransport for {type(self.protocol).__name__}, {self.outgoingBytes} bytes queued>"

    # ITransport
    def write(self, data: bytes) -> None:
        if not isinstance(data, bytes):
            raise TypeError(f"Data must be bytes, not {type(data).__name__}")
        if self.disconnected or self.aborted:
            return
        self.writes.append(data)
        if data:
            self.outgoing.append(data)
            self.outgoingBytes += len(data)
            self._maybePauseProducer()

    def writeSequence(self, data: Iterable[bytes]) -> None:
        pieces = list(data)
        if not all(isinstance(piece, bytes) for piece in pieces):
            raise TypeError("Data must be bytes")
        if self.disconnected or self.aborted:
            return
        joined = b"".join(pieces)
        self.writes.append(joined)
        if joined:
            self.outgoing.append(joined)
            self.outgoingBytes += len(joined)
            self._maybePauseProducer()

    def loseConnection(self) -> None:
        self.disconnecting = True

    def abortConnection(self) -> None:
        self.disconnecting = True
        self.aborted = True
        self.outgoing.clear()
        self.outgoingBytes = 0

    def getPeer(self) -> Any:
        return self.peer

    def getHost(self) -> Any:
        return self.host

    def logPrefix(self) -> str:
        return "memory"

    # ITCPTransport
    def setTcpNoDelay(self, enabled: bool) -> None:
        self.noDelay = bool(enabled)

    def getTcpNoDelay(self) -> bool:
        return self.noDelay

    def setTcpKeepAlive(self, enabled: bool) -> None:
        self.keepAlive = bool(enabled)

    def getTcpKeepAlive(self) -> bool:
        return self.keepAlive

    def loseWriteConnection(self) -> None:
        self.loseConnection()

    # IConsumer
    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self.producer is not None:
            raise RuntimeError(f"Cannot register producer {producer!r}: {self.producer!r} was never unregistered")
        if self.disconnected:
            producer.stopProducing()
            return
        self.producer, self.streamingProducer, self.producerPaused = producer, bool(streaming), False
        if not streaming:
            producer.resumeProducing()

    def unregisterProducer(self) -> None:
        self.producer = None

    def _maybePauseProducer(self) -> None:
        producer = self.producer
        if producer is not None and self.streamingProducer and self.outgoingBytes > self.bufferSize:
            self.producerPaused = True
            producer.pauseProducing()

    def drained(self) -> None:
        """Everything queued was delivered: ask the producer for more, as a TCP transport does."""
        producer = self.producer
        if producer is not None and (not self.streamingProducer or self.producerPaused):
            self.producerPaused = False
            producer.resumeProducing()

    # IPushProducer (reading)
    def pauseProducing(self) -> None:
        self.readPaused = True

    def resumeProducing(self) -> None:
        self.readPaused = False

    def stopProducing(self) -> None:
        self.loseConnection()

    def lost(self, reason: Failure) -> None:
        """The connection is gone: stop the producer and tell the protocol, as a TCP transport does."""
        self.disconnected, self.connected = True, False
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.stopProducing()
        self.protocol.connectionLost(reason)


class MemoryPair:
    """
    Two protocols joined in memory; nothing moves until L{pump} or L{flush}.

    @ivar server: the accepting side's protocol.
    @ivar client: the connecting side's protocol.
    @ivar serverTransport: the server's L{MemoryTransport}.
    @ivar clientTransport: the client's L{MemoryTransport}.
    @ivar maxChunk: if set, deliveries are split into pieces of at most this
        many bytes, to exercise reassembly.
    """

    def __init__(self, server: Any, client: Any, bufferSize: int = 64 * 1024, maxChunk: int | None = None) -> None:
        server_address = IPv4Address("TCP", "127.0.0.1", 8750)
        client_address = IPv4Address("TCP", "127.0.0.1", 50000)
        self.server, self.client = server, client
        self.serverTransport = MemoryTransport(_connection(server), server_address, client_address, bufferSize)
        self.clientTransport = MemoryTransport(_connection(client), client_address, server_address, bufferSize)
        self.maxChunk = maxChunk

    def pump(self) -> bool:
        """Deliver what each side has written so far; return whether anything moved."""
        moved = self._deliver(self.clientTransport, self.serverTransport)
        moved = self._deliver(self.serverTransport, self.clientTransport) or moved
        return self._closeIfDone() or moved

    def flush(self, rounds: int = 10_000) -> bool:
        """
        Pump until nothing moves; return whether anything did.

        @raise RuntimeError: if it is still moving after C{rounds} rounds.
        """
        moved = False
        for _ in range(rounds):
            if not self.pump():
                return moved
            moved = True
        raise RuntimeError(f"still pumping after {rounds} rounds")

    def _deliver(self, sender: MemoryTransport, receiver: MemoryTransport) -> bool:
        moved = False
        while sender.outgoing and not receiver.readPaused and not receiver.disconnected:
            data = sender.outgoing.popleft()
            sender.outgoingBytes -= len(data)
            moved = True
            self._hand(receiver, data)
        if moved and not sender.outgoing:
            sender.drained()
        return moved

    def _hand(self, receiver: MemoryTransport, data: bytes) -> None:
        step = self.maxChunk or len(data)
        for offset in range(0, len(data), step):
            if receiver.disconnected:
                return
            receiver.protocol.dataReceived(data[offset : offset + step])

    def _closeIfDone(self) -> bool:
        for closing, other in (
            (self.clientTransport, self.serverTransport),
            (self.serverTransport, self.clientTransport),
        ):
            if closing.disconnected or not closing.disconnecting:
                continue
            if closing.aborted:
                self._close(closing, _failure(ConnectionAborted()), other, _failure(ConnectionLost()))
                return True
            if not closing.outgoing and closing.producer is None:
                self._close(closing, _failure(ConnectionDone()), other, _failure(ConnectionDone()))
                return True
        return False

    def _close(
        self, first: MemoryTransport, firstReason: Failure, second: MemoryTransport, secondReason: Failure
    ) -> None:
        second.outgoing.clear()
        second.outgoingBytes = 0
        first.lost(firstReason)
        if not second.disconnected:
            second.lost(secondReason)


def connectedPair(server: Any, client: Any, bufferSize: int = 64 * 1024, maxChunk: int | None = None) -> MemoryPair:
    """
    Connect C{server} and C{client} in memory: both get C{makeConnection}
    (server first, as a listening port would), then everything they wrote
    meanwhile is delivered with one L{MemoryPair.flush}.  Each may be a
    protocol or a receiver with its own C{connection} (an RPC C{Broker}):
    the pair then keeps the receiver and connects its connection.

    @param bufferSize: bytes a transport queues before pausing its
        streaming producer (Twisted's TCP transport uses 64 KiB).
    @param maxChunk: split each delivery into pieces of at most this size.
    """
    pair = MemoryPair(server, client, bufferSize, maxChunk)
    pair.serverTransport.protocol.makeConnection(pair.serverTransport)
    pair.clientTransport.protocol.makeConnection(pair.clientTransport)
    pair.flush()
    return pair


class BrokerPair:
    """
    An RPC server and client joined in memory on one L{Clock}, made by
    L{brokerPair}: a service tested with no reactor and no socket.  Nothing
    moves until L{flush}.

    @ivar server: the server's L{Broker}, exposing the root.
    @ivar client: the client's L{Broker}.
    @ivar root: the client's L{RemoteReference} to the server's root
        (C{root.typed(IFoo)} is its typed proxy).
    @ivar clock: the L{Clock} both brokers schedule on: advance it to make
        a call's timeout or a service's timer happen.
    @ivar memory: the L{MemoryPair} carrying the bytes (its transports
        record every write).
    """

    def __init__(self, server: Broker, client: Broker, clock: Clock) -> None:
        self.server, self.client, self.clock = server, client, clock
        self.memory = connectedPair(server, client)
        self.root: RemoteReference = client.rootReference()

    def flush(self, rounds: int = 100_000) -> None:
        """
        Deliver everything both sides wrote, and the work that is due at
        the clock's present time (a broker leaves some to the end of the
        reactor's turn: held preambles, RELEASEs), until nothing moves.
        Timers further ahead wait for C{clock.advance}.

        @raise RuntimeError: still moving after C{rounds} rounds.
        """
        for _ in range(rounds):
            self.clock.advance(0)
            if not self.memory.flush() and not self._due():
                return
        raise RuntimeError(f"still moving after {rounds} rounds")

    def collect(self, stream: Deferred[AsyncIterator[T]] | AsyncIterator[T], count: int | None = None) -> list[T]:
        """
        Pull a stream of objects (C{protocols/rpc/_streams.py}) under a
        C{SynchronousTestCase}: its items, taken one at a time with a
        L{flush} before each, until C{count} of them (the stream then stays
        open: collect more, or C{cancel()} it) or, with no C{count}, its end::

            ticks = pair.root.typed(ITicker).ticks(5)   # a Deferred of the stream
            assert pair.collect(ticks) == [0, 1, 2, 3, 4]

        @param stream: the stream, or the L{Deferred} of a call's result
            that fires with one (a typed proxy's C{AsyncIterator} method,
            C{root.callRemote(...)}).
        @raise Exception: the call or the stream failed (its error, as the
            peer's items before it were taken: a refused item's
            L{framing.Violation}, the call's C{RemoteError}...).
        @raise RuntimeError: no item came and the stream did not end once
            everything was delivered (it waits on the clock, or the peer
            produced nothing): what was awaited is cancelled.
        """
        self.flush()
        reader: Any = self._settled(stream, "the call's result") if isinstance(stream, Deferred) else stream
        items: list[T] = []
        while count is None or len(items) < count:
            step = reader.__anext__()
            waiting: Deferred[Any] = step if isinstance(step, Deferred) else ensureDeferred(step)
            self.flush()
            try:
                items.append(self._settled(waiting, f"item {len(items)} of {reader!r}"))
            except StopAsyncIteration:
                break
        return items

    def _settled(self, waiting: Deferred[Any], what: str) -> Any:
        """What C{waiting} fired with (or raise what it failed with); it must have settled."""
        outcome: list[Any] = []
        waiting.addBoth(outcome.append)
        if not outcome:
            waiting.cancel()
            waiting.addErrback(lambda _: None)
            raise RuntimeError(f"{what} did not come once everything was delivered (advance pair.clock?)")
        [result] = outcome
        if isinstance(result, Failure):
            result.raiseException()
        return result

    def _due(self) -> bool:
        """Whether a timer is due at the clock's present time (work left to the end of a turn)."""
        now = self.clock.seconds()
        return any(call.getTime() <= now for call in self.clock.calls)


def brokerPair(
    root: Referenceable,
    *,
    bulk: bool = False,
    clientRoot: Referenceable | None = None,
    registry: Registry | None = None,
    tracebacks: bool = False,
) -> BrokerPair:
    """
    Serve C{root} to a client in memory, as L{protocols.rpc.serve} and
    L{protocols.rpc.connect} would over a socket (the server with
    L{SERVER_CALL_LIMITS}), and return the pair, already connected::

        pair = brokerPair(Greeter())
        answer = pair.root.callRemote("greet", "ada")
        pair.flush()
        assert self.successResultOf(answer) == "hello ada"

    @param bulk: both ends carry streams with the default
        L{protocols.bulk.BulkOptions} (C{Broker(bulk=...)}, as the C{bulk}
        of C{ServerOptions} and C{ClientOptions} makes them).
    @param clientRoot: what the server may call through the client's root.
    @param registry: the L{Registry} of application types, for both ends.
    @param tracebacks: the server sends tracebacks of failed calls.
    """
    clock = Clock()
    streams: Any = None
    if bulk:
        from .bulk._options import BulkOptions

        streams = BulkOptions()
    server = Broker(
        root, clock=clock, tracebacks=tracebacks, registry=registry, callLimits=SERVER_CALL_LIMITS, bulk=streams
    )
    client = Broker(clientRoot, clock=clock, registry=registry, bulk=streams)
    return BrokerPair(server, client, clock)


# -- real loopback TCP -----------------------------------------------------------


class LoopbackPair:
    """
    Two protocols connected over a real TCP connection on the loopback
    interface, made by L{loopbackTCP}.

    @ivar server: the accepting side's protocol.
    @ivar client: the connecting side's protocol.
    @ivar port: the listening port (already listening for nobody else).
    @ivar serverLost: fires with the exception that ended the server's connection.
    @ivar clientLost: fires with the exception that ended the client's connection.
    """

    def __init__(
        self,
        server: Any,
        client: Any,
        port: IListeningPort,
        serverLost: Deferred[BaseException],
        clientLost: Deferred[BaseException],
    ) -> None:
        self.server, self.client, self.port = server, client, port
        self.serverLost, self.clientLost = serverLost, clientLost

    def close(self) -> Deferred[None]:
        """Close both ends and stop listening; fires once both have seen C{connectionLost}."""
        for protocol in (_connection(self.client), _connection(self.server)):
            if protocol.transport is not None and not getattr(protocol.transport, "disconnecting", False):
                protocol.transport.loseConnection()
        waits: list[Deferred[Any]] = [
            self.serverLost,
            self.clientLost,
            Deferred.fromCoroutine(_stopListening(self.port)),
        ]
        return DeferredList(waits).addCallback(lambda _: None)


def _connection(protocol: Any) -> Any:
    """
    The protocol a transport talks to: C{protocol} itself, or the
    C{connection} of a receiver that made its own (an RPC broker).
    """
    if isinstance(protocol, Protocol) or getattr(protocol, "connection", None) is None:
        return protocol
    return connectionOf(protocol)


def whenLost(protocol: Any) -> Deferred[BaseException]:
    """
    Return a L{Deferred} that fires, right after C{protocol}'s
    C{connectionLost} ran, with the exception that ended the connection
    (C{reason.value}: C{ConnectionDone} for a clean close).  It succeeds
    whatever the reason, so waiting for it never logs an unhandled error;
    for a L{protocols.TokenProtocol}, the reason is its C{lossReason} (the
    C{ProtocolError} that dropped it, if one did).  A test helper for any
    Twisted protocol, it works by wrapping C{connectionLost} on the instance
    (the one such wrapping in C{protocols/}: tests.test_structure allows it here).
    """
    lost: Deferred[BaseException] = Deferred()
    original = protocol.connectionLost
    lossReason = getattr(protocol, "lossReason", None)

    def notifyLost(reason: Failure) -> None:
        ended = reason if lossReason is None else lossReason(reason)  # (asked first: the loss empties the decoder)
        try:
            original(reason)
        finally:
            lost.callback(cast(BaseException, ended.value))

    protocol.connectionLost = notifyLost
    return lost


def _whenMade(protocol: Any) -> Deferred[Any]:
    made: Deferred[Any] = Deferred()
    original = protocol.connectionMade

    def notifyMade() -> None:
        original()
        made.callback(protocol)

    protocol.connectionMade = notifyMade
    return made


class TrackingFactory(Factory):
    """
    Wraps a server factory and remembers every protocol it builds, so that a
    test can close all server-side connections and wait for them (trial
    fails a test that leaves a connection open in the reactor).

    @ivar wrapped: the factory that builds the protocols.
    @ivar protocols: every protocol built, oldest first.
    """

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.protocols: list[Any] = []
        self._lost: list[Deferred[BaseException]] = []

    def startFactory(self) -> None:
        self.wrapped.doStart()

    def stopFactory(self) -> None:
        self.wrapped.doStop()

    def buildProtocol(self, addr: Any) -> Any:
        protocol = self.wrapped.buildProtocol(addr)
        if protocol is not None:
            self.protocols.append(protocol)
            self._lost.append(whenLost(protocol))
        return protocol

    def closeAll(self) -> Deferred[None]:
        """Close every connection still open; fires once all of them have seen C{connectionLost}."""
        for protocol, lost in zip(self.protocols, self._lost, strict=True):
            if not lost.called and protocol.transport is not None:
                protocol.transport.loseConnection()
        return DeferredList(self._lost).addCallback(lambda _: None)


class _OneProtocolFactory(Factory):
    """Hands out one given protocol instance, once."""

    def __init__(self, protocol: Protocol) -> None:
        self._protocol: Protocol | None = protocol

    def buildProtocol(self, addr: Any) -> Protocol | None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.factory = self
        return protocol


async def loopbackTCP(
    reactor: Any, server: Any, client: Any, interface: str = "127.0.0.1", timeout: float = 10
) -> LoopbackPair:
    """
    Connect C{client} to C{server} over a real TCP connection on the loopback
    interface C{interface} (C{"127.0.0.1"} or C{"::1"}), on a port the system
    picks (each side a protocol, or a receiver with its C{connection}, as
    for L{connectedPair}).  Returns once both sides' C{connectionMade} has run.  Call
    L{LoopbackPair.close} when done.  (A coroutine: await it, or wrap it in
    C{Deferred.fromCoroutine} under trial.)

    @raise twisted.internet.defer.TimeoutError: not connected within C{timeout} seconds.
    """
    serverConnection, clientConnection = _connection(server), _connection(client)
    server_made, server_lost = _whenMade(serverConnection), whenLost(serverConnection)
    client_made, client_lost = _whenMade(clientConnection), whenLost(clientConnection)
    ipv6 = ":" in interface
    listening = (TCP6ServerEndpoint if ipv6 else TCP4ServerEndpoint)(reactor, 0, interface=interface)
    port = await listening.listen(_OneProtocolFactory(serverConnection))  # type: ignore[no-untyped-call]
    connecting = (TCP6ClientEndpoint if ipv6 else TCP4ClientEndpoint)(reactor, interface, port.getHost().port)
    try:
        connected = connecting.connect(_OneProtocolFactory(clientConnection))  # type: ignore[arg-type]
        both = gatherResults([server_made, client_made, connected])
        await both.addTimeout(timeout, reactor)
    except BaseException:
        await _stopListening(port)
        raise
    return LoopbackPair(server, client, port, server_lost, client_lost)


# -- TLS ---------------------------------------------------------------------------


class SelfSignedCertificate:
    """
    A private key and a self-signed certificate for C{hostname} (and for
    127.0.0.1 and ::1), made at test time so no private key is ever committed.

    @ivar keyPEM: the private key, PEM.
    @ivar certPEM: the certificate, PEM.
    @ivar serverPEMPath: after L{writeTo}, the file holding key and
        certificate (for C{ssl:...:privateKey=}).
    @ivar caDirectory: after L{writeTo}, a directory holding only the
        certificate (for C{ssl:...:caCertsDir=}).
    """

    def __init__(self, keyPEM: bytes, certPEM: bytes, hostname: str) -> None:
        self.keyPEM, self.certPEM, self.hostname = keyPEM, certPEM, hostname
        self.serverPEMPath: Path | None = None
        self.caDirectory: Path | None = None

    @classmethod
    def generate(cls, hostname: str = "localhost") -> SelfSignedCertificate:
        """Make a new P-256 key and a certificate valid for a day."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
        now = datetime.datetime.now(datetime.timezone.utc)
        alternatives: list[x509.GeneralName] = [
            x509.DNSName(hostname),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(key_pem, certificate.public_bytes(serialization.Encoding.PEM), hostname)

    def serverOptions(self) -> Any:
        """TLS options for a server using this certificate (for C{TLSMemoryBIOFactory} or C{listenSSL})."""
        from twisted.internet.ssl import CertificateOptions

        from .auth._tlsendpoints import keyAndCertificate

        return CertificateOptions(**keyAndCertificate(self.keyPEM, self.certPEM))

    def clientOptions(self) -> Any:
        """TLS options for a client that trusts only this certificate and checks C{hostname}."""
        from twisted.internet.ssl import Certificate, optionsForClientTLS

        trusted = Certificate.loadPEM(self.certPEM)
        return optionsForClientTLS(self.hostname, trustRoot=trusted)

    def writeTo(self, directory: str | Path) -> SelfSignedCertificate:
        """Write C{server.pem} (key and certificate) and C{ca/ca.pem} (certificate) under C{directory}."""
        directory = Path(directory)
        self.caDirectory = directory / "ca"
        self.caDirectory.mkdir(parents=True, exist_ok=True)
        (self.caDirectory / "ca.pem").write_bytes(self.certPEM)
        self.serverPEMPath = directory / "server.pem"
        self.serverPEMPath.write_bytes(self.keyPEM + self.certPEM)
        self.serverPEMPath.chmod(0o600)
        return self

    def serverEndpoint(self, port: int = 0, interface: str = "127.0.0.1") -> str:
        """An C{ssl:} server endpoint description using the files from L{writeTo}."""
        if self.serverPEMPath is None:
            raise RuntimeError("call writeTo() first")
        return f"ssl:{port}:privateKey={_quote(str(self.serverPEMPath))}:interface={_quote(interface)}"

    def clientEndpoint(self, port: int, host: str = "127.0.0.1") -> str:
        """An C{ssl:} client endpoint description trusting this certificate, from L{writeTo}'s files."""
        if self.caDirectory is None:
            raise RuntimeError("call writeTo() first")
        return (
            f"ssl:host={_quote(host)}:port={port}:caCertsDir={_quote(str(self.caDirectory))}:hostname={self.hostname}"
        )
