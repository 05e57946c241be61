"""Interceptors: each call seen starting and ending once, on both sides, with its outcome; refusals; order."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import formatEvent
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Violation
from framing.rpc._wire import CALL
from protocols.rpc import Broker, Referenceable, RemoteViolation, remote
from protocols.rpc._interceptors import (
    CANCELLED,
    CLIENT,
    ERROR,
    LOST,
    OK,
    ONE_WAY,
    REFUSED,
    SERVER,
    CallInfo,
    CallInterceptor,
    intercept,
)
from protocols.testing import connectedPair

from ..helpers import pytestTest, trialTest
from .services import NotFound, Service
from .test_memory import messagesIn, quiet


class Recorder(CallInterceptor):
    """Records every hook it hears, and refuses the methods it is told to."""

    def __init__(self, name: str = "r", refuse: dict[str, Exception] | None = None) -> None:
        self.name = name
        self.refuse = refuse or {}
        self.events: list[tuple[str, Any]] = []
        self.ended: list[CallInfo] = []

    def callStarted(self, call: CallInfo) -> None:
        self.events.append((f"{self.name}.start", call.method))
        error = self.refuse.get(call.method)
        if error is not None:
            raise error

    def callEnded(self, call: CallInfo) -> None:
        self.events.append((f"{self.name}.end", call.method))
        self.ended.append(call)

    def connectionMade(self, broker: Any) -> None:
        self.events.append((f"{self.name}.made", None))

    def connectionLost(self, broker: Any) -> None:
        self.events.append((f"{self.name}.lost", None))


class Pair:
    """A server and a client broker, each with its own interceptors, joined in memory."""

    def __init__(self, server: list[Any], client: list[Any]) -> None:
        self.clock = Clock()
        self.service = Service()
        self.server = Broker(self.service, clock=self.clock)
        self.client = Broker(clock=self.clock)
        intercept(self.server, server)
        intercept(self.client, client)
        self.events = quiet(self.server, self.client)
        self.memory = connectedPair(self.server, self.client)
        self.root = self.client.rootReference()

    def flush(self) -> None:
        for _ in range(20):
            self.clock.advance(0)
            self.memory.flush()

    def call(self, name: str, *args: Any) -> Any:
        """Call C{name} on the server's root and deliver everything: the call's Deferred."""
        call = self.root.callRemote(name, *args)
        self.flush()
        return call


class ServerSideTests(SynchronousTestCase):
    """The answering side's interceptors."""

    def setUp(self) -> None:
        self.recorder = Recorder()
        self.pair = Pair([self.recorder], [])

    def test_answered(self) -> None:
        """An answered call starts and ends once, OK, with its method, the peer, its side and its timing."""
        self.assertEqual(self.successResultOf(self.pair.call("echo", 5)), 5)
        (info,) = self.recorder.ended
        self.assertEqual((info.side, info.method, info.outcome, info.errorType), (SERVER, "echo", OK, None))
        self.assertIn("127.0.0.1", info.peer)
        self.assertIsNone(info.avatar)
        self.assertGreaterEqual(info.duration, 0.0)
        self.assertEqual(self.recorder.events[1:], [("r.start", "echo"), ("r.end", "echo")])

    def test_failed(self) -> None:
        """A method that raises ends as ERROR with the error's wire type."""
        self.failureResultOf(self.pair.call("fail", "registered"), NotFound)
        (info,) = self.recorder.ended
        self.assertEqual((info.outcome, info.errorType), (ERROR, "tests.NotFound"))

    def test_noSuchMethod(self) -> None:
        """A call of a method that does not exist ends as REFUSED."""
        self.failureResultOf(self.pair.call("nothing"))
        (info,) = self.recorder.ended
        self.assertEqual((info.outcome, info.errorType), (REFUSED, "NoSuchMethod"))

    def test_cancelled(self) -> None:
        """A running call the caller cancels ends as CANCELLED."""
        call = self.pair.call("later", "k")
        self.assertEqual(self.recorder.ended, [])
        call.cancel()
        self.pair.flush()
        self.failureResultOf(call)
        self.assertEqual([info.outcome for info in self.recorder.ended], [CANCELLED])

    def test_lost(self) -> None:
        """A call still running when the connection ends ends as LOST, then the connection hook runs."""
        call = self.pair.call("later", "k")
        self.pair.server.connection.transport.loseConnection()
        self.pair.flush()
        self.failureResultOf(call)
        self.assertEqual([info.outcome for info in self.recorder.ended], [LOST])
        self.assertEqual(self.recorder.events[-1], ("r.lost", None))

    def test_oneWay(self) -> None:
        """A call for no answer ends as ONE_WAY once its method has returned."""
        self.pair.root.callRemoteOnly("echo", 1)
        self.pair.flush()
        self.assertEqual([info.outcome for info in self.recorder.ended], [ONE_WAY])

    def test_refusedByViolation(self) -> None:
        """An interceptor raising a Violation refuses the call: the method never runs; the caller sees it."""
        self.recorder.refuse["keep"] = Violation("not for you")
        error = self.failureResultOf(self.pair.call("keep", 1), RemoteViolation).value
        self.assertIn("not for you", str(error))
        self.assertIsNone(self.pair.service.received)
        self.assertEqual([info.outcome for info in self.recorder.ended], [REFUSED])

    def test_oneWayRefusedLogged(self) -> None:
        """A call for no answer an interceptor refuses is not run, nothing is sent back, and the server logs it."""
        self.pair.flush()
        writes = len(self.pair.memory.serverTransport.writes)
        self.recorder.refuse["keep"] = Violation("not for you")
        self.recorder.refuse["echo"] = NotFound("quota", 1)
        self.pair.root.callRemoteOnly("keep", 1)
        self.pair.root.callRemoteOnly("echo", 1)
        self.pair.flush()
        self.assertIsNone(self.pair.service.received)
        self.assertEqual(len(self.pair.memory.serverTransport.writes), writes)
        self.assertEqual([info.outcome for info in self.recorder.ended], [REFUSED, REFUSED])
        logged = "\n".join(formatEvent(event) for event in self.pair.events)
        self.assertIn("Refused a call of keep for no answer", logged)
        self.assertIn("not for you", logged)
        self.assertIn("an interceptor refused a call of echo for no answer", logged)
        self.assertIn("NotFound", logged)
        self.assertTrue(self.pair.client.isConnected())

    def test_refusedByRegisteredError(self) -> None:
        """An interceptor raising a registered error refuses the call with that error."""
        self.recorder.refuse["echo"] = NotFound("quota", 1)
        self.failureResultOf(self.pair.call("echo", 1), NotFound)

    def test_connectionMade(self) -> None:
        """The connection hook runs once when the connection starts."""
        self.assertEqual(self.recorder.events[:1], [("r.made", None)])


