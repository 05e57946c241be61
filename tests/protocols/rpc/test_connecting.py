"""Every way of connecting takes the same keywords: interface= gives a typed proxy, timeout= bounds a silent server."""

from __future__ import annotations

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
from protocols.auth.identity import ServerIdentity
from protocols.auth.interfaces import IRemoteRoot
from protocols.auth.names import NameTable
from protocols.rpc.interceptors import CallInfo, CallInterceptor

from ..auth.tlspeers import removeDirectory, shortDirectory
from ..helpers import pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"
SHORT = 0.5
"""The timeout given against a silent server: short, so the test is quick (the outcome, not the time, is checked)."""


class IGreeter(rpc.RemoteInterface, Protocol, name="test.connecting.IGreeter"):
    async def greet(self, name: str) -> str: ...


class Greeter(rpc.Referenceable, IGreeter):
    """The root every server here gives, open or after a login."""

    async def greet(self, name: str) -> str:
        return f"hello {name}"


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
    """rpc.connect, login, connectURL and bulk.connect, given interface=, timeout=, interceptors=: a typed proxy."""
    directory = shortDirectory()
    identity = ServerIdentity.loadOrCreate(directory / "server.pem")
    names = NameTable()
    name = names.register(Greeter(), "a greeter")
    ports = [
        await rpc.serve(reactor, LISTEN, Greeter()),
        await rpc.serve(reactor, LISTEN, portal=portal()),
        await bulk.serve(reactor, LISTEN, Greeter()),
        await bulk.serve(reactor, LISTEN, portal=portal()),
        await rpc.serve(reactor, identity.serverDescription(LISTEN), names=names),
    ]
    openRPC, loginRPC, openBulk, loginBulk, named = ports
    url = str(names.url(identity, [f"127.0.0.1:{named.getHost().port}"], name))
    shared: dict[str, Any] = {"interface": IGreeter, "timeout": 10.0, "limits": Limits(), "callLimits": None}
    try:
        ways = {
            "rpc.connect": lambda counting: rpc.connect(reactor, address(openRPC), interceptors=[counting], **shared),
            "rpc.connect credentials=": lambda counting: rpc.connect(
                reactor, address(loginRPC), credentials=Anonymous(), interceptors=[counting], **shared
            ),
            "rpc.login": lambda counting: rpc.login(
                reactor, address(loginRPC), Anonymous(), interceptors=[counting], **shared
            ),
            "rpc.connectURL": lambda counting: rpc.connectURL(reactor, url, interceptors=[counting], **shared),
            "bulk.connect": lambda counting: bulk.connect(
                reactor, address(openBulk), interceptors=[counting], **shared
            ),
            "bulk.connect credentials=": lambda counting: bulk.connect(
                reactor, address(loginBulk), credentials=Anonymous(), interceptors=[counting], **shared
            ),
        }
        for way, connecting in ways.items():
            counting = Counting()
            greeter = await connecting(counting)
            assert isinstance(greeter, rpc.TypedReference), (way, greeter)
            assert await greeter.greet("ada") == "hello ada", way
            assert counting.started == ["greet"], (way, counting.started)
            await rpc.referenceOf(greeter).broker.disconnect()
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
        root = await rpc.connect(reactor, silent, timeout=SHORT)
        await expectTimeout("rpc.connect", root.callRemote("greet", "ada"))
        await expectTimeout("rpc.login", rpc.login(reactor, silent, Anonymous(), timeout=SHORT))
        await expectTimeout(
            "rpc.connect credentials=", rpc.connect(reactor, silent, credentials=Anonymous(), timeout=SHORT)
        )
        await expectTimeout("rpc.connectURL", rpc.connectURL(reactor, url, timeout=SHORT))
        await expectTimeout(
            "bulk.connect credentials=", bulk.connect(reactor, silent, credentials=Anonymous(), timeout=SHORT)
        )
        root = await bulk.connect(reactor, silent, timeout=SHORT)
        await expectTimeout("bulk.connect", root.callRemote("greet", "ada"))
        client = await echo.connect(reactor, silent, timeout=SHORT)
        await expectTimeout("echo.connect", client.echo("anyone?"))
        reconnecting = rpc.reconnecting(reactor, silent, credentials=Anonymous(), timeout=SHORT)
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
