"""The TLS pieces under the login gate: certificate logins through a portal, and rpc.connectURL, end to end."""

from __future__ import annotations

from typing import Any

from twisted.cred.portal import IRealm, Portal
from twisted.internet.endpoints import UNIXClientEndpoint, serverFromString, wrapClientTLS
from twisted.internet.protocol import Factory
from twisted.trial.unittest import TestCase
from zope.interface import implementer

from protocols import rpc
from protocols.auth import ClientCertificate, LoginRefused
from protocols.auth._certificates import CertificateChecker, requireClientCertificates
from protocols.auth._identity import ServerIdentity
from protocols.auth._interfaces import IRemoteRoot
from protocols.auth._names import NameTable
from protocols.auth._urls import KeyMismatch, ObjectURL, clientEndpoint
from protocols.rpc._options import ServerOptions
from protocols.testing import CertificateAuthority

from ..helpers import pytestTest, trialTest
from .tlspeers import Proxy, removeDirectory, shortDirectory


class Avatar(rpc.Referenceable):
    """What one logged-in client sees as its root."""

    def __init__(self, avatarId: bytes) -> None:
        self.avatarId = avatarId

    @rpc.remote
    def whoami(self) -> bytes:
        return self.avatarId


@implementer(IRealm)
class Realm:
    """An L{Avatar} per login."""

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
        assert IRemoteRoot in interfaces
        return IRemoteRoot, Avatar(avatarId), lambda: None


class Counter(rpc.Referenceable):
    """An object published under a name."""

    def __init__(self, start: int) -> None:
        self.count = start

    @rpc.remote
    def increment(self) -> int:
        self.count += 1
        return self.count


async def expectFailure(deferred: Any) -> BaseException:
    """Wait for C{deferred} and return the exception it failed with (fail if it succeeds)."""
    try:
        result = await deferred
    except Exception as error:
        return error
    raise AssertionError(f"expected a failure, got {result!r}")


async def certificateLogins(reactor: Any, unix: bool) -> None:
    directory = shortDirectory()
    ca = CertificateAuthority.generate()
    caDirectory = ca.writeCADirectory(directory / "ca")
    serverPEM = ca.issue("localhost", server=True).writePEM(directory / "server.pem")
    socket = directory / "s.sock"
    listen = f"chunkwire-tls:unix:{socket}" if unix else "ssl:0:interface=127.0.0.1"
    description = requireClientCertificates(f"{listen}:privateKey={serverPEM}", caDirectory)
    factory = rpc.serverFactory(clock=reactor, options=ServerOptions(portal=Portal(Realm(), [CertificateChecker()])))
    port = await serverFromString(reactor, description).listen(factory)

    ada = ca.issue("ada")
    if unix:
        endpoint: Any = wrapClientTLS(ada.clientOptions(ca), UNIXClientEndpoint(reactor, str(socket)))
    else:
        ada.writePEM(directory / "ada.pem")
        endpoint = ada.clientEndpoint(caDirectory, port.getHost().port)  # an ssl: description with certKey=
    try:
        root = await rpc.login(reactor, endpoint, ClientCertificate())
        assert await root.callRemote("whoami") == b"ada"
        await root.broker.disconnect()
        stranger = CertificateAuthority.generate("another CA").issue("ada").clientOptions(ca)
        error = await expectFailure(
            rpc.login(reactor, wrapClientTLS(stranger, _plainEndpoint(reactor, port)), ClientCertificate())
        )
        assert not isinstance(error, LoginRefused), error
    finally:
        await port.stopListening()
        await factory.disconnectAll()
        removeDirectory(directory)


def _plainEndpoint(reactor: Any, port: Any) -> Any:
    from twisted.internet.endpoints import TCP4ClientEndpoint

    address = port.getHost()
    if getattr(address, "name", None) is not None:
        return UNIXClientEndpoint(reactor, address.name)
    return TCP4ClientEndpoint(reactor, "127.0.0.1", address.port)


async def certificateLoginOverTCP(reactor: Any) -> None:
    """Over TCP, a client certificate from the CA logs in as its common name; one from another CA never gets in."""
    await certificateLogins(reactor, unix=False)


async def certificateLoginOverUNIX(reactor: Any) -> None:
    """Over a UNIX socket, a client certificate from the CA logs in as its common name; another CA's never gets in."""
    await certificateLogins(reactor, unix=True)


async def objectURLs(reactor: Any, unix: bool) -> None:
    directory = shortDirectory()
    identity = ServerIdentity.loadOrCreate(directory / "server.pem")
    names = NameTable()
    name = names.register(Counter(10), "a counter")
    listen = f"unix:{directory / 's.sock'}" if unix else "tcp:0:interface=127.0.0.1"
    factory = rpc.serverFactory(clock=reactor, options=ServerOptions(names=names))
    port = await serverFromString(reactor, identity.serverDescription(listen)).listen(factory)
    hint = f"unix:{directory / 's.sock'}" if unix else f"127.0.0.1:{port.getHost().port}"
    try:
        url = names.url(identity, [hint], name)
        counter = await rpc.connectURL(reactor, str(url))
        assert await counter.callRemote("increment") == 11
        await counter.broker.disconnect()
        unknown = ObjectURL(identity.keyHash, (hint,), NameTable().register(None, "elsewhere"))
        assert isinstance(await expectFailure(rpc.connectURL(reactor, str(unknown))), LoginRefused)
        assert names.revoke(name)
        assert isinstance(await expectFailure(rpc.connectURL(reactor, str(url))), LoginRefused)
    finally:
        await port.stopListening()
        await factory.disconnectAll()
        removeDirectory(directory)


