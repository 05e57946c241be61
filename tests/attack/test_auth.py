"""Attacks on logins: replayed exchanges, password guessing, anything before a login, guessed ids.

Each reactor test is one C{async def} body run under trial and pytest-twisted.
The server runs in this process (its state is asserted directly); the
attackers are raw TCP clients that speak the login exchange by hand.
"""

from __future__ import annotations

import gc
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from twisted.cred.credentials import UsernamePassword
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.endpoints import TCP4ClientEndpoint, serverFromString
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from zope.interface import implementer

from framing import Decoder, Encoder, ProtocolError, Registry
from framing.login._scram import ScramClient
from framing.login._wire import CONTINUE, START, LoginMessage, addLoginTypes, loginRegistry
from framing.wire import PREAMBLE
from protocols import rpc
from protocols.auth import IRemoteRoot, LoginRefused
from protocols.auth._users import UserFile, addUser
from protocols.rpc import NoSuchObject
from protocols.rpc._options import ServerOptions

from ..protocols.helpers import capturedLogs, pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"
USER, PASSWORD = "ada", b"correct horse battery"


class Root(rpc.Referenceable):
    def __init__(self, avatarId: Any) -> None:
        self.avatarId = avatarId

    @rpc.remote
    def whoami(self) -> str:
        return str(self.avatarId)

    @rpc.remote
    def child(self) -> Root:
        return Root(b"child")


@implementer(IRealm)
class Realm:
    def __init__(self) -> None:
        self.requested: list[Any] = []

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
        self.requested.append(avatarId)
        return IRemoteRoot, Root(avatarId), lambda: None


class Server:
    """A server with a SCRAM user file, in this process."""

    def __init__(self, realm: Realm, factory: Any, port: Any) -> None:
        self.realm, self.factory, self.port = realm, factory, port

    @property
    def address(self) -> str:
        return f"tcp:host=127.0.0.1:port={self.port.getHost().port}"

    @property
    def authenticator(self) -> Any:
        return self.factory.gate.__self__

    async def stop(self) -> None:
        await self.port.stopListening()
        await self.factory.disconnectAll()


async def startServer(reactor: Any, directory: str, **options: Any) -> Server:
    users = Path(directory) / "users"
    addUser(users, USER, PASSWORD, iterations=4096)
    realm = Realm()
    # No guard: its cap of connections per address would refuse the flood before the login throttle (the subject).
    options.setdefault("guard", None)
    factory = rpc.serverFactory(
        clock=reactor, options=ServerOptions(portal=Portal(realm, [UserFile(users)]), **options)
    )
    port = await serverFromString(reactor, LISTEN).listen(factory)
    return Server(realm, factory, port)


class RawClient(Protocol):
    """
    Speaks the login exchange by hand: sends what it is told, decodes what
    the server sends, records every byte it sent.
    """

    def __init__(self) -> None:
        self.sent = b""
        self.decoder = Decoder(registry=loginRegistry())
        self.messages: list[Any] = []
        self.waiting: Deferred[Any] | None = None
        self.lost: Deferred[None] = Deferred()
        registry = Registry()
        addLoginTypes(registry)
        self.encoder = Encoder(registry)

    def send(self, data: bytes) -> None:
        self.sent += data
        self.transport.write(data)

    def sendMessage(self, verb: str, mechanism: str, payload: bytes, preamble: bool = False) -> None:
        self.send((PREAMBLE if preamble else b"") + self.encoder.encode(LoginMessage.of(verb, mechanism, payload)))

    def next(self) -> Deferred[Any]:
        if self.messages:
            d: Deferred[Any] = Deferred()
            d.callback(self.messages.pop(0))
            return d
        self.waiting = Deferred()
        return self.waiting

    def dataReceived(self, data: bytes) -> None:
        try:
            messages = self.decoder.feed(data)
        except ProtocolError as error:
            # The server's parting ERROR token (why it dropped us).
            messages = [*error.results, None]
        for message in messages:
            if self.waiting is not None:
                waiting, self.waiting = self.waiting, None
                waiting.callback(message)
            else:
                self.messages.append(message)

    def connectionLost(self, reason: Any) -> None:
        if self.waiting is not None:
            waiting, self.waiting = self.waiting, None
            waiting.callback(None)
        self.lost.callback(None)


async def rawConnect(reactor: Any, server: Server, host: str = "127.0.0.1") -> RawClient:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", server.port.getHost().port, bindAddress=(host, 0))
    client = RawClient()
    await endpoint.connect(Factory.forProtocol(lambda: client))
    return client


