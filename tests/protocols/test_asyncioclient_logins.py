"""Logins, TLS, object URLs and typed proxies of the asyncio client (L{protocols.asyncioclient}), against real servers.

The servers are those of tests/protocols/test_blocking_logins.py (its
L{ServerTestCase} classes' set-up, reused: one kv_server.py or C{twist
chunkwire-kv --names} process per class), the cases the blocking client's,
awaited on a fresh event loop each (C{asyncio.run}).  Listed in dev.py's
PROCESS_TESTS (compiled core only).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from framing import Violation
from framing._errors import PeerError
from framing.bulk import NoSuchFile
from framing.login import ClientCertificate, LoginRefused, Password, Token
from framing.login._urls import KeyMismatch, ObjectURL
from framing.rpc._errors import ClosedBeforePreamble, ConnectionLost, NoSuchMethod
from protocols import asynciobulk
from protocols.asyncioclient import AsyncConnection, AsyncTypedReference, connect, connectURL, tlsContext
from protocols.auth._tokens import newToken
from protocols.kv import IKeyValue
from protocols.options import ClientOptions
from tests.protocols import test_blocking_logins as blocking

HANG = blocking.HANG
hanging = blocking.hanging
T = TypeVar("T")


def run(test: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine C{test()} makes on a fresh event loop, within L{HANG} seconds."""

    async def bounded() -> T:
        return await asyncio.wait_for(test(), HANG)

    return asyncio.run(bounded())


async def raises(kind: type[BaseException], awaitable: Awaitable[Any]) -> BaseException:
    """The C{kind} error awaiting C{awaitable} raises; C{AssertionError} if none (or another)."""
    try:
        result = await awaitable
    except kind as error:
        return error
    raise AssertionError(f"expected {kind.__name__}, got the result {result!r}")


