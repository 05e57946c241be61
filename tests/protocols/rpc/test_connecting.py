"""Every way of connecting takes the same ClientOptions: interface= types the root, timeout bounds a silent server."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Protocol

from twisted.cred.checkers import AllowAnonymousAccess
from twisted.cred.credentials import Anonymous
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import Factory
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from zope.interface import implementer

from framing import Limits
from protocols import bulk, echo, rpc
from protocols.auth._identity import ServerIdentity
from protocols.auth._interfaces import IRemoteRoot
from protocols.auth._names import NameTable
from protocols.options import ClientOptions
from protocols.rpc._interceptors import CallInfo, CallInterceptor
from protocols.rpc._options import ServerOptions

from ..auth.tlspeers import removeDirectory, shortDirectory
from ..helpers import pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"
SHORT = 0.5
"""The timeout given against a silent server: short, so the test is quick (the outcome, not the time, is checked)."""
STREAMS = bulk.BulkOptions()
"""The bulk options of the servers and clients that carry streams (the defaults)."""


class IGreeter(rpc.RemoteInterface, Protocol, name="test.connecting.IGreeter"):
    async def greet(self, name: str) -> str: ...

    async def tenant(self) -> str: ...


class Greeter(rpc.Referenceable, IGreeter):
    """The root every server here gives, open or after a login."""

    async def greet(self, name: str) -> str:
        return f"hello {name}"

    async def tenant(self) -> str:
        """The C{tenant} of the call's metadata, as the client's options sent it."""
        return rpc.currentCall().metadata.get("tenant", "none")


@implementer(IRealm)
class Realm:
    """A L{Greeter} per login."""

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
        return IRemoteRoot, Greeter(), lambda: None


class Counting(CallInterceptor):
    """Counts the calls this side makes."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def callStarted(self, call: CallInfo) -> None:
        self.started.append(call.method)


def portal() -> Portal:
    return Portal(Realm(), [AllowAnonymousAccess()])


def address(port: Any) -> str:
    return f"tcp:host=127.0.0.1:port={port.getHost().port}"


async def typedEveryWay(reactor: Any) -> None:
    """
    rpc.connect, login, connectURL, reconnecting and rpc.connect with bulk, given
    interface= and ClientOptions with a timeout, limits, interceptors and
    metadata: a typed proxy, whose calls the interceptors see and which
    carry the metadata; the servers' ServerOptions interceptors see them too.
    """
    directory = shortDirectory()
    identity = ServerIdentity.loadOrCreate(directory / "server.pem")
    names = NameTable()
    name = names.register(Greeter(), "a greeter")
    served = Counting()
    serving = ServerOptions(interceptors=(served,))
    ports = [
        await rpc.serve(reactor, LISTEN, Greeter(), options=serving),
        await rpc.serve(reactor, LISTEN, options=dataclasses.replace(serving, portal=portal())),
        await rpc.serve(reactor, LISTEN, Greeter(), options=dataclasses.replace(serving, bulk=STREAMS)),
        await rpc.serve(reactor, LISTEN, options=dataclasses.replace(serving, portal=portal(), bulk=STREAMS)),
        await rpc.serve(reactor, identity.serverDescription(LISTEN), options=ServerOptions(names=names)),
    ]
    openRPC, loginRPC, openBulk, loginBulk, named = ports
    url = str(names.url(identity, [f"127.0.0.1:{named.getHost().port}"], name))

    def options(**extra: Any) -> ClientOptions:
        return ClientOptions(timeout=10.0, limits=Limits(), callLimits=None, metadata={"tenant": "t1"}, **extra)

    async def reconnected(counting: Counting) -> Any:
        client = rpc.reconnecting(
            reactor, address(loginRPC), options=options(credentials=Anonymous(), interceptors=(counting,))
        )
        clients.append(client)
        root = await client.whenConnected()
        return root.typed(IGreeter)

    clients: list[Any] = []

    try:
        ways = {
            "rpc.connect": lambda counting: rpc.connect(
                reactor, address(openRPC), interface=IGreeter, options=options(interceptors=(counting,))
            ),
            "rpc.connect credentials=": lambda counting: rpc.connect(
                reactor,
                address(loginRPC),
                interface=IGreeter,
                options=options(credentials=Anonymous(), interceptors=(counting,)),
            ),
            "rpc.login": lambda counting: rpc.login(
                reactor,
                address(loginRPC),
                Anonymous(),
                interface=IGreeter,
                options=options(interceptors=(counting,)),
            ),
            "rpc.connectURL": lambda counting: rpc.connectURL(
                reactor, url, interface=IGreeter, options=options(interceptors=(counting,))
            ),
            "rpc.connect bulk=": lambda counting: rpc.connect(
                reactor, address(openBulk), interface=IGreeter, options=options(interceptors=(counting,), bulk=STREAMS)
            ),
            "rpc.connect bulk= credentials=": lambda counting: rpc.connect(
                reactor,
                address(loginBulk),
                interface=IGreeter,
                options=options(credentials=Anonymous(), interceptors=(counting,), bulk=STREAMS),
            ),
            "rpc.reconnecting credentials=": reconnected,
        }
        for way, connecting in ways.items():
            counting = Counting()
            greeter = await connecting(counting)
            assert isinstance(greeter, rpc.TypedReference), (way, greeter)
            assert await greeter.greet("ada") == "hello ada", way
            assert await greeter.tenant() == "t1", way
            assert counting.started == ["greet", "tenant"], (way, counting.started)
            await rpc.referenceOf(greeter).broker.disconnect()
        for client in clients:
            await client.stopService()
        # (the named server's options have no interceptor)
        assert served.started == ["greet", "tenant"] * (len(ways) - 1), served.started
    finally:
        for port in ports:
            await port.stopListening()
        removeDirectory(directory)


