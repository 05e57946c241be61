"""The login gate over real loopback TCP: who gets in, what happens before, and what is logged.

Each reactor test is one C{async def} body run under trial and pytest-twisted
(see C{tests/protocols/helpers.py}).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from twisted.cred.checkers import AllowAnonymousAccess
from twisted.cred.credentials import Anonymous
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, serverFromString
from twisted.internet.protocol import Factory as PlainFactory
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface import implementer

from framing import Encoder, Registry
from framing.login._errors import LoginRefused
from framing.login._wire import LoginMessage, addLoginTypes
from framing.wire import PREAMBLE
from protocols import rpc
from protocols._proxyheader import clientAddress
from protocols.auth._drains import MemoryThrottleState
from protocols.auth._interfaces import IRemoteRoot
from protocols.auth._server import Authenticator
from protocols.auth._throttle import LoginThrottle, ThrottleStateError
from protocols.options import ClientOptions
from protocols.rpc._options import ServerOptions

from ..helpers import capturedLogs, pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"


class Avatar(rpc.Referenceable):
    """What one logged-in client sees as its root."""

    def __init__(self, avatarId: Any) -> None:
        self.avatarId = avatarId

    @rpc.remote
    def whoami(self) -> str:
        return repr(self.avatarId)


@implementer(IRealm)
class Realm:
    """Makes an L{Avatar} per login and records logouts."""

    def __init__(self) -> None:
        self.loggedOut: list[Any] = []
        self.requested: list[tuple[Any, Any]] = []

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
        assert IRemoteRoot in interfaces
        self.requested.append((avatarId, mind))
        return IRemoteRoot, Avatar(avatarId), lambda: self.loggedOut.append(avatarId)


def authEvents(events: list[dict[str, Any]]) -> list[str]:
    return [event["authEvent"] for event in events if "authEvent" in event]


async def listen(reactor: Any, portal: Any, **options: Any) -> tuple[Any, Any]:
    factory = rpc.serverFactory(clock=reactor, options=ServerOptions(portal=portal, **options))
    port = await serverFromString(reactor, LISTEN).listen(factory)
    return factory, port


def address(port: Any) -> str:
    return f"tcp:host=127.0.0.1:port={port.getHost().port}"


async def stop(factory: Any, port: Any) -> None:
    await port.stopListening()
    await factory.disconnectAll()


async def eventually(reactor: Any, condition: Any, seconds: float = 60) -> None:
    """Wait, turning the reactor, until C{condition()} is true (only a hang misses C{seconds})."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await deferLater(reactor, 0.01)
    raise AssertionError("condition not reached")


class Raw(Protocol):
    """A client that sends given bytes and records what comes back and when the connection ends."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.received = b""
        self.lost: Deferred[None] = Deferred()

    def connectionMade(self) -> None:
        if self.data:
            self.transport.write(self.data)

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Any) -> None:
        self.lost.callback(None)


async def rawConnect(reactor: Any, port: Any, data: bytes) -> Raw:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)
    protocol = Raw(data)
    await endpoint.connect(PlainFactory.forProtocol(lambda: protocol))
    return protocol


def encoded(*objects: Any) -> bytes:
    registry = Registry()
    addLoginTypes(registry)
    encoder = Encoder(registry)
    return PREAMBLE + b"".join(encoder.encode(obj) for obj in objects)


# -- reactor tests -------------------------------------------------------------------


async def anonymousLogin(reactor: Any) -> None:
    """A portal that accepts Anonymous lets a client in; its root is the realm's avatar; logout runs on disconnect."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    with capturedLogs() as events:
        root = await rpc.login(reactor, address(port), Anonymous())
        assert await root.callRemote("whoami") == "()"
        [(avatarId, mind)] = realm.requested
        assert avatarId == () and isinstance(mind, rpc.Broker)
        await root.broker.disconnect()
        await eventually(reactor, lambda: realm.loggedOut == [()])
    assert authEvents(events) == ["login", "logout"]
    await stop(factory, port)