async def closing(connecting: Awaitable[AsyncConnection], use: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Connect, C{use} the connection, close it."""
    async with await connecting as connection:
        return await use(connection)


class PasswordAndTokenTests(blocking.ServerTestCase):
    """kv_server.py --users --tokens: SCRAM passwords and bearer tokens, over plain TCP."""

    token: str
    arguments = classmethod(blocking.PasswordAndTokenTests.arguments.__func__)  # the same server, set up on this class

    def connect(self, interface: Any = None, **options: Any) -> Awaitable[AsyncConnection]:  # type: ignore[override]
        return connect(("127.0.0.1", self.port), interface=interface, options=hanging(**options))

    def test_passwordTyped(self) -> None:
        """The right password logs in; the typed root checks arguments before sending (where named), and calls work."""

        async def use(connection: AsyncConnection) -> None:
            root = connection.root
            self.assertIsInstance(root, AsyncTypedReference)
            await root.put("aio-password/k", "v")
            self.assertEqual(await root.get("aio-password/k"), "v")
            tooLong = self.assertRaises(Violation, root.get, "k" * 2000)  # raised before any await
            self.assertEqual(tooLong.where, "args[0]")
            self.assertRaises(NoSuchMethod, root.callRemote, "nosuch")
            self.assertRaises(AttributeError, getattr, root, "nosuch")
            self.assertEqual(await root.callRemote("list", "aio-password/"), ["aio-password/k"])
            # the connection still works after the refusals: nothing was sent
            self.assertEqual(await root.get("aio-password/k"), "v")

        run(lambda: closing(self.connect(credentials=Password("alice", "alice's secret"), interface=IKeyValue), use))

    def test_typedLater(self) -> None:
        """C{root.typed(I)} on an untyped connection is the same proxy."""

        async def use(connection: AsyncConnection) -> None:
            root = connection.root.typed(IKeyValue)
            await root.put("aio-typed/k", "v")
            self.assertEqual(await root.get("aio-typed/k"), "v")
            self.assertEqual(self.assertRaises(Violation, root.put, 1, "v").where, "args[0]")

        run(lambda: closing(self.connect(credentials=Password("alice", "alice's secret")), use))

    def test_wrongPasswordOrUser(self) -> None:
        """A wrong password and an unknown user are both LoginRefused, saying the same."""

        async def test() -> None:
            wrong = await raises(LoginRefused, self.connect(credentials=Password("alice", "guess")))
            unknown = await raises(LoginRefused, self.connect(credentials=Password("mallory", "guess")))
            self.assertEqual(str(wrong), str(unknown))

        run(test)

    def test_token(self) -> None:
        """The issued token logs in; a made-up one is refused."""

        async def use(connection: AsyncConnection) -> None:
            await connection.root.callRemote("put", "aio-token/k", "v")
            self.assertEqual(await connection.root.callRemote("get", "aio-token/k"), "v")
            await raises(LoginRefused, self.connect(credentials=Token(newToken())))

        run(lambda: closing(self.connect(credentials=Token(self.token)), use))


class BulkLoginTests(blocking.ServerTestCase):
    """bulk_server.py --users: the asyncio bulk client logs in, and each user's files are that user's own."""

    served: Path
    arguments = classmethod(blocking.BulkLoginTests.arguments.__func__)  # the same server, set up on this class

    def test_uploadDownloadAsUser(self) -> None:
        """
        alice's upload lands in the served directory's alice/ and comes back
        with the same digest; bob sees no file and cannot fetch hers; without
        a login, the first call ends the connection with the server's error.
        """
        local = Path(self.mktemp()).resolve()
        local.mkdir(parents=True)
        source = local / "diary.txt"
        source.write_bytes(b"dear diary " * 100_000)
        address = ("127.0.0.1", self.port)

        def login(user: str) -> Password:
            return Password(user, f"{user}'s secret")

        async def test() -> None:
            async with await asynciobulk.connect(
                address, options=ClientOptions(timeout=HANG, credentials=login("alice"))
            ) as alice:
                sent = await alice.upload(source)
                fetched = await alice.download("diary.txt", local / "copy.txt")
            self.assertEqual((self.served / "alice" / "diary.txt").read_bytes(), source.read_bytes())
            self.assertEqual((fetched.digest, (local / "copy.txt").read_bytes()), (sent.digest, source.read_bytes()))
            async with await asynciobulk.connect(
                address, options=ClientOptions(timeout=HANG, credentials=login("bob"))
            ) as bob:
                self.assertEqual(await bob.root.callRemote("list"), [])
                await raises(NoSuchFile, bob.download("diary.txt", local / "stolen.txt"))
            self.assertFalse((local / "stolen.txt").exists())
            async with await asynciobulk.connect(address, options=ClientOptions(timeout=HANG)) as anonymous:
                error = await raises(PeerError, anonymous.root.callRemote("list"))
            self.assertIn("before logging in", str(error))

        run(test)


class ClientCertificateTests(blocking.ServerTestCase):
    """kv_server.py on TLS with --client-ca: the server checked against the CA, the client by its certificate."""

    caFile: str
    carol: str
    stranger: str
    arguments = classmethod(blocking.ClientCertificateTests.arguments.__func__)  # the same server, set up on this class

    def connect(self, interface: Any = None, **options: Any) -> Awaitable[AsyncConnection]:  # type: ignore[override]
        return connect(("127.0.0.1", self.port), interface=interface, options=hanging(**options))

    def test_certificateLogin(self) -> None:
        """The CA's client certificate logs in over TLS, the server's certificate checked; calls work."""
        tls = tlsContext(caFile=self.caFile, certificate=self.carol)

        async def use(connection: AsyncConnection) -> None:
            await connection.root.callRemote("put", "aio-certificate/k", "v")
            self.assertEqual(await connection.root.callRemote("get", "aio-certificate/k"), "v")

        run(lambda: closing(self.connect(tls=tls, credentials=ClientCertificate()), use))

    def test_otherCertificates(self) -> None:
        """No client certificate, or one from another CA: the connection ends with the server's TLS alert."""

        async def test() -> None:
            for certificate, alert in ((None, "certificate required"), (self.stranger, "unknown ca")):
                tls = tlsContext(caFile=self.caFile, certificate=certificate)
                error = await raises(
                    (ConnectionLost, ssl.SSLError),  # type: ignore[arg-type]
                    self.connect(tls=tls, credentials=ClientCertificate()),
                )
                self.assertIn(alert, str(error).lower())

        run(test)

    def test_plainClientOnTLSPort(self) -> None:
        """A plain client on the TLS port fails with ClosedBeforePreamble, which says to give ClientOptions(tls=)."""
        error = run(lambda: raises(ClosedBeforePreamble, self.connect()))
        self.assertIn("a TLS server does this to a plain client", str(error))
        self.assertIn("connect with ClientOptions(tls=", str(error))

    def test_untrustedServer(self) -> None:
        """A server whose certificate the trusted CAs did not issue fails the handshake: nothing is sent."""
        other = blocking.CertificateAuthority.generate("another CA").writeCADirectory(Path(self.work) / "aio-other-ca")
        tls = tlsContext(caFile=str(other / "ca.pem"), certificate=self.carol)
        run(lambda: raises(ssl.SSLCertVerificationError, self.connect(tls=tls, credentials=ClientCertificate())))


class ObjectURLTests(blocking.ServerTestCase):
    """twist chunkwire-kv --names: the store reached by its URL, the server's key pinned in the handshake."""

    urlFile: Path
    arguments = classmethod(blocking.ObjectURLTests.arguments.__func__)  # the same server, set up on this class

    def url(self) -> ObjectURL:
        return ObjectURL.parse(self.urlFile.read_text().strip())

    def connectURL(self, url: ObjectURL | str, **options: Any) -> Awaitable[AsyncConnection]:
        return connectURL(str(url), interface=options.pop("interface", None), options=hanging(**options))

    def test_calls(self) -> None:
        """The URL's object answers calls, typed too; no CA and no host name were needed."""

        async def use(connection: AsyncConnection) -> None:
            await connection.root.put("aio-url/k", "v")
            self.assertEqual(await connection.root.get("aio-url/k"), "v")

        run(lambda: closing(self.connectURL(self.url(), interface=IKeyValue), use))

    def test_otherKey(self) -> None:
        """A URL naming another key: KeyMismatch, naming both hashes, before the name is sent."""
        url = self.url()
        otherHash = "a" * 52
        error = run(lambda: raises(KeyMismatch, self.connectURL(ObjectURL(otherHash, url.hints, url.name))))
        assert isinstance(error, KeyMismatch)
        self.assertEqual((error.expected, error.presented), (otherHash, url.keyHash))

    def test_unknownName(self) -> None:
        """A name the server does not publish is refused, like a wrong password."""
        url = self.url()
        run(lambda: raises(LoginRefused, self.connectURL(ObjectURL(url.keyHash, url.hints, "b" * 52))))