async def scramByHand(reactor: Any, server: Server, password: bytes = PASSWORD, host: str = "127.0.0.1") -> Any:
    """One SCRAM login done by hand; the raw client and the server's last answer."""
    client = await rawConnect(reactor, server, host)
    scram = ScramClient(USER, password)
    client.sendMessage(START, "SCRAM-SHA-256", scram.first(), preamble=True)
    challenge = await client.next()
    if challenge is None or challenge.verb != "challenge":
        return client, challenge
    client.sendMessage(CONTINUE, "SCRAM-SHA-256", scram.final(challenge.payload))
    return client, await client.next()


SERVER_SIDE = {"TokenProtocol", "Broker", "ServerLogin", "CoalescingTransport", "ReferenceTable", "CallRunner"}
"""A server connection's parts: none may outlive its connection (the raw clients' decoders are not counted)."""


def chunkwireObjects() -> int:
    """How many live objects are a server connection's parts (L{SERVER_SIDE})."""
    return sum(1 for o in gc.get_objects() if type(o).__name__ in SERVER_SIDE)


# -- the attacks ------------------------------------------------------------------------


async def replayedLogin(reactor: Any) -> None:
    """Every byte of a successful password login, replayed on a new connection, is refused; no avatar is made."""
    with tempfile.TemporaryDirectory() as directory:
        server = await startServer(reactor, directory)
        honest, answer = await scramByHand(reactor, server)
        assert answer.verb == "accepted" and server.realm.requested == [USER.encode()]
        honest.transport.loseConnection()
        replay = await rawConnect(reactor, server)
        replay.send(honest.sent)
        answers = [await replay.next(), await replay.next()]
        await replay.lost
        assert [a.verb for a in answers] == ["challenge", "refused"], answers
        assert server.realm.requested == [USER.encode()]
        await server.stop()


async def passwordGuessing(reactor: Any) -> None:
    """
    Two thousand wrong passwords from one address: after the burst each is
    refused before any check, the server keeps one throttle entry and no
    connection, and an honest login from another address gets in meanwhile.
    """
    attempts, concurrency = 2_000, 50
    with tempfile.TemporaryDirectory() as directory, capturedLogs() as events:
        server = await startServer(reactor, directory)
        throttle = server.authenticator.throttle
        gc.collect()
        before = chunkwireObjects()

        async def guess(number: int) -> str:
            client, answer = await scramByHand(reactor, server, b"guess %d" % number)
            client.transport.loseConnection()
            # "refused" at once (throttled), or after the proof was checked: the same answer.
            return "none" if answer is None else answer.verb

        async def worker(first: int) -> list[str]:
            return [await guess(number) for number in range(first, attempts, concurrency)]

        started = reactor.seconds()
        flood = gatherResults([Deferred.fromCoroutine(worker(i)) for i in range(concurrency)])
        # The honest login comes once the flood is being throttled (or is over), not after a fixed pause.
        deadline = time.monotonic() + 60
        while not (throttle.throttled or flood.called) and time.monotonic() < deadline:
            await deferLater(reactor, 0.01)
        _, honest = await scramByHand(reactor, server, host="127.0.0.2")
        verbs = [verb for verbs in await flood for verb in verbs]
        assert honest.verb == "accepted"
        assert verbs == ["refused"] * attempts, set(verbs)
        # Only the first few ran a check; the rest were refused before any.  The
        # bucket drains at its rate meanwhile, so a slow (loaded) machine lets
        # that many more through: the bound follows the time the flood took.
        forgiven = math.ceil((reactor.seconds() - started) * throttle.rate)
        assert throttle.throttled >= attempts - 2 * throttle.burst - forgiven, (throttle.throttled, forgiven)
        assert len(throttle) == 1

        def cleared() -> bool:
            brokers = server.factory.brokers
            return brokers == {b for b in brokers if b.isConnected()} and len(brokers) <= 1

        # The closed connections' brokers go: all of them, given 2 s; then at most one left (60 s: only a hang).
        waited = time.monotonic()
        while server.factory.brokers and time.monotonic() - waited < 60:
            if cleared() and time.monotonic() - waited > 2:
                break
            await deferLater(reactor, 0.02)
        assert cleared()
        refusals = sum(1 for e in events if e.get("authEvent") == "refused")
        events.clear()
        gc.collect()
        grown = chunkwireObjects() - before
        # Nothing is kept per attempt: no connection, gate or broker outlives
        # its attempt.  (Objects in general are not counted: an unbegun
        # Twisted log keeps its last 65,536 events, whatever they hold.)
        assert grown <= len(SERVER_SIDE), grown
        # Every refusal is counted; only a few are logged in full (the rest in summary lines).
        assert server.authenticator.refusals.total >= attempts
        assert refusals <= 10 * (1 + math.ceil((reactor.seconds() - started) / 10)), refusals
        await server.stop()


