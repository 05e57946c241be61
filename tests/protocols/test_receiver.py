"""TokenProtocol composed with an IObjectReceiver, its config, its observers and its send transaction."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from framing import Decoder, EncodingError, Limits, Registry, Violation, dumps
from framing._errors import BadPreamble, PeerError
from framing._outgoing import Outgoing
from framing.slicing._interfaces import ISlicer
from framing.wire import PING, PONG, PREAMBLE, encode_header
from protocols import TokenProtocol
from protocols._config import ConnectionConfig
from protocols._interfaces import IConnectionObserver, IObjectReceiver, IObjectSender
from protocols.rpc import Referenceable, serverFactory
from protocols.testing import RecordingTransport, connectedPair

from .helpers import cancelDropTimers, tokenBytes


@implementer(IObjectReceiver)
class Receiver:
    """Records what its connection hands it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.sender: Any = None

    def startReceiving(self, sender: Any) -> None:
        self.sender = sender
        self.events.append(("start", sender))

    def objectReceived(self, obj: Any) -> None:
        self.events.append(("object", obj))

    def objectRefused(self, violation: Violation) -> None:
        self.events.append(("refused", violation.code))

    def stopReceiving(self, reason: Failure) -> None:
        self.events.append(("stop", reason.type))


@implementer(IConnectionObserver)
class Observer:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def connectionStarted(self, protocol: Any) -> None:
        self.calls.append(("started",))

    def dataArrived(self, length: int) -> None:
        self.calls.append(("arrived", length))

    def dataDecoded(self, length: int, completed: int, controlBytes: int) -> None:
        self.calls.append(("decoded", length, completed, controlBytes))

    def dataRead(self, length: int, completed: int, controlBytes: int) -> None:
        self.calls.append(("read", length, completed, controlBytes))

    def sendBacklogChanged(self, backlogged: bool) -> None:
        self.calls.append(("backlog", backlogged))

    def connectionEnded(self, reason: Failure) -> None:
        self.calls.append(("ended",))


class ReceiverTests(SynchronousTestCase):
    def test_receiverGetsObjectsInOrder(self) -> None:
        """A protocol given a receiver starts it, hands it objects and refusals in stream order, then stops it."""
        receiver = Receiver()
        protocol = TokenProtocol(receiver=receiver, limits=Limits(max_string_length=4))
        protocol.makeConnection(RecordingTransport())
        self.assertIs(receiver.sender, protocol)
        protocol.dataReceived(PREAMBLE + tokenBytes(dumps(1)) + tokenBytes(dumps("too long")) + tokenBytes(dumps([2])))
        protocol.connectionLost(Failure(ConnectionError()))
        self.assertEqual(
            receiver.events,
            [
                ("start", protocol),
                ("object", 1),
                ("refused", "body-too-large"),
                ("object", [2]),
                ("stop", ConnectionError),
            ],
        )

    def test_protocolIsItsOwnReceiver(self) -> None:
        """Without a receiver the protocol's own hooks receive (subclassing), and it provides both interfaces."""
        protocol = TokenProtocol()
        self.assertIs(protocol.receiver, protocol)
        verifyObject(IObjectReceiver, protocol)
        verifyObject(IObjectSender, protocol)

    def test_receiverLetGoAfterLoss(self) -> None:
        """Once the connection is lost, the protocol lets its receiver go (no reference cycle through it)."""
        receiver = Receiver()
        protocol = TokenProtocol(receiver=receiver)
        protocol.makeConnection(RecordingTransport())
        protocol.connectionLost(Failure(ConnectionError()))
        self.assertIsNot(protocol.receiver, receiver)
        verifyObject(IObjectReceiver, protocol.receiver)

    def test_receiversTalkOverAPair(self) -> None:
        """Two receivers on connected protocols exchange objects through their senders."""
        server, client = Receiver(), Receiver()
        pair = connectedPair(TokenProtocol(receiver=server), TokenProtocol(receiver=client))
        client.sender.sendObject({"hello": 1})
        pair.flush()
        self.assertIn(("object", {"hello": 1}), server.events)