class ClientSideTests(SynchronousTestCase):
    """The calling side's interceptors."""

    def setUp(self) -> None:
        self.first, self.second = Recorder("a"), Recorder("b")
        self.pair = Pair([], [self.first, self.second])

    def test_order(self) -> None:
        """Interceptors start in order and end in reverse order, each call once."""
        call = self.pair.root.callRemote("echo", 2)
        self.pair.flush()
        self.assertEqual(self.successResultOf(call), 2)
        calls = [event for event in self.first.events + self.second.events if event[1] == "echo"]
        self.assertEqual(len(calls), 4)
        self.assertEqual(self.first.ended[0].side, CLIENT)
        self.assertEqual(self.first.ended[0].outcome, OK)

    def test_endOrder(self) -> None:
        """The last interceptor hears of a call's end first."""
        log: list[str] = []

        class Named(CallInterceptor):
            def __init__(self, name: str) -> None:
                self.name = name

            def callStarted(self, call: CallInfo) -> None:
                log.append(f"start {self.name}")

            def callEnded(self, call: CallInfo) -> None:
                log.append(f"end {self.name}")

        pair = Pair([], [Named("a"), Named("b")])
        pair.root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(log, ["start a", "start b", "end b", "end a"])

    def test_failedAtClient(self) -> None:
        """A call the server fails ends as ERROR on the calling side."""
        call = self.pair.root.callRemote("fail", "registered")
        self.pair.flush()
        self.failureResultOf(call, NotFound)
        self.assertEqual((self.first.ended[0].outcome, self.first.ended[0].errorType), (ERROR, "tests.NotFound"))

    def test_refusedLocally(self) -> None:
        """A client interceptor that refuses a call fails it locally: no CALL leaves."""
        self.second.refuse["echo"] = Violation("rate limited")
        call = self.pair.root.callRemote("echo", 1)
        self.pair.flush()
        self.failureResultOf(call, Violation)
        sent = messagesIn(b"".join(self.pair.memory.clientTransport.writes))
        self.assertEqual([m for m in sent if m[0] == CALL], [])
        self.assertEqual([info.outcome for info in self.first.ended], [REFUSED])


class BrokenInterceptor(CallInterceptor):
    """Fails in its end hook."""

    def callEnded(self, call: CallInfo) -> None:
        raise RuntimeError("bug in an interceptor")


