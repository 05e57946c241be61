"""chunkwire's own TLS options give OpenSSL cryptography's key and certificate, not pyOpenSSL's deprecated ones.

pyOpenSSL (24.3 on) warns, once per context made, when it is given its own
C{PKey} or C{X509}; pyproject.toml filters those two messages for Twisted's
C{ssl:} endpoint parser alone, which still passes them.  Each test here
turns every DeprecationWarning into an error while the options and their
context are made, so a call of ours that went back to pyOpenSSL's types
fails here rather than being filtered.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import StringTransport
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.trial.unittest import SynchronousTestCase

from protocols.auth._authority import CertificateAuthority
from protocols.auth._identity import ServerIdentity
from protocols.auth._tlsendpoints import serverTLSOptions
from protocols.testing import SelfSignedCertificate


class NoDeprecatedObjectsTests(SynchronousTestCase):
    """Every TLS options maker of chunkwire's makes its context without a DeprecationWarning."""

    def assertQuiet(self, make: Callable[[], Any]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            options = make()
            # A server's CertificateOptions makes its context when asked; a client's options, with a connection.
            if hasattr(options, "getContext"):
                self.assertIsNotNone(options.getContext())
            else:
                tls = TLSMemoryBIOFactory(options, True, Factory.forProtocol(Protocol)).buildProtocol(None)
                tls.makeConnection(StringTransport())
                self.assertIsNotNone(tls._tlsConnection)

    def test_testingCertificate(self) -> None:
        """protocols.testing's self-signed certificate: server and client options."""
        certificate = SelfSignedCertificate.generate("localhost")
        self.assertQuiet(certificate.serverOptions)
        self.assertQuiet(certificate.clientOptions)

    def test_issuedCertificate(self) -> None:
        """A CertificateAuthority's certificates: a server's options, a client's presenting its certificate."""
        authority = CertificateAuthority.generate()
        self.assertQuiet(authority.issue("localhost", server=True).serverOptions)
        self.assertQuiet(lambda: authority.issue("ada").clientOptions(authority))

    def test_serverTLSOptions(self) -> None:
        """chunkwire-tls:'s options, with and without a client CA, key and certificate in one file or two."""
        work = Path(self.mktemp())
        authority = CertificateAuthority.generate()
        caDirectory = authority.writeCADirectory(work / "ca")
        issued = authority.issue("localhost", server=True)
        both = issued.writePEM(work / "server.pem")
        (work / "key.pem").write_bytes(issued.keyPEM)
        (work / "cert.pem").write_bytes(issued.certPEM)
        self.assertQuiet(lambda: serverTLSOptions(both))
        self.assertQuiet(lambda: serverTLSOptions(both, caCertsDir=caDirectory))
        self.assertQuiet(lambda: serverTLSOptions(work / "key.pem", work / "cert.pem"))

    def test_serverIdentity(self) -> None:
        """A server identity's (object URLs') options."""
        work = Path(self.mktemp())
        work.mkdir()
        self.assertQuiet(ServerIdentity.loadOrCreate(work / "identity.pem").certificateOptions)
