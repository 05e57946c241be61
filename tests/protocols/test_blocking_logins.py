"""Logins and TLS of the blocking client (L{protocols.blocking}) against the kv example server, run as processes.

One server per class (examples/kv_server.py with users and tokens over
TCP, with client certificates over TLS; C{twist chunkwire-kv --names} for
an object URL), several cases each.  Listed in dev.py's PROCESS_TESTS (compiled core
only).  The certificates come from L{protocols.auth._authority}'s
CertificateAuthority, as chunkwire-cert makes them.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from framing import Violation
from framing._errors import PeerError
from framing.bulk import NoSuchFile
from framing.login import (
    ClientCertificate,
    LoginRefused,
    Password,
    Token,
    UnsupportedCredentials,
)
from framing.login._scram import MIN_ITERATIONS
from framing.login._urls import InvalidURL, KeyMismatch, ObjectURL
from framing.rpc._errors import ClosedBeforePreamble, DeadReferenceError
from framing.rpc._limits import CallLimits
from protocols import blockingbulk
from protocols.auth._authority import CertificateAuthority
from protocols.auth._tokens import addToken, newToken
from protocols.auth._users import addUser
from protocols.blocking import BlockingConnection, ConnectionLost, connect, connectURL, tlsContext
from protocols.kv import IKeyValue
from protocols.options import ClientOptions
from tests.processes import ClassProcessesCase, readUntil, reservePort, startPython, stop

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""


def hanging(**options: Any) -> ClientOptions:
    """The L{ClientOptions} of these tests' clients: C{options}, connecting and calling within L{HANG}."""
    return ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG), **options)


class ServerTestCase(ClassProcessesCase):
    """One kv_server.py process for the class, started with C{arguments(directory)}."""

    server: subprocess.Popen[bytes]
    port: int
    work: Path

    @classmethod
    def arguments(cls, work: Path) -> list[str]:
        """The command line of the server (a script's path and its options), making its files in C{work}."""
        raise NotImplementedError

    @classmethod
    def startProcesses(cls) -> None:
        cls.work = Path(tempfile.mkdtemp(prefix="blocking-logins-"))
        cls.server = startPython(*cls.arguments(cls.work))
        cls.port = int(readUntil(cls.server, rb"(?:port=|starting on )(\d+)").group(1))

    @classmethod
    def stopProcesses(cls) -> None:
        try:
            stop(cls.server)
        finally:
            shutil.rmtree(cls.work, ignore_errors=True)

    def connect(self, **options: Any) -> BlockingConnection:
        connection = connect(
            ("127.0.0.1", self.port), interface=options.pop("interface", None), options=hanging(**options)
        )
        self.addCleanup(connection.close)
        return connection


class PasswordAndTokenTests(ServerTestCase):
    """kv_server.py --users --tokens: SCRAM passwords and bearer tokens, over plain TCP."""

    @classmethod
    def arguments(cls, work: Path) -> list[str]:
        addUser(work / "users", "alice", b"alice's secret", iterations=MIN_ITERATIONS)
        cls.token = addToken(work / "tokens", "robot")
        return [
            "examples/kv_server.py",
            "--listen",
            "tcp:0:interface=127.0.0.1",
            "--users",
            str(work / "users"),
            "--tokens",
            str(work / "tokens"),
        ]

    def test_password(self) -> None:
        """The right password logs in (SCRAM, the server's signature checked); calls then work, typed too."""
        root = self.connect(credentials=Password("alice", "alice's secret"), interface=IKeyValue).root
        root.put("password/k", "v")
        self.assertEqual(root.get("password/k"), "v")
        tooLong = self.assertRaises(Violation, root.get, "k" * 2000)
        self.assertEqual(tooLong.where, "args[0]")
        self.assertEqual(root.list("password/"), ["password/k"])

    def test_wrongPasswordOrUser(self) -> None:
        """A wrong password and an unknown user are both LoginRefused, saying the same."""
        wrong = self.assertRaises(LoginRefused, self.connect, credentials=Password("alice", "guess"))
        unknown = self.assertRaises(LoginRefused, self.connect, credentials=Password("mallory", "guess"))
        self.assertEqual(str(wrong), str(unknown))

    def test_token(self) -> None:
        """The issued token logs in; a made-up one is refused."""
        root = self.connect(credentials=Token(self.token)).root
        root.callRemote("put", "token/k", "v")
        self.assertEqual(root.callRemote("get", "token/k"), "v")
        self.assertRaises(LoginRefused, self.connect, credentials=Token(newToken()))

    def test_noLogin(self) -> None:
        """Without a login, a call ends the connection: the server's error, naming the call; then DeadReferenceError."""
        root = self.connect().root
        error = self.assertRaises(PeerError, root.callRemote, "get", "k")
        self.assertIn("before logging in", str(error))
        self.assertIn("while calling 'get'", str(error))
        self.assertRaises(DeadReferenceError, root.callRemote, "get", "k")

    def test_unsupportedCredentials(self) -> None:
        """Credentials no mechanism takes are refused before connecting."""
        self.assertRaises(
            UnsupportedCredentials, connect, ("127.0.0.1", 1), options=ClientOptions(credentials=("alice", "secret"))
        )