async def anonymousRefused(reactor: Any) -> None:
    """Without an Anonymous checker in the portal, an anonymous login is refused and the connection closed."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, []))
    with capturedLogs() as events:
        try:
            await rpc.login(reactor, address(port), Anonymous())
        except LoginRefused:
            pass
        else:
            raise AssertionError("an anonymous login got in without an Anonymous checker")
        await eventually(reactor, lambda: not factory.brokers)
    assert realm.requested == []
    assert authEvents(events) == ["refused"]
    await stop(factory, port)


async def callBeforeLogin(reactor: Any) -> None:
    """A call sent before logging in drops the connection with a logged not-logged-in reason; no avatar is made."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    with capturedLogs() as events:
        root = await rpc.connect(reactor, address(port))
        try:
            await root.callRemote("whoami")
        except Exception:
            pass
        else:
            raise AssertionError("a call before login was answered")
        await eventually(reactor, lambda: not factory.brokers)
    assert any("not-logged-in" in str(event.get("code", "")) for event in events)
    assert realm.requested == []
    await stop(factory, port)


async def callInTheLoginsRead(reactor: Any) -> None:
    """
    A call sent in the same read as the login message that is accepted at
    once (before the client could have seen the acceptance) was decoded
    under the login's rules and refused there: the connection is dropped
    with an ERROR saying so, not left up with the call silently lost.
    """
    from framing.rpc._wire import CALL, Message, MessageSlicer

    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    registry = Registry()
    registry.add_slicer(Message, MessageSlicer())
    call = Encoder(registry).encode(Message((CALL, 1, 0, "whoami", None)))
    with capturedLogs() as events:
        raw = await rawConnect(reactor, port, encoded(LoginMessage.of("start", "ANONYMOUS")) + call)
        await raw.lost
    assert realm.requested != []  # the login itself was accepted
    assert b"before the login was accepted" in raw.received, raw.received
    assert any("not-logged-in" in str(event.get("code", "")) for event in events)
    await stop(factory, port)


async def oversizedBeforeLogin(reactor: Any) -> None:
    """A login payload over the pre-login limit drops the connection before any checker runs."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    raw = await rawConnect(reactor, port, encoded(LoginMessage.of("start", "ANONYMOUS", b"x" * 10_000)))
    await raw.lost
    assert realm.requested == []
    await stop(factory, port)


async def loginTimeout(reactor: Any) -> None:
    """A connection that never logs in is dropped after the login timeout."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]), loginTimeout=0.2)
    with capturedLogs() as events:
        raw = await rawConnect(reactor, port, PREAMBLE)
        await raw.lost
    assert any(event.get("code") == "login-timeout" for event in events)
    await stop(factory, port)


async def eachLoginItsAvatar(reactor: Any) -> None:
    """Two logins get two avatars, each its own root; an export id from one is NoSuchObject on the other."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    first = await rpc.login(reactor, address(port), Anonymous())
    second = await rpc.login(reactor, address(port), Anonymous())
    assert await first.callRemote("whoami") == await second.callRemote("whoami") == "()"
    avatars = [broker.references.exports[0][0] for broker in factory.brokers]
    assert len(avatars) == 2 and avatars[0] is not avatars[1]
    await first.broker.disconnect()
    await second.broker.disconnect()
    await stop(factory, port)


async def reconnectingLogin(reactor: Any) -> None:
    """A reconnecting client logs in again on every connection; calls before a login fail, after it reach the avatar."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    client = rpc.reconnecting(
        reactor, address(port), retryPolicy=lambda attempt: 0.05, options=ClientOptions(credentials=Anonymous())
    )
    root = await client.whenConnected()
    assert await root.callRemote("whoami") == "()"
    await factory.disconnectAll()
    await eventually(reactor, lambda: len(realm.requested) == 2 and client.isConnected())
    assert await client.callRemote("whoami") == "()"
    assert len(realm.loggedOut) == 1
    await client.stopService()
    await stop(factory, port)