class Silent(TwistedProtocol):
    """A server that accepts and never says a word."""


async def expectTimeout(way: str, waiting: Deferred[Any]) -> None:
    try:
        result = await waiting
    except rpc.ConnectTimeout as error:
        assert f"within {SHORT:g} s" in str(error), (way, str(error))
        return
    raise AssertionError(f"{way}: expected ConnectTimeout, got {result!r}")


async def timeoutEveryWay(reactor: Any) -> None:
    """Against a server that accepts and says nothing, every way of connecting fails with ConnectTimeout (timeout=)."""
    port = await serverFromString(reactor, LISTEN).listen(Factory.forProtocol(Silent))
    silent = address(port)
    hint = f"127.0.0.1:{port.getHost().port}"
    url = f"chunkwire://{'a' * 52}@{hint}/{'b' * 52}"
    try:
        root = await rpc.connect(reactor, silent, options=ClientOptions(timeout=SHORT))
        await expectTimeout("rpc.connect", root.callRemote("greet", "ada"))
        await expectTimeout("rpc.login", rpc.login(reactor, silent, Anonymous(), options=ClientOptions(timeout=SHORT)))
        await expectTimeout(
            "rpc.connect credentials=",
            rpc.connect(reactor, silent, options=ClientOptions(credentials=Anonymous(), timeout=SHORT)),
        )
        await expectTimeout("rpc.connectURL", rpc.connectURL(reactor, url, options=ClientOptions(timeout=SHORT)))
        await expectTimeout(
            "rpc.connect bulk= credentials=",
            rpc.connect(reactor, silent, options=ClientOptions(credentials=Anonymous(), timeout=SHORT, bulk=STREAMS)),
        )
        root = await rpc.connect(reactor, silent, options=ClientOptions(timeout=SHORT, bulk=STREAMS))
        await expectTimeout("rpc.connect bulk=", root.callRemote("greet", "ada"))
        client = await echo.connect(reactor, silent, timeout=SHORT)
        await expectTimeout("echo.connect", client.echo("anyone?"))
        reconnecting = rpc.reconnecting(reactor, silent, options=ClientOptions(credentials=Anonymous(), timeout=SHORT))
        try:
            deadline = time.monotonic() + 60  # only a hang takes that long
            while reconnecting.loginFailure is None and time.monotonic() < deadline:
                await deferLater(reactor, 0.1)
            assert isinstance(reconnecting.loginFailure, rpc.ConnectTimeout), reconnecting.loginFailure
        finally:
            await reconnecting.stopService()
    finally:
        await port.stopListening()


class ConnectingTests(TestCase):
    """The keywords every way of connecting shares."""

    test_typedEveryWay = trialTest(typedEveryWay)
    test_timeoutEveryWay = trialTest(timeoutEveryWay)


test_typed_every_way = pytestTest(typedEveryWay)
test_timeout_every_way = pytestTest(timeoutEveryWay)
