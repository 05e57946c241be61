"""TLS client certificates: the server requires one from its CA, and the verified certificate maps to an avatar id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.cred.error import UnauthorizedLogin
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.internet.ssl import Certificate, PrivateCertificate, optionsForClientTLS
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols.auth._certificates import (
    MECHANISM,
    CertificateChecker,
    IPeerCertificate,
    PeerCertificate,
    clientCertificateOptions,
    commonName,
    peerCertificateOf,
    requireClientCertificates,
)
from protocols.auth._tlsendpoints import joinDescription, loadCADirectory, splitDescription, tlsServerEndpoint
from protocols.testing import CertificateAuthority, SelfSignedCertificate

from ..helpers import pytestTest, trialTest
from .tlspeers import ANSWER, GREETING, RecorderFactory, hello, removeDirectory, settle, shortDirectory, tlsTo


def _x509(pem: bytes) -> Any:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem)


class Setup:
    """A CA, a server certificate it issued, and the files for the server, in a short temporary directory."""

    def __init__(self) -> None:
        self.directory = shortDirectory()
        self.ca = CertificateAuthority.generate()
        self.caDirectory = self.ca.writeCADirectory(self.directory / "ca")
        self.serverPEM = self.ca.issue("localhost", server=True).writePEM(self.directory / "server.pem")

    def endpoint(self, reactor: Any, unix: bool, description: bool = True) -> Any:
        """
        A server endpoint requiring client certificates from the CA, over TCP
        or UNIX, from a description (requireClientCertificates' for TCP) or built.
        """
        if unix and description:
            listen = f"chunkwire-tls:unix:{self.directory / 's.sock'}:privateKey={self.serverPEM}"
            return serverFromString(reactor, requireClientCertificates(listen, self.caDirectory))
        if unix:
            options = clientCertificateOptions(self.serverPEM, self.caDirectory)
            return tlsServerEndpoint(reactor, f"unix:{self.directory / 's.sock'}", options)
        listen = f"ssl:0:interface=127.0.0.1:privateKey={self.serverPEM}"
        return serverFromString(reactor, requireClientCertificates(listen, self.caDirectory))


async def accepted(reactor: Any, unix: bool, description: bool = True) -> None:
    setup = Setup()
    factory = RecorderFactory()
    port = await setup.endpoint(reactor, unix, description).listen(factory)
    try:
        alice = setup.ca.issue("alice")
        client = await hello(reactor, tlsTo(reactor, alice.clientOptions(setup.ca), port))
        assert await client.answered == ANSWER
        (server,) = factory.built
        assert server.received == GREETING
        assert server.certificate is not None
        assert await CertificateChecker().requestAvatarId(server.certificate) == b"alice"
        await settle(client, server)
    finally:
        await port.stopListening()
        removeDirectory(setup.directory)


async def acceptedOverTCP(reactor: Any) -> None:
    """A client certificate from the CA is accepted over TCP, and its common name is the avatar id."""
    await accepted(reactor, unix=False)


async def acceptedOverUNIX(reactor: Any) -> None:
    """A client certificate from the CA is accepted over a UNIX socket (chunkwire-tls:unix:...), CN as avatar id."""
    await accepted(reactor, unix=True)


async def acceptedOverUNIXEndpoint(reactor: Any) -> None:
    """The endpoint built from clientCertificateOptions over unix: accepts the CA's client certificate too."""
    await accepted(reactor, unix=True, description=False)


async def acceptedThroughDescription(reactor: Any) -> None:
    """Twisted's ssl: client description with certKey=, privateKey= and caCertsDir= presents the certificate."""
    setup = Setup()
    factory = RecorderFactory()
    port = await setup.endpoint(reactor, False).listen(factory)
    try:
        bob = setup.ca.issue("bob")
        bob.writePEM(setup.directory / "bob.pem")
        endpoint = clientFromString(reactor, bob.clientEndpoint(setup.caDirectory, port.getHost().port))
        client = await hello(reactor, endpoint)
        assert await client.answered == ANSWER
        (server,) = factory.built
        assert server.certificate is not None and commonName(server.certificate.certificate) == b"bob"
        await settle(client, server)
    finally:
        await port.stopListening()
        removeDirectory(setup.directory)


def otherCAClient(setup: Setup) -> Any:
    return CertificateAuthority.generate("another CA").issue("mallory").clientOptions(setup.ca)


def selfSignedClient(setup: Setup) -> Any:
    own = SelfSignedCertificate.generate("mallory")
    certificate = PrivateCertificate.loadPEM(own.keyPEM + own.certPEM)
    trusted = Certificate.loadPEM(setup.ca.certPEM)
    return optionsForClientTLS("localhost", trustRoot=trusted, clientCertificate=certificate)


def noCertificateClient(setup: Setup) -> Any:
    return optionsForClientTLS("localhost", trustRoot=Certificate.loadPEM(setup.ca.certPEM))


async def refused(reactor: Any, makeOptions: Any, unix: bool = False) -> None:
    setup = Setup()
    factory = RecorderFactory()
    port = await setup.endpoint(reactor, unix).listen(factory)
    try:
        client = await hello(reactor, tlsTo(reactor, makeOptions(setup), port))
        reason = await client.lost
        assert not client.answered.called, "the refused client got an answer"
        assert "SSL" in type(reason).__module__ or "SSL" in repr(reason), reason
        (server,) = factory.built
        await server.lost
        assert server.received == b"", server.received
        assert server.certificate is None
    finally:
        await port.stopListening()
        removeDirectory(setup.directory)


async def refusedWithoutCertificate(reactor: Any) -> None:
    """A client with no certificate fails the handshake; the server's protocol receives nothing."""
    await refused(reactor, noCertificateClient)


async def refusedFromAnotherCA(reactor: Any) -> None:
    """A client certificate issued by another CA fails the handshake; the server's protocol receives nothing."""
    await refused(reactor, otherCAClient)


async def refusedSelfSigned(reactor: Any) -> None:
    """A self-signed client certificate fails the handshake; the server's protocol receives nothing."""
    await refused(reactor, selfSignedClient)


async def refusedOverUNIX(reactor: Any) -> None:
    """Over a UNIX socket too, a client certificate from another CA fails the handshake."""
    await refused(reactor, otherCAClient, unix=True)


class ClientCertificateTests(TestCase):
    """Client certificates over real TCP and UNIX sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_acceptedOverTCP = trialTest(acceptedOverTCP)
    test_acceptedOverUNIX = trialTest(acceptedOverUNIX)
    test_acceptedOverUNIXEndpoint = trialTest(acceptedOverUNIXEndpoint)
    test_acceptedThroughDescription = trialTest(acceptedThroughDescription)
    test_refusedWithoutCertificate = trialTest(refusedWithoutCertificate)
    test_refusedFromAnotherCA = trialTest(refusedFromAnotherCA)
    test_refusedSelfSigned = trialTest(refusedSelfSigned)
    test_refusedOverUNIX = trialTest(refusedOverUNIX)


test_accepted_over_tcp = pytestTest(acceptedOverTCP)
test_accepted_over_unix = pytestTest(acceptedOverUNIX)
test_accepted_over_unix_endpoint = pytestTest(acceptedOverUNIXEndpoint)
test_accepted_through_description = pytestTest(acceptedThroughDescription)
test_refused_without_certificate = pytestTest(refusedWithoutCertificate)
test_refused_from_another_ca = pytestTest(refusedFromAnotherCA)
test_refused_self_signed = pytestTest(refusedSelfSigned)
test_refused_over_unix = pytestTest(refusedOverUNIX)


class CheckerTests(SynchronousTestCase):
    """CertificateChecker maps a verified certificate to an avatar id."""

    def test_commonNameIsTheDefaultId(self) -> None:
        """By default the avatar id is the certificate's common name in UTF-8."""
        issued = CertificateAuthority.generate().issue("zoë")
        credentials = PeerCertificate(_x509(issued.certPEM))
        self.assertTrue(IPeerCertificate.providedBy(credentials))
        self.assertEqual(self.successResultOf(CertificateChecker().requestAvatarId(credentials)), "zoë".encode())

    def test_mappingChoosesTheId(self) -> None:
        """A mapping given to the checker decides the id, e.g. from the serial number."""
        certificate = _x509(CertificateAuthority.generate().issue("carol").certPEM)
        checker = CertificateChecker(lambda c: b"serial-%d" % c.serial_number)
        self.assertEqual(
            self.successResultOf(checker.requestAvatarId(PeerCertificate(certificate))),
            b"serial-%d" % certificate.serial_number,
        )

    def test_noIdIsUnauthorized(self) -> None:
        """A mapping that gives no id, or fails, refuses the login with UnauthorizedLogin."""
        credentials = PeerCertificate(_x509(CertificateAuthority.generate().issue("dave").certPEM))
        self.failureResultOf(CertificateChecker(lambda c: None).requestAvatarId(credentials), UnauthorizedLogin)
        self.failureResultOf(CertificateChecker(lambda c: 1 // 0).requestAvatarId(credentials), UnauthorizedLogin)

    def test_declaresItsCredentials(self) -> None:
        """The checker takes IPeerCertificate credentials; the mechanism is named CERTIFICATE."""
        self.assertEqual(CertificateChecker.credentialInterfaces, (IPeerCertificate,))
        self.assertEqual(CertificateChecker.credentialsInterfaces, (IPeerCertificate,))
        self.assertEqual(MECHANISM, "CERTIFICATE")

    def test_noTLSNoCertificate(self) -> None:
        """A transport without TLS gives no peer certificate."""
        self.assertIsNone(peerCertificateOf(StringTransport()))


class EndpointTests(SynchronousTestCase):
    """Building the endpoint that requires client certificates."""

    def test_splitsDescriptions(self) -> None:
        """A description splits into kind, positional and keyword arguments, escapes undone."""
        self.assertEqual(
            splitDescription(r"ssl:8443:interface=\:\:1:privateKey=/a\:b=c.pem"),
            ("ssl", ["8443"], {"interface": "::1", "privateKey": "/a:b=c.pem"}),
        )

    def test_joinsDescriptions(self) -> None:
        """joinDescription escapes what splitDescription undoes."""
        parts = ("unix", ["/run/a:b=c.sock"], {"privateKey": "/k\\ey.pem", "mode": "600"})
        self.assertEqual(splitDescription(joinDescription(*parts)), parts)

    def test_requireFromSSL(self) -> None:
        """An ssl: description becomes chunkwire-tls:tcp: with the same port, options, key, and the CA directory."""
        self.assertEqual(
            requireClientCertificates(r"ssl:8443:interface=\:\:1:privateKey=/k.pem", "/etc/ca"),
            r"chunkwire-tls:tcp:8443:interface=\:\:1:privateKey=/k.pem:caCertsDir=/etc/ca",
        )
        self.assertEqual(
            requireClientCertificates("ssl:port=8443", "/ca"),
            "chunkwire-tls:tcp:8443:privateKey=server.pem:caCertsDir=/ca",
        )

    def test_requireFromChunkwireTLS(self) -> None:
        """A chunkwire-tls: description gets caCertsDir= added (or replaced)."""
        self.assertEqual(
            requireClientCertificates("chunkwire-tls:unix:/s.sock:privateKey=/k.pem:caCertsDir=/old", "/ca"),
            "chunkwire-tls:unix:/s.sock:privateKey=/k.pem:caCertsDir=/ca",
        )

    def test_refusesOtherKinds(self) -> None:
        """A tcp: or unix: description, or an ssl: option that would be lost, is a ValueError."""
        self.assertRaises(ValueError, requireClientCertificates, "tcp:0", "/ca")
        self.assertRaises(ValueError, requireClientCertificates, "unix:/s.sock", "/ca")
        self.assertRaises(ValueError, requireClientCertificates, "ssl:0:sslmethod=TLS_METHOD", "/ca")
        self.assertRaises(ValueError, requireClientCertificates, "ssl:0:extraCertChain=/chain.pem", "/ca")

    def test_descriptionNeedsKeyAndEndpoint(self) -> None:
        """A chunkwire-tls: description without a wrapped endpoint or without privateKey= is a ValueError."""
        from twisted.internet import reactor

        self.assertRaises(ValueError, serverFromString, reactor, "chunkwire-tls:tcp:0")
        self.assertRaises(ValueError, serverFromString, reactor, "chunkwire-tls:privateKey=/k.pem")
        self.assertRaises(ValueError, tlsServerEndpoint, reactor, "chunkwire-tls:tcp:0:privateKey=/k.pem", None)

    def test_emptyCADirectoryIsAnError(self) -> None:
        """A CA directory without a *.pem certificate is refused at once, not at the first client."""
        directory = Path(self.mktemp())
        directory.mkdir()
        (directory / "notes.txt").write_text("no certificates here")
        self.assertRaises(ValueError, loadCADirectory, directory)

    def test_caDirectoryHoldsTheCA(self) -> None:
        """writeCADirectory leaves exactly the CA's certificate as a *.pem file."""
        ca = CertificateAuthority.generate()
        (loaded,) = loadCADirectory(ca.writeCADirectory(Path(self.mktemp())))
        self.assertEqual(loaded.dump(), Certificate.loadPEM(ca.certPEM).dump())


class AuthorityTests(SynchronousTestCase):
    """protocols.testing.CertificateAuthority issues the certificates the tests above use."""

    def test_serverCertificate(self) -> None:
        """A server certificate names its host names, 127.0.0.1 and ::1, is for serverAuth, and is signed by the CA."""
        import ipaddress

        from cryptography import x509
        from cryptography.x509.oid import ExtendedKeyUsageOID

        ca = CertificateAuthority.generate("Test CA")
        issued = ca.issue("web", server=True, hostnames=("localhost", "example.test"))
        certificate = _x509(issued.certPEM)
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(names.get_values_for_type(x509.DNSName), ["localhost", "example.test"])
        self.assertEqual(
            names.get_values_for_type(x509.IPAddress),
            [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")],
        )
        usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        self.assertEqual(list(usage), [ExtendedKeyUsageOID.SERVER_AUTH])
        certificate.verify_directly_issued_by(_x509(ca.certPEM))
        self.assertEqual(issued.commonName, "web")

    def test_clientCertificate(self) -> None:
        """A client certificate is for clientAuth, names no host, and is not a CA."""
        from cryptography import x509
        from cryptography.x509.oid import ExtendedKeyUsageOID

        certificate = _x509(CertificateAuthority.generate().issue("alice").certPEM)
        usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        self.assertEqual(list(usage), [ExtendedKeyUsageOID.CLIENT_AUTH])
        self.assertRaises(
            x509.ExtensionNotFound, certificate.extensions.get_extension_for_class, x509.SubjectAlternativeName
        )
        self.assertFalse(certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)

    def test_writePEM(self) -> None:
        """writePEM writes key and certificate to one file of mode 0600, for privateKey=."""
        issued = CertificateAuthority.generate().issue("alice")
        path = issued.writePEM(Path(self.mktemp()))
        self.assertEqual(path.read_bytes(), issued.keyPEM + issued.certPEM)
        self.assertEqual(path.stat().st_mode & 0o777, 0o600)
        self.assertIn("certKey=", issued.clientEndpoint("/ca", 8751))