async def passwordsOverUnixAndTLS(reactor: Any) -> None:
    """A SCRAM login works over a UNIX socket and over TLS; a wrong password is refused on both."""
    import tempfile
    from pathlib import Path

    from twisted.cred.credentials import UsernamePassword

    from protocols.auth._users import UserFile, addUser
    from protocols.testing import SelfSignedCertificate

    with tempfile.TemporaryDirectory() as directory:
        users = Path(directory) / "users"
        addUser(users, "ada", b"pencil", iterations=4096)
        certificate = SelfSignedCertificate.generate("localhost").writeTo(directory)
        socket = f"{directory}/kv.sock"
        for listen, connect in (
            (f"unix:{socket}", f"unix:{socket}"),
            (certificate.serverEndpoint(0), None),
        ):
            realm = Realm()
            factory = rpc.serverFactory(clock=reactor, options=ServerOptions(portal=Portal(realm, [UserFile(users)])))
            port = await serverFromString(reactor, listen).listen(factory)
            address = connect or certificate.clientEndpoint(port.getHost().port)
            root = await rpc.login(reactor, address, UsernamePassword(b"ada", b"pencil"))
            assert await root.callRemote("whoami") == "b'ada'"
            try:
                await rpc.login(reactor, address, UsernamePassword(b"ada", b"pencilx"))
            except LoginRefused:
                pass
            else:
                raise AssertionError(f"a wrong password got in over {listen}")
            await root.broker.disconnect()
            await stop(factory, port)


async def reconnectingRefused(reactor: Any) -> None:
    """A reconnecting client whose login is refused records why, closes, and tries again after its backoff, quietly."""
    realm = Realm()
    factory, port = await listen(reactor, Portal(realm, []))
    with capturedLogs() as events:
        client = rpc.reconnecting(
            reactor, address(port), retryPolicy=lambda attempt: 0.05, options=ClientOptions(credentials=Anonymous())
        )
        await eventually(reactor, lambda: isinstance(client.loginFailure, LoginRefused))
        await eventually(reactor, lambda: authEvents(events).count("refused") >= 3)
        assert not client.isConnected() and realm.requested == []
        await client.stopService()
    assert not [event for event in events if event.get("isError")], "an error was logged"
    await stop(factory, port)


class LoginOverTCPTests(TestCase):
    test_reconnecting_refused = trialTest(reconnectingRefused)
    test_passwords_over_unix_and_tls = trialTest(passwordsOverUnixAndTLS)
    test_reconnecting_login = trialTest(reconnectingLogin)
    test_anonymous_login = trialTest(anonymousLogin)
    test_anonymous_refused = trialTest(anonymousRefused)
    test_call_before_login = trialTest(callBeforeLogin)
    test_oversized_before_login = trialTest(oversizedBeforeLogin)
    test_call_in_the_logins_read = trialTest(callInTheLoginsRead)
    test_login_timeout = trialTest(loginTimeout)
    test_each_login_its_avatar = trialTest(eachLoginItsAvatar)


test_reconnecting_login = pytestTest(reconnectingLogin)
test_reconnecting_refused = pytestTest(reconnectingRefused)
test_passwords_over_unix_and_tls = pytestTest(passwordsOverUnixAndTLS)
test_anonymous_login = pytestTest(anonymousLogin)
test_anonymous_refused = pytestTest(anonymousRefused)
test_call_before_login = pytestTest(callBeforeLogin)
test_oversized_before_login = pytestTest(oversizedBeforeLogin)
test_call_in_the_logins_read = pytestTest(callInTheLoginsRead)
test_login_timeout = pytestTest(loginTimeout)
test_each_login_its_avatar = pytestTest(eachLoginItsAvatar)


# -- no reactor ------------------------------------------------------------------------


