"""Broker extensions (L{IBrokerExtension}) and L{currentBroker}: what a loaded extension hears, and when."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from framing import EncodingError, Registry
from framing._outgoing import Outgoing
from protocols._interfaces import IObjectReceiver
from protocols.rpc import Broker, Referenceable, currentBroker, remote
from protocols.rpc._streams import ObjectStreams
from protocols.testing import connectedPair


class Recorder:
    """An extension that records every hook call, and takes top-level ints as its control objects."""

    controlTypes = (int,)

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.broker: Broker | None = None

    def install(self, broker: Broker, registry: Registry) -> None:
        self.broker = broker
        self.events.append(("install", registry))

    def connectionMade(self) -> None:
        self.events.append(("connectionMade",))

    def controlReceived(self, obj: Any) -> None:
        self.events.append(("control", obj))

    def connectionLost(self, reason: Any) -> None:
        assert self.broker is not None
        self.events.append(("connectionLost", reason.value, self.broker.pendingCount))


class CallWatcher(Recorder):
    """A recorder that also hears of each call sent."""

    controlTypes = ()

    def callSent(self, call: Deferred[Any], outgoing: Outgoing) -> None:
        self.events.append(("callSent", call, outgoing, outgoing.open))


class RollbackWatcher(CallWatcher):
    """A call watcher that counts the calls whose message was rolled back."""

    rolledBack = 0

    def callSent(self, call: Deferred[Any], outgoing: Outgoing) -> None:
        outgoing.on_rollback(self._rolledBack)

    def _rolledBack(self) -> None:
        self.rolledBack += 1


class Caller(Referenceable):
    """Remote methods that report which broker dispatched them."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.later: Deferred[None] = Deferred()

    @remote
    def who(self) -> int:
        self.seen.append(currentBroker())
        return len(self.seen)

    @remote
    async def whoLater(self) -> int:
        self.seen.append(currentBroker())
        await self.later
        self.seen.append(currentBroker())
        return len(self.seen)


def pair(serverExtensions: tuple[Any, ...] = (), clientExtensions: tuple[Any, ...] = (), root: Any = None) -> Any:
    clock = Clock()
    server = Broker(root or Caller(), clock=clock, extensions=serverExtensions)
    client = Broker(clock=clock, extensions=clientExtensions)
    memory = connectedPair(server, client)
    clock.advance(0)
    memory.flush()
    return server, client, memory, clock


class ExtensionTests(SynchronousTestCase):
    """A broker loads its extensions and calls their hooks."""

    def test_receiverShape(self) -> None:
        """A broker is an IObjectReceiver of a connection it made itself, not a protocol subclass."""
        broker = Broker(clock=Clock())
        self.assertTrue(verifyObject(IObjectReceiver, broker))
        self.assertIs(broker.connection.receiver, broker)

    def test_installedWithTheConnectionRegistry(self) -> None:
        """Each extension is installed once, in order, when the broker is made, with the connection's registry."""
        first, second = Recorder(), Recorder()
        broker = Broker(clock=Clock(), extensions=(first, second))
        self.assertEqual(first.events, [("install", broker.connection.registry)])
        self.assertEqual(second.events, [("install", broker.connection.registry)])
        self.assertIs(first.broker, broker)
        # Every broker loads the object streams' extension first (protocols.rpc._streams).
        self.assertIsInstance(broker.extensions[0], ObjectStreams)
        self.assertEqual(broker.extensions[1:], (first, second))

    def test_connectionMade(self) -> None:
        """An extension hears that the connection is up once, after it was installed."""
        extension = Recorder()
        pair(serverExtensions=(extension,))
        self.assertEqual([event[0] for event in extension.events], ["install", "connectionMade"])

    def test_controlObjectsGoToTheExtension(self) -> None:
        """A received object of an extension's control type goes to it; RPC calls still work beside it."""
        extension = Recorder()
        server, client, memory, _ = pair(serverExtensions=(extension,))
        client.sendObject(7)
        answer = client.rootReference().callRemote("who")
        client.sendObject(8)
        memory.flush()
        self.assertEqual(self.successResultOf(answer), 1)
        self.assertEqual(
            [event for event in extension.events if event[0] == "control"], [("control", 7), ("control", 8)]
        )
        self.assertIsNone(server.failure)

    def test_otherObjectsStillDropTheConnection(self) -> None:
        """An object of no extension's control type, outside any RPC message, still drops the connection."""
        extension = Recorder()
        server, client, memory, _ = pair(serverExtensions=(extension,))
        server.connection.log = Logger(observer=lambda event: None)
        client.sendObject("not a message")
        memory.flush()
        self.assertFalse(server.isConnected())
        self.assertEqual([event for event in extension.events if event[0] == "control"], [])

    def test_connectionLostAfterPendingCallsFailed(self) -> None:
        """An extension hears of the loss, with its reason, after the broker failed its pending calls."""
        extension = Recorder()
        root = Caller()
        server, client, memory, _ = pair(clientExtensions=(extension,), root=root)
        waiting = client.rootReference().callRemote("whoLater")
        memory.flush()
        server.disconnect()
        memory.flush()
        self.failureResultOf(waiting)
        (lost,) = [event for event in extension.events if event[0] == "connectionLost"]
        self.assertEqual(lost[2], 0)
        self.assertEqual(type(lost[1]).__name__, "ConnectionDone")

    def test_callSent(self) -> None:
        """An extension with callSent gets each call's Deferred and its still open Outgoing, before it is encoded."""
        watcher = CallWatcher()
        _, client, memory, _ = pair(clientExtensions=(watcher,))
        answer = client.rootReference().callRemote("who")
        (sent,) = [event for event in watcher.events if event[0] == "callSent"]
        self.assertIs(sent[1], answer)
        self.assertTrue(sent[3], "the outgoing is open when callSent runs")
        self.assertFalse(sent[2].open, "the outgoing is committed once the call is sent")
        memory.flush()
        self.assertEqual(self.successResultOf(answer), 1)

    def test_callSentRolledBack(self) -> None:
        """When a call's message cannot be encoded, the Outgoing callSent saw is rolled back."""
        watcher = RollbackWatcher()
        _, client, _, _ = pair(clientExtensions=(watcher,))
        self.failureResultOf(client.rootReference().callRemote("who", object()), EncodingError)
        self.assertEqual(watcher.rolledBack, 1)


class CurrentBrokerTests(SynchronousTestCase):
    """L{currentBroker} names the broker whose peer called the running method."""

    def test_outsideACall(self) -> None:
        """Outside a remote call there is no current broker."""
        self.assertIsNone(currentBroker())

    def test_synchronousMethod(self) -> None:
        """A method sees the broker that dispatched its call, and nothing is left set afterwards."""
        root = Caller()
        server, client, memory, _ = pair(root=root)
        self.successResultOf(self._call(client, memory, "who"))
        self.assertEqual(root.seen, [server])
        self.assertIsNone(currentBroker())

    def test_coroutineMethod(self) -> None:
        """A coroutine method sees its broker before and after it awaits."""
        root = Caller()
        server, client, memory, _ = pair(root=root)
        answer = self._call(client, memory, "whoLater")
        self.assertIsNone(currentBroker())
        root.later.callback(None)
        memory.flush()
        self.assertEqual(self.successResultOf(answer), 2)
        self.assertEqual(root.seen, [server, server])

    def _call(self, client: Broker, memory: Any, name: str) -> Deferred[Any]:
        answer = client.rootReference().callRemote(name)
        memory.flush()
        return answer
