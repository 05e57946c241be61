"""A server's persistent TLS key: its file, its hash, and the endpoints that serve it."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

from twisted.internet.endpoints import serverFromString
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols.auth._identity import InsecureKeyFile, ServerIdentity, keyHash, spkiHash
from protocols.auth._tlsendpoints import tlsServerEndpoint
from protocols.auth._urls import pinnedClientOptions
from protocols.testing import CertificateAuthority, SelfSignedCertificate

from ..helpers import pytestTest, trialTest
from .tlspeers import ANSWER, GREETING, RecorderFactory, hello, removeDirectory, settle, shortDirectory, tlsTo


class KeyHashTests(SynchronousTestCase):
    """keyHash names a key: SHA-256 of its SubjectPublicKeyInfo, in lowercase base32 without padding."""

    def test_sameForEveryForm(self) -> None:
        """PEM bytes, a cryptography certificate and a pyOpenSSL X509 give the same hash."""
        from cryptography import x509
        from OpenSSL import crypto

        pem = SelfSignedCertificate.generate().certPEM
        hashes = {
            keyHash(pem),
            keyHash(x509.load_pem_x509_certificate(pem)),
            keyHash(crypto.X509.from_cryptography(x509.load_pem_x509_certificate(pem))),
        }
        self.assertEqual(len(hashes), 1)

    def test_isBase32OfSHA256(self) -> None:
        """The hash is 52 lowercase base32 characters that decode to the SHA-256 of the SPKI DER."""
        import hashlib

        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        pem = SelfSignedCertificate.generate().certPEM
        spki = (
            x509.load_pem_x509_certificate(pem)
            .public_key()
            .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        hash = keyHash(pem)
        self.assertEqual(len(hash), 52)
        self.assertEqual(hash, hash.lower())
        self.assertEqual(base64.b32decode(hash.upper() + "===="), hashlib.sha256(spki).digest())
        self.assertEqual(spkiHash(spki), hash)

    def test_namesTheKeyNotTheCertificate(self) -> None:
        """Two certificates for different keys differ; the hash ignores everything but the key."""
        ca = CertificateAuthority.generate()
        self.assertNotEqual(keyHash(ca.issue("a").certPEM), keyHash(ca.issue("a").certPEM))

    def test_refusesOtherThings(self) -> None:
        """Something that is not a certificate is a TypeError."""
        self.assertRaises(TypeError, keyHash, 42)


class ServerIdentityTests(SynchronousTestCase):
    """ServerIdentity.loadOrCreate keeps one key in one file, private to its owner."""

    def test_createsPrivateFile(self) -> None:
        """The file is created with mode 0600 and holds the key and the certificate."""
        path = Path(self.mktemp())
        identity = ServerIdentity.loadOrCreate(path)
        self.assertEqual(stat.S_IMODE(path.stat().st_mode), 0o600)
        self.assertEqual(identity.pemPath, path)
        self.assertIn(b"PRIVATE KEY", path.read_bytes())
        self.assertEqual(identity.keyHash, keyHash(path.read_bytes()))
        self.assertEqual([p.name for p in path.parent.iterdir()], [path.name])

    def test_sameKeyOnEveryLoad(self) -> None:
        """Loading again gives the same key hash and leaves the file as it was."""
        path = Path(self.mktemp())
        first = ServerIdentity.loadOrCreate(path)
        content = path.read_bytes()
        self.assertEqual(ServerIdentity.loadOrCreate(path).keyHash, first.keyHash)
        self.assertEqual(ServerIdentity.loadOrCreate(str(path)).keyHash, first.keyHash)
        self.assertEqual(path.read_bytes(), content)

    def test_newFileNewKey(self) -> None:
        """Two identity files hold two different keys."""
        self.assertNotEqual(
            ServerIdentity.loadOrCreate(Path(self.mktemp())).keyHash,
            ServerIdentity.loadOrCreate(Path(self.mktemp())).keyHash,
        )

    def test_refusesOpenFile(self) -> None:
        """A key file that group or others may read is refused."""
        path = Path(self.mktemp())
        ServerIdentity.loadOrCreate(path)
        os.chmod(path, 0o644)
        self.assertRaises(InsecureKeyFile, ServerIdentity.loadOrCreate, path)

    def test_refusesMismatchedFile(self) -> None:
        """A file whose certificate is not for its key is refused."""
        path = Path(self.mktemp())
        one, other = SelfSignedCertificate.generate(), SelfSignedCertificate.generate()
        path.write_bytes(one.keyPEM + other.certPEM)
        path.chmod(0o600)
        self.assertRaises(ValueError, ServerIdentity.loadOrCreate, path)

    def test_serverDescription(self) -> None:
        """A tcp: description becomes the ssl: one with this key, unix: a chunkwire-tls: one; TLS is refused."""
        path = Path(self.mktemp())
        identity = ServerIdentity.loadOrCreate(path)
        key = str(path).replace(":", "\\:")
        self.assertEqual(
            identity.serverDescription("tcp:0:interface=127.0.0.1"),
            f"ssl:0:interface=127.0.0.1:privateKey={key}",
        )
        self.assertEqual(
            identity.serverDescription("unix:/tmp/x.sock:mode=600"),
            f"chunkwire-tls:unix:/tmp/x.sock:mode=600:privateKey={key}",
        )
        self.assertRaises(ValueError, identity.serverDescription, "ssl:0")

    def test_wrapsOnlyPlainEndpoints(self) -> None:
        """Wrapping an ssl: description in TLS again is a ValueError."""
        from twisted.internet import reactor

        self.assertRaises(ValueError, tlsServerEndpoint, reactor, "ssl:0", None)


async def served(reactor: Any, unix: bool, description: bool) -> None:
    directory = shortDirectory()
    identity = ServerIdentity.loadOrCreate(directory / "server.pem")
    listen = f"unix:{directory / 's.sock'}" if unix else "tcp:0:interface=127.0.0.1"
    if description:
        endpoint = serverFromString(reactor, identity.serverDescription(listen))
    else:
        endpoint = identity.serverEndpoint(reactor, listen)
    factory = RecorderFactory()
    port = await endpoint.listen(factory)
    try:
        client = await hello(reactor, tlsTo(reactor, pinnedClientOptions(identity.keyHash), port))
        assert await client.answered == ANSWER
        (server,) = factory.built
        assert server.received == GREETING
        await settle(client, server)
    finally:
        await port.stopListening()
        removeDirectory(directory)


async def servedOverTCP(reactor: Any) -> None:
    """The ssl: description of an identity serves its key over TCP."""
    await served(reactor, unix=False, description=True)


async def servedOverUNIX(reactor: Any) -> None:
    """The chunkwire-tls:unix: description of an identity serves its key over a UNIX socket."""
    await served(reactor, unix=True, description=True)


async def servedByEndpointOverTCP(reactor: Any) -> None:
    """serverEndpoint serves an identity's key over TCP."""
    await served(reactor, unix=False, description=False)