class ServeArgumentsTests(SynchronousTestCase):
    def test_root_and_portal(self) -> None:
        """A server given both a root and a portal is a ValueError: which one would a client get?"""
        self.assertRaises(ValueError, rpc.serverFactory, Avatar(1), options=ServerOptions(portal=Portal(Realm(), [])))

    def test_neither(self) -> None:
        """A server given neither a root nor a login is a ValueError."""
        self.assertRaises(ValueError, rpc.serverFactory)

    def test_unsupported_credentials(self) -> None:
        """Credentials no mechanism takes fail at once, before connecting."""
        from framing.login._errors import UnsupportedCredentials

        self.assertRaises(UnsupportedCredentials, rpc.login, Clock(), "tcp:host=127.0.0.1:port=1", object())


class ThrottleTests(SynchronousTestCase):
    def test_burst_then_wait(self) -> None:
        """An address may make C{burst} attempts; then it waits until they drain at C{rate} per second."""
        clock = Clock()
        throttle = LoginThrottle(clock, burst=3, rate=1.0)
        self.assertEqual([throttle.admit("10.0.0.1") for _ in range(4)], [True, True, True, False])
        self.assertTrue(throttle.admit("10.0.0.2"))
        clock.advance(1.0)
        self.assertTrue(throttle.admit("10.0.0.1"))
        self.assertFalse(throttle.admit("10.0.0.1"))
        self.assertEqual(throttle.throttled, 2)

    def test_attempts_in_progress_count(self) -> None:
        """Attempts count when they start: many at once from one address get no more than C{burst} through."""
        throttle = LoginThrottle(Clock(), burst=5)
        self.assertEqual(sum(throttle.admit("a") for _ in range(50)), 5)

    def test_success_forgives(self) -> None:
        """A successful login clears its address's count."""
        throttle = LoginThrottle(Clock(), burst=1)
        self.assertTrue(throttle.admit("a"))
        self.assertFalse(throttle.admit("a"))
        throttle.succeeded("a")
        self.assertTrue(throttle.admit("a"))

    def test_logsInAuthNamespace(self) -> None:
        """
        The throttle logs in C{chunkwire.auth}, as docs/howto/auth.rst says
        (a Twisted Logger kept on the class logged in the class's dotted
        name instead), with the throttle as the event's source.
        """

        class Failing(MemoryThrottleState):
            @contextmanager
            def atomically(self) -> Iterator[None]:
                raise ThrottleStateError("the state's store is gone")
                yield

        throttle = LoginThrottle(Clock(), state=Failing(100))
        self.assertEqual(throttle.log.namespace, "chunkwire.auth")
        with capturedLogs() as events:
            self.assertFalse(throttle.admit("10.0.0.1"))
        [event] = [event for event in events if "throttle's state failed" in event.get("log_format", "")]
        self.assertEqual((event["log_namespace"], event["log_source"]), ("chunkwire.auth", throttle))
        self.assertEqual(Authenticator.log.namespace, "chunkwire.auth")

    def test_memory_bounded(self) -> None:
        """Attempts from many addresses keep at most maxAddresses entries, one per address, none per attempt."""
        throttle = LoginThrottle(Clock(), burst=2, maxAddresses=100)
        for attempt in range(10_000):
            throttle.admit(f"10.0.{attempt % 250}.{attempt % 7}")
        self.assertEqual(len(throttle), 100)
        for _ in range(10_000):
            throttle.admit("one")
        self.assertEqual(len(throttle), 100)

    def test_address_is_the_host(self) -> None:
        """Two connections from one host share a throttle entry, whatever their ports."""
        from twisted.internet.address import IPv4Address
        from twisted.internet.testing import StringTransport

        one, two = (StringTransport(peerAddress=IPv4Address("TCP", "10.1.2.3", port)) for port in (1000, 2000))
        self.assertEqual(clientAddress(one), clientAddress(two))
        self.assertEqual(clientAddress(one), "10.1.2.3")