class BulkLoginTests(ServerTestCase):
    """bulk_server.py --users: the blocking bulk client logs in, and each user's files are that user's own."""

    served: Path

    @classmethod
    def arguments(cls, work: Path) -> list[str]:
        for user in ("alice", "bob"):
            addUser(work / "users", user, f"{user}'s secret".encode(), iterations=MIN_ITERATIONS)
        cls.served = work / "served"
        listen = ["--listen", "tcp:0:interface=127.0.0.1"]
        return ["examples/bulk_server.py", *listen, "--users", str(work / "users"), "--dir", str(cls.served)]

    def bulk(self, user: str | None = None) -> blockingbulk.BlockingBulkConnection:
        """A bulk connection logged in as C{user} (with its password), or not logged in."""
        credentials = None if user is None else Password(user, f"{user}'s secret")
        address = ("127.0.0.1", self.port)
        connection = blockingbulk.connect(
            address,
            options=ClientOptions(timeout=HANG, credentials=credentials, callLimits=CallLimits(callTimeout=HANG)),
        )
        self.addCleanup(connection.close)
        return connection

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
        alice = self.bulk("alice")
        sent = alice.upload(source)
        self.assertEqual((self.served / "alice" / "diary.txt").read_bytes(), source.read_bytes())
        fetched = alice.download("diary.txt", local / "copy.txt")
        self.assertEqual((fetched.digest, (local / "copy.txt").read_bytes()), (sent.digest, source.read_bytes()))
        bob = self.bulk("bob")
        self.assertEqual(bob.root.callRemote("list"), [])
        self.assertRaises(NoSuchFile, bob.download, "diary.txt", local / "stolen.txt")
        self.assertFalse((local / "stolen.txt").exists())
        error = self.assertRaises(PeerError, self.bulk().root.callRemote, "list")
        self.assertIn("before logging in", str(error))