async def servedByEndpointOverUNIX(reactor: Any) -> None:
    """serverEndpoint serves an identity's key over a UNIX socket."""
    await served(reactor, unix=True, description=False)


class ServeTests(TestCase):
    """An identity served over real sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_servedOverTCP = trialTest(servedOverTCP)
    test_servedOverUNIX = trialTest(servedOverUNIX)
    test_servedByEndpointOverTCP = trialTest(servedByEndpointOverTCP)
    test_servedByEndpointOverUNIX = trialTest(servedByEndpointOverUNIX)


test_served_over_tcp = pytestTest(servedOverTCP)
test_served_over_unix = pytestTest(servedOverUNIX)
test_served_by_endpoint_over_tcp = pytestTest(servedByEndpointOverTCP)
test_served_by_endpoint_over_unix = pytestTest(servedByEndpointOverUNIX)


class CreationRaceTests(SynchronousTestCase):
    """Two servers creating the same identity file at once end up with one key."""

    def test_firstCreatorWins(self) -> None:
        """A second creation of an existing file leaves the first one's content and no temporary file behind."""
        from protocols.auth import _identity as identity

        path = Path(self.mktemp())
        path.parent.mkdir(parents=True, exist_ok=True)
        identity._createExclusively(path, b"first")
        identity._createExclusively(path, b"second")
        self.assertEqual(path.read_bytes(), b"first")
        self.assertEqual([p.name for p in path.parent.iterdir()], [path.name])