class BrokenInterceptorTests(SynchronousTestCase):
    """An interceptor's own bug is logged and harms neither the call nor the connection."""

    def test_endHookFails(self) -> None:
        """A callEnded that raises is logged; the call is answered, the other interceptors hear of it once each."""
        recorder = Recorder()
        pair = Pair([recorder, BrokenInterceptor()], [])
        for value in (1, 2):
            call = pair.root.callRemote("echo", value)
            pair.flush()
            self.assertEqual(self.successResultOf(call), value)
        self.assertEqual([info.outcome for info in recorder.ended], [OK, OK])
        failures = [event["log_failure"].value for event in pair.events if "log_failure" in event]
        self.assertEqual([type(error) for error in failures], [RuntimeError, RuntimeError])


tag: ContextVar[str | None] = ContextVar("tests.tag", default=None)
"""What L{Tagging} interceptors set around a method, and L{Tagged}'s methods read."""


class Tagging(CallInterceptor):
    """Sets L{tag} to its name and the method's while the method runs; logs its enter and exit hooks."""

    def __init__(self, name: str, log: list[str], broken: bool = False) -> None:
        self.name, self.log, self.broken = name, log, broken

    def enterMethod(self, call: CallInfo) -> Any:
        self.log.append(f"enter {self.name}")
        if self.broken:
            raise RuntimeError("bug in enterMethod")
        return tag.set(f"{self.name}:{call.method}")

    def exitMethod(self, call: CallInfo, entered: Any) -> None:
        self.log.append(f"exit {self.name}")
        tag.reset(entered)


class Tagged(Referenceable):
    """Records the tag its methods see: at once, and after a Deferred fires later."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.waiting: Deferred[None] = Deferred()

    @remote
    def now(self) -> None:
        self.seen.append(tag.get())

    @remote
    async def later(self) -> None:
        self.seen.append(tag.get())
        await self.waiting
        self.seen.append(tag.get())


class MethodContextTests(SynchronousTestCase):
    """enterMethod and exitMethod: the context a method runs in, set up and undone around it."""

    def pair(self, *interceptors: Any) -> tuple[Tagged, Broker, Any, Any]:
        clock = Clock()
        service = Tagged()
        server, client = Broker(service, clock=clock), Broker(clock=clock)
        intercept(server, interceptors)
        events = quiet(server, client)
        memory = connectedPair(server, client)

        def flush() -> None:
            for _ in range(20):
                clock.advance(0)
                memory.flush()

        return service, client.rootReference(), flush, events

    def test_methodRunsInside(self) -> None:
        """
        A plain method, an async one across a later step, and a call for no
        answer see what enterMethod set; it is undone once the synchronous
        part returned; the hooks run in order, undone in reverse.
        """
        log: list[str] = []
        service, root, flush, _ = self.pair(Tagging("a", log), Tagging("b", log))
        calls = [root.callRemote("now"), root.callRemote("later")]
        root.callRemoteOnly("now")
        flush()
        self.assertEqual(service.seen, ["b:now", "b:later", "b:now"])
        self.assertIsNone(tag.get())
        service.waiting.callback(None)
        flush()
        self.assertEqual(service.seen[-1], "b:later")
        for call in calls:
            self.assertIsNone(self.successResultOf(call))
        self.assertEqual(log, ["enter a", "enter b", "exit b", "exit a"] * 3)

    def test_enterFails(self) -> None:
        """An enterMethod that raises is logged; the method runs and is answered; the others' hooks still run."""
        log: list[str] = []
        service, root, flush, events = self.pair(Tagging("a", log), Tagging("b", log, broken=True))
        call = root.callRemote("now")
        flush()
        self.assertIsNone(self.successResultOf(call))
        self.assertEqual(service.seen, ["a:now"])
        self.assertEqual(log, ["enter a", "enter b", "exit a"])
        failures = [event["log_failure"].value for event in events if "log_failure" in event]
        self.assertEqual([type(error) for error in failures], [RuntimeError])


async def avatarSeen(reactor: Any) -> None:
    """On a server with logins, an interceptor sees the logged-in avatar and the client's address."""
    from twisted.cred.checkers import AllowAnonymousAccess
    from twisted.cred.credentials import Anonymous
    from twisted.cred.portal import Portal

    from protocols import rpc

    from ..auth.test_login import Avatar, Realm, address, listen, stop

    recorder = Recorder()
    factory, port = await listen(reactor, Portal(Realm(), [AllowAnonymousAccess()]), interceptors=[recorder])
    root = await rpc.login(reactor, address(port), Anonymous())
    await root.callRemote("whoami")
    (info,) = recorder.ended
    assert isinstance(info.avatar, Avatar), info.avatar
    mine = root.broker.transport.getHost()
    assert f"port={mine.port}" in info.peer, info.peer
    await root.broker.disconnect()
    await stop(factory, port)


class AvatarTests(TestCase):
    """Interceptors with logins, under trial."""

    test_avatar_seen = trialTest(avatarSeen)


test_avatar_seen = pytestTest(avatarSeen)