class ClientCertificateTests(ServerTestCase):
    """kv_server.py on TLS with --client-ca: the server checked against the CA, the client by its certificate."""

    @classmethod
    def arguments(cls, work: Path) -> list[str]:
        authority = CertificateAuthority.generate()
        caDirectory = authority.writeCADirectory(work / "ca")
        cls.caFile = str(caDirectory / "ca.pem")
        authority.issue("localhost", server=True).writePEM(work / "server.pem")
        cls.carol = str(authority.issue("carol").writePEM(work / "carol.pem"))
        cls.stranger = str(CertificateAuthority.generate("another CA").issue("carol").writePEM(work / "stranger.pem"))
        listen = f"ssl:0:interface=127.0.0.1:privateKey={work / 'server.pem'}"
        return ["examples/kv_server.py", "--listen", listen, "--client-ca", str(caDirectory)]

    def test_certificateLogin(self) -> None:
        """The CA's client certificate logs in over TLS, the server's certificate checked; calls work."""
        tls = tlsContext(caFile=self.caFile, certificate=self.carol)
        root = self.connect(tls=tls, credentials=ClientCertificate()).root
        root.callRemote("put", "certificate/k", "v")
        self.assertEqual(root.callRemote("get", "certificate/k"), "v")

    def test_otherCertificates(self) -> None:
        """No client certificate, or one from another CA: connect fails with the server's TLS alert, no login made."""
        for certificate, alert in ((None, "certificate required"), (self.stranger, "unknown ca")):
            tls = tlsContext(caFile=self.caFile, certificate=certificate)
            error = self.assertRaises(ConnectionLost, self.connect, tls=tls, credentials=ClientCertificate())
            self.assertIn(alert, str(error))

    def test_plainClientOnTLSPort(self) -> None:
        """A plain client on the TLS port fails with ClosedBeforePreamble, which says to give ClientOptions(tls=)."""
        error = self.assertRaises(ClosedBeforePreamble, self.connect)
        self.assertIsInstance(error, ConnectionLost)
        self.assertEqual(error.code, "closed-before-preamble")
        self.assertIn("a TLS server does this to a plain client", str(error))
        self.assertIn("connect with ClientOptions(tls=", str(error))

    def test_untrustedServer(self) -> None:
        """A server whose certificate the trusted CAs did not issue fails the handshake: nothing is sent."""
        other = CertificateAuthority.generate("another CA").writeCADirectory(self.work / "other-ca")
        tls = tlsContext(caFile=str(other / "ca.pem"), certificate=self.carol)
        self.assertRaises(ssl.SSLCertVerificationError, self.connect, tls=tls, credentials=ClientCertificate())


class ObjectURLTests(ServerTestCase):
    """twist chunkwire-kv --names: the store reached by its URL, the server's key pinned in the handshake."""

    reservation: Any
    """The server's port, held (L{reservePort}) from before it starts until it has stopped."""

    @classmethod
    def arguments(cls, work: Path) -> list[str]:
        # A port the URL can name (a port 0 cannot be written in one), reserved while the server runs:
        # picked free and let go, another process could take it before the server binds it.
        cls.reservation = reservePort()
        port = cls.reservation.getsockname()[1]
        cls.urlFile = work / "kv.names.url"
        names = str(work / "kv.names")
        return ["-m", "twisted", "chunkwire-kv", "--names", names, "--listen", f"tcp:{port}:interface=127.0.0.1"]

    @classmethod
    def stopProcesses(cls) -> None:
        super().stopProcesses()
        cls.reservation.close()

    def url(self) -> ObjectURL:
        return ObjectURL.parse(self.urlFile.read_text().strip())

    def connectURL(self, url: ObjectURL | str, **options: Any) -> BlockingConnection:
        connection = connectURL(str(url), interface=options.pop("interface", None), options=hanging(**options))
        self.addCleanup(connection.close)
        return connection

    def test_calls(self) -> None:
        """The URL's object answers calls, typed too; no CA and no host name were needed."""
        root = self.connectURL(self.url(), interface=IKeyValue).root
        root.put("url/k", "v")
        self.assertEqual(root.get("url/k"), "v")

    def test_otherKey(self) -> None:
        """A URL naming another key: KeyMismatch, naming both hashes, before the name is sent."""
        url = self.url()
        otherHash = "a" * 52
        error = self.assertRaises(KeyMismatch, self.connectURL, ObjectURL(otherHash, url.hints, url.name))
        self.assertEqual((error.expected, error.presented), (otherHash, url.keyHash))

    def test_unknownName(self) -> None:
        """A name the server does not publish is refused, like a wrong password."""
        url = self.url()
        self.assertRaises(LoginRefused, self.connectURL, ObjectURL(url.keyHash, url.hints, "b" * 52))

    def test_hintsInOrder(self) -> None:
        """A hint nobody listens on is skipped for the next one."""
        url = self.url()
        with reservePort() as closed:  # (bound, never listening: refused, and nobody else's while held)
            dead = f"127.0.0.1:{closed.getsockname()[1]}"
            root = self.connectURL(ObjectURL(url.keyHash, (dead, *url.hints), url.name)).root
        self.assertEqual(root.callRemote("list", "nothing/"), [])

    def test_invalidURL(self) -> None:
        """A URL not in its canonical form is refused before connecting, saying why."""
        error = self.assertRaises(InvalidURL, connectURL, str(self.url()).upper())
        self.assertIn("scheme", error.reason)