class ConfigTests(SynchronousTestCase):
    def test_configSetsTheConnection(self) -> None:
        """The config's limits and registry are the connection's; keyword arguments override the config."""
        registry = Registry()
        config = ConnectionConfig(limits=Limits(max_string_length=9), registry=registry)
        protocol = TokenProtocol(config=config)
        self.assertEqual((protocol.limits, protocol.registry), (config.limits, registry))
        other = Limits(max_string_length=3)
        self.assertIs(TokenProtocol(other, config=config).limits, other)

    def test_decoderFactory(self) -> None:
        """The config's decoderFactory makes the connection's decoder from its limits and registry."""
        made: list[Any] = []

        def factory(limits: Any, registry: Any) -> Any:
            made.append((limits, registry))
            return Decoder(limits, registry)

        limits = Limits(max_string_length=5)
        protocol = TokenProtocol(config=ConnectionConfig(limits=limits, decoderFactory=factory))
        protocol.makeConnection(RecordingTransport())
        self.assertEqual(made, [(limits, None)])

    def test_heldPreambleLeavesWithTheFirstMessage(self) -> None:
        """With holdPreamble, the preamble waits for the first message (one write for both) or the turn's end."""
        clock = Clock()
        transport = RecordingTransport()
        protocol = TokenProtocol(config=ConnectionConfig(holdPreamble=True, clock=clock))
        protocol.makeConnection(transport)
        self.assertEqual(transport.writes, [])
        protocol.sendObject(1)
        self.assertEqual(transport.writes, [dumps(1)])
        quiet = RecordingTransport()
        TokenProtocol(config=ConnectionConfig(holdPreamble=True, clock=clock)).makeConnection(quiet)
        clock.advance(0)
        self.assertEqual(quiet.writes, [PREAMBLE])


class HeldPreambleDropTests(SynchronousTestCase):
    """
    A connection dropped in the turn its preamble is held sends the
    preamble, then the ERROR, in one write, and nothing after: the peer
    reads the reason, not a bad preamble.
    """

    def assertToldWhy(self, written: bytes, code: str) -> None:
        """C{written}, read as the peer's decoder reads it, is a preamble then an ERROR naming C{code}."""
        self.assertTrue(written.startswith(PREAMBLE), written)
        with self.assertRaises(PeerError) as raised:
            Decoder().feed(written)
        self.assertIn(f"the peer reported: {code}: ", str(raised.exception))

    def test_badPreambleInTheFirstTurn(self) -> None:
        """The peer's first bytes are no preamble, read before the turn ended."""
        clock = Clock()
        transport = RecordingTransport()
        protocol = TokenProtocol(config=ConnectionConfig(holdPreamble=True, clock=clock))
        protocol.makeConnection(transport)
        protocol.dataReceived(b"GET / HTTP/1.1\r\n\r\n")
        clock.advance(0)
        [written] = transport.writes
        self.assertToldWhy(written, "bad-preamble")
        self.assertTrue(transport.disconnecting)

    def test_brokerFirstMessageBreaksARule(self) -> None:
        """An RPC server whose peer's first object is no RPC message (held preamble: the broker's)."""
        clock = Clock()
        transport = RecordingTransport()
        protocol = serverFactory(Referenceable(), clock=clock).buildProtocol(None)
        protocol.makeConnection(transport)
        protocol.dataReceived(dumps([1, 2]))
        clock.advance(0)
        [written] = transport.writes
        self.assertToldWhy(written, "not-an-rpc-message")

    def test_droppedWhileConnecting(self) -> None:
        """Dropped by the receiver as the connection starts: the preamble still goes first."""
        clock = Clock()
        transport = RecordingTransport()

        class Refusing(TokenProtocol):
            def connectionMade(self) -> None:
                self.dropConnection(BadPreamble("refused at once"))

        Refusing(config=ConnectionConfig(holdPreamble=True, clock=clock)).makeConnection(transport)
        clock.advance(0)
        [written] = transport.writes
        self.assertToldWhy(written, "bad-preamble")