async def objectURLOverTCP(reactor: Any) -> None:
    """connectURL over TCP reaches the named object; an unknown and a revoked name are both LoginRefused."""
    await objectURLs(reactor, unix=False)


async def objectURLOverUNIX(reactor: Any) -> None:
    """connectURL over a UNIX socket reaches the named object; an unknown and a revoked name are both LoginRefused."""
    await objectURLs(reactor, unix=True)


async def objectURLAfterRestart(reactor: Any) -> None:
    """
    A URL handed out by a server whose names are kept in a file reaches the
    same object after the server restarts (a new table read from the file,
    the label bound again, the same key and socket); once revoked, it stays
    refused after the next restart.
    """
    directory = shortDirectory()
    counter = Counter(0)
    socket = directory / "s.sock"

    async def serve(names: NameTable) -> Any:
        identity = ServerIdentity.loadOrCreate(directory / "server.pem")
        factory = rpc.serverFactory(clock=reactor, options=ServerOptions(names=names))
        port = await serverFromString(reactor, identity.serverDescription(f"unix:{socket}")).listen(factory)
        return identity, port, factory

    async def stop(port: Any, factory: Any) -> None:
        await port.stopListening()
        await factory.disconnectAll()

    try:
        names = NameTable(directory / "names.json")
        name = names.register(counter, "the counter")
        identity, port, factory = await serve(names)
        url = str(names.url(identity, [f"unix:{socket}"], name))
        await stop(port, factory)

        restarted = NameTable(directory / "names.json")
        assert restarted.bind("the counter", counter) == 1
        _, port, factory = await serve(restarted)
        try:
            remote = await rpc.connectURL(reactor, url)
            assert await remote.callRemote("increment") == 1
            await remote.broker.disconnect()
            assert restarted.revoke(name)
        finally:
            await stop(port, factory)

        again = NameTable(directory / "names.json")
        assert again.bind("the counter", counter) == 0
        _, port, factory = await serve(again)
        try:
            assert isinstance(await expectFailure(rpc.connectURL(reactor, url)), LoginRefused)
        finally:
            await stop(port, factory)
    finally:
        removeDirectory(directory)


async def objectURLThroughProxy(reactor: Any) -> None:
    """
    Through a TLS-terminating proxy with another key, connectURL fails before
    sending the name (the proxy decrypts zero bytes); with the proxy's own
    key in the URL, the same proxy passes the login through.
    """
    directory = shortDirectory()
    real = ServerIdentity.loadOrCreate(directory / "real.pem")
    impostor = ServerIdentity.loadOrCreate(directory / "proxy.pem")
    names = NameTable()
    name = names.register(Counter(0), "a counter")
    factory = rpc.serverFactory(clock=reactor, options=ServerOptions(names=names))
    realPort = await real.serverEndpoint(reactor, "tcp:0:interface=127.0.0.1").listen(factory)
    realURL = ObjectURL(real.keyHash, (f"127.0.0.1:{realPort.getHost().port}",), name)
    proxies: list[Proxy] = []

    def buildProxy() -> Proxy:
        proxies.append(Proxy(clientEndpoint(reactor, realURL)))
        return proxies[-1]

    proxyPort = await impostor.serverEndpoint(reactor, "tcp:0:interface=127.0.0.1").listen(
        Factory.forProtocol(buildProxy)
    )
    proxyHint = f"127.0.0.1:{proxyPort.getHost().port}"
    try:
        error = await expectFailure(rpc.connectURL(reactor, str(ObjectURL(real.keyHash, (proxyHint,), name))))
        assert isinstance(error, KeyMismatch), error
        await proxies[0].lost
        assert proxies[0].received == b"", proxies[0].received
        counter = await rpc.connectURL(reactor, str(ObjectURL(impostor.keyHash, (proxyHint,), name)))
        assert await counter.callRemote("increment") == 1
        assert proxies[1].received != b""
        await counter.broker.disconnect()
        for proxy in proxies:
            await proxy.lost
            await (await proxy.upstreamMade).lost
    finally:
        await proxyPort.stopListening()
        await realPort.stopListening()
        await factory.disconnectAll()
        removeDirectory(directory)


class TLSLoginTests(TestCase):
    """End to end over real sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_certificateLoginOverTCP = trialTest(certificateLoginOverTCP)
    test_certificateLoginOverUNIX = trialTest(certificateLoginOverUNIX)
    test_objectURLOverTCP = trialTest(objectURLOverTCP)
    test_objectURLOverUNIX = trialTest(objectURLOverUNIX)
    test_objectURLThroughProxy = trialTest(objectURLThroughProxy)
    test_objectURLAfterRestart = trialTest(objectURLAfterRestart)


test_certificate_login_over_tcp = pytestTest(certificateLoginOverTCP)
test_certificate_login_over_unix = pytestTest(certificateLoginOverUNIX)
test_object_url_over_tcp = pytestTest(objectURLOverTCP)
test_object_url_over_unix = pytestTest(objectURLOverUNIX)
test_object_url_through_proxy = pytestTest(objectURLThroughProxy)
test_object_url_after_restart = pytestTest(objectURLAfterRestart)