async def anythingBeforeLogin(reactor: Any) -> None:
    """A call, a reference, a stream announcement and a plain list, each sent before logging in, drop the connection."""
    from framing.bulk._wire import STREAM_OPEN_TYPE
    from framing.rpc._wire import CALL, Message
    from protocols.rpc._refs import YOURREF_OPEN_TYPE

    call = Encoder(_brokerRegistry()).encode(Message((CALL, 1, 0, "whoami", None)))
    reference = _rawContainer(YOURREF_OPEN_TYPE, 0)
    stream = _rawContainer(STREAM_OPEN_TYPE, 1)
    plain = Encoder().encode([1, 2, 3])
    with tempfile.TemporaryDirectory() as directory, capturedLogs() as events:
        server = await startServer(reactor, directory)
        for data in (call, reference, stream, plain):
            client = await rawConnect(reactor, server)
            client.send(PREAMBLE + data)
            await client.lost
        assert server.realm.requested == []
        reasons = [e for e in events if e.get("code") == "not-logged-in"]
        assert len(reasons) == 4, [e.get("log_format") for e in events]
        await server.stop()


def _brokerRegistry() -> Registry:
    broker = rpc.Broker(None)
    registry: Registry = broker.connection.registry
    return registry


def _rawContainer(name: str, value: int) -> bytes:
    """OPEN name, value, CLOSE, written by hand (the type need not be registered here)."""
    from framing.wire import CLOSE, INT, OPEN, encode_header

    body = name.encode("ascii")
    return encode_header(OPEN, len(body)) + body + encode_header(INT, value) + encode_header(CLOSE, 0)


async def guessedExportIds(reactor: Any) -> None:
    """After logging in, a call to a guessed export id gets NoSuchObject, the same as an id never used."""
    with tempfile.TemporaryDirectory() as directory:
        server = await startServer(reactor, directory)
        other = await rpc.login(reactor, server.address, UsernamePassword(USER.encode(), PASSWORD))
        await other.callRemote("child")  # the other connection exports id 1
        root = await rpc.login(reactor, server.address, UsernamePassword(USER.encode(), PASSWORD))
        for guess in (1, 2, 7, 2**31):
            try:
                await root.broker.callRemote(guess, "whoami", (), {})
            except NoSuchObject:
                pass
            else:
                raise AssertionError(f"export id {guess} answered on a connection that never got it")
        await other.broker.disconnect()
        await root.broker.disconnect()
        await server.stop()


async def wrongPasswordRefused(reactor: Any) -> None:
    """rpc.login with a wrong password fails with LoginRefused, and the log names the user but holds no password."""
    with tempfile.TemporaryDirectory() as directory, capturedLogs() as events:
        server = await startServer(reactor, directory)
        try:
            await rpc.login(reactor, server.address, UsernamePassword(USER.encode(), b"not it"))
        except LoginRefused:
            pass
        else:
            raise AssertionError("a wrong password got in")
        await server.stop()
    text = repr(events)
    assert "not it" not in text and PASSWORD.decode() not in text
    assert any(e.get("authEvent") == "refused" and e.get("avatarId") == USER.encode() for e in events)


class LoginAttackTests(TestCase):
    test_replayed_login = trialTest(replayedLogin)
    # Ten thousand connections: about 10 s here, more on a busy machine.
    test_password_guessing = trialTest(passwordGuessing, timeout=120)
    test_anything_before_login = trialTest(anythingBeforeLogin)
    test_guessed_export_ids = trialTest(guessedExportIds)
    test_wrong_password_refused = trialTest(wrongPasswordRefused)


test_replayed_login = pytestTest(replayedLogin)
test_password_guessing = pytestTest(passwordGuessing, timeout=120)
test_anything_before_login = pytestTest(anythingBeforeLogin)
test_guessed_export_ids = pytestTest(guessedExportIds)
test_wrong_password_refused = pytestTest(wrongPasswordRefused)