class OlderObserver:
    """An observer as written before C{dataRead}: the other methods of L{Observer} only."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    connectionStarted = Observer.connectionStarted
    dataArrived = Observer.dataArrived
    dataDecoded = Observer.dataDecoded
    sendBacklogChanged = Observer.sendBacklogChanged
    connectionEnded = Observer.connectionEnded


class ObserverTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)

    def test_observerSeesReadsNotObjects(self) -> None:
        """
        An observer hears of the start, each read and what it completed (in one call, once it is decoded), and the
        end: per read, not per object.
        """
        observer = Observer()
        protocol = TokenProtocol()
        protocol.addObserver(observer)
        protocol.makeConnection(RecordingTransport())
        data = dumps(1) + tokenBytes(dumps(2))
        protocol.dataReceived(data)
        protocol.connectionLost(Failure(ConnectionError()))
        self.assertEqual(observer.calls, [("started",), ("read", len(data), 2, 0), ("ended",)])

    def test_observerCountsWhatTheReadCompleted(self) -> None:
        """
        A read's dataRead counts the objects it completed, refusals and objects held back by a pause in the
        middle of it included, and the bytes of its PINGs and PONGs; the next read counts only its own.
        """
        observer = Observer()
        receiver = Receiver()
        protocol = TokenProtocol(receiver=receiver, limits=Limits(max_string_length=4))
        protocol.addObserver(observer)
        protocol.makeConnection(RecordingTransport())
        original = receiver.objectReceived

        def pausing(obj: Any) -> None:
            original(obj)
            if obj == 1:
                protocol.transport.pauseProducing()

        receiver.objectReceived = pausing  # type: ignore[method-assign]
        ping, pong = encode_header(PING, 7), encode_header(PONG, 9)
        data = PREAMBLE + ping + tokenBytes(dumps(1)) + tokenBytes(dumps("too long")) + pong + tokenBytes(dumps(2))
        protocol.dataReceived(data)
        self.assertEqual(observer.calls[-1], ("read", len(data), 3, len(ping) + len(pong)))
        self.assertEqual(receiver.events[1:], [("object", 1)])
        protocol.transport.resumeProducing()
        self.assertEqual(receiver.events[1:], [("object", 1), ("refused", "body-too-large"), ("object", 2)])
        more = tokenBytes(dumps(3))
        protocol.dataReceived(more)
        self.assertEqual(observer.calls[-1], ("read", len(more), 1, 0))
        self.assertEqual(protocol.inbound.controlBytesReceived, len(ping) + len(pong))

    def test_observerSeesHeldReadsTwice(self) -> None:
        """A read held while reading is paused is told as it arrives, and again once it is decoded on resuming."""
        observer = Observer()
        protocol = TokenProtocol()
        protocol.addObserver(observer)
        protocol.makeConnection(RecordingTransport())
        protocol.dataReceived(dumps(1))
        protocol.transport.pauseProducing()
        data = tokenBytes(dumps(2))
        protocol.dataReceived(data)
        self.assertEqual(observer.calls[-1], ("arrived", len(data)))
        protocol.transport.resumeProducing()
        self.assertEqual(observer.calls[-2:], [("arrived", len(data)), ("decoded", len(data), 1, 0)])

    def test_observerSeesBrokenReadArrive(self) -> None:
        """A read that breaks the stream is told as it arrived (nothing of it is decoded); the connection drops."""
        observer = Observer()
        protocol = TokenProtocol()
        protocol.addObserver(observer)
        protocol.makeConnection(RecordingTransport())
        protocol.dataReceived(b"not a preamble at all")
        self.assertIsNotNone(protocol.failure)
        self.assertIn(("arrived", len(b"not a preamble at all")), observer.calls)
        self.assertNotIn("read", [call[0] for call in observer.calls])

    def test_observerWithoutDataRead(self) -> None:
        """
        An observer written before dataRead (only dataArrived and dataDecoded)
        hears of each read as before, in those two calls; it can be removed.
        """

        observer = OlderObserver()
        protocol = TokenProtocol()
        protocol.addObserver(observer)
        protocol.makeConnection(RecordingTransport())
        data = dumps(1) + tokenBytes(dumps(2))
        protocol.dataReceived(data)
        self.assertEqual(observer.calls, [("started",), ("arrived", len(data)), ("decoded", len(data), 2, 0)])
        protocol.removeObserver(observer)
        protocol.dataReceived(dumps(3))
        protocol.connectionLost(Failure(ConnectionError()))
        self.assertEqual(len(observer.calls), 3)


class Tracked:
    pass


@implementer(ISlicer)
class TrackingSlicer:
    """Registers a commit and a rollback on each message it is part of; refuses when told to."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.refuse = False

    def slice(self, obj: Any, encoder: Any) -> None:
        outgoing: Outgoing = encoder.outgoing
        outgoing.on_commit(lambda: self.log.append("commit"))
        outgoing.on_rollback(lambda: self.log.append("rollback"))
        if self.refuse:
            raise EncodingError("refused")
        encoder.write_container("tracked", obj, ())


class SendTransactionTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.slicer = TrackingSlicer()
        registry = Registry()
        registry.add_slicer(Tracked, self.slicer)
        self.transport = RecordingTransport()
        self.protocol = TokenProtocol(registry=registry)
        self.protocol.makeConnection(self.transport)

    def test_sentMessageCommits(self) -> None:
        """A message that encodes is written and its slicers' commit actions run, not their rollbacks."""
        self.protocol.sendObject([Tracked()])
        self.assertEqual(self.slicer.log, ["commit"])
        self.assertEqual(len(self.transport.writes), 2)

    def test_failedMessageRollsBack(self) -> None:
        """A message that fails to encode writes nothing and runs its rollbacks, not its commits."""
        self.slicer.refuse = True
        self.assertRaises(EncodingError, self.protocol.sendObject, [1, Tracked()])
        self.assertEqual(self.slicer.log, ["rollback"])
        self.assertEqual(self.transport.writes, [PREAMBLE])

    def test_callerOutgoingIsTheTransaction(self) -> None:
        """A caller's own Outgoing is the one the slicers see; the caller's actions run with theirs."""
        outgoing = Outgoing()
        outgoing.on_commit(lambda: self.slicer.log.append("caller"))
        self.protocol.sendObject(Tracked(), outgoing)
        self.assertEqual(self.slicer.log, ["caller", "commit"])
        self.assertFalse(outgoing.open)
