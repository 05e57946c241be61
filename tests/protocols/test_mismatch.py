"""A TLS/plain mismatch is diagnosed on the client's side, as the server's log already does on its side."""

from __future__ import annotations

import tempfile
from typing import Any

from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Decoder
from framing.wire import PREAMBLE
from protocols import echo
from protocols._mismatch import ClosedBeforePreamble, NotTLS, TLSHandshakeFailed, diagnoseLoss
from protocols.testing import SelfSignedCertificate

from .helpers import pytestTest, trialTest


async def expectFailure(deferred: Any) -> BaseException:
    """Wait for C{deferred} and return the exception it failed with (fail if it succeeds)."""
    try:
        result = await deferred
    except Exception as error:
        return error
    raise AssertionError(f"expected a failure, got {result!r}")


async def plainClientOnTLSPort(reactor: Any) -> None:
    """A plain client on a TLS port fails with ClosedBeforePreamble, which says to use an ssl: endpoint."""
    with tempfile.TemporaryDirectory() as directory:
        certificate = SelfSignedCertificate.generate("localhost").writeTo(directory)
        port = await echo.serve(reactor, certificate.serverEndpoint(0))
        try:
            client = await echo.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
            error = await expectFailure(client.echo(1))
        finally:
            await port.stopListening()
    assert isinstance(error, ClosedBeforePreamble), repr(error)
    assert isinstance(error, ConnectionDone)
    assert "connect with an ssl: endpoint" in str(error), str(error)


async def tlsClientOnPlainPort(reactor: Any) -> None:
    """A TLS client on a plain port fails with NotTLS, which says the peer does not speak TLS and to use tcp:."""
    with tempfile.TemporaryDirectory() as directory:
        certificate = SelfSignedCertificate.generate("localhost").writeTo(directory)
        port = await echo.serve(reactor, "tcp:0:interface=127.0.0.1")
        try:
            client = await echo.connect(reactor, certificate.clientEndpoint(port.getHost().port))
            error = await expectFailure(client.echo(1))
        finally:
            await port.stopListening()
    assert isinstance(error, NotTLS), repr(error)
    assert "does not speak TLS" in str(error) and "tcp: endpoint" in str(error), str(error)


async def untrustedServerCertificate(reactor: Any) -> None:
    """
    A TLS client that trusts another CA than the one that signed the server's
    certificate fails with TLSHandshakeFailed, which says the certificate was
    not verified and what to give; not with NotTLS (both ends speak TLS).
    """
    with tempfile.TemporaryDirectory() as served, tempfile.TemporaryDirectory() as trusted:
        server = SelfSignedCertificate.generate("localhost").writeTo(served)
        other = SelfSignedCertificate.generate("localhost").writeTo(trusted)
        port = await echo.serve(reactor, server.serverEndpoint(0))
        try:
            client = await echo.connect(reactor, other.clientEndpoint(port.getHost().port))
            error = await expectFailure(client.echo(1))
        finally:
            await port.stopListening()
    assert isinstance(error, TLSHandshakeFailed), repr(error)
    assert "certificate verify failed" in str(error) and "caCertsDir=" in str(error), str(error)
    assert "does not speak TLS" not in str(error), str(error)


class MismatchTests(TestCase):
    """Each mismatch over real sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_plainClientOnTLSPort = trialTest(plainClientOnTLSPort)
    test_tlsClientOnPlainPort = trialTest(tlsClientOnPlainPort)
    test_untrustedServerCertificate = trialTest(untrustedServerCertificate)


test_plain_client_on_tls_port = pytestTest(plainClientOnTLSPort)
test_tls_client_on_plain_port = pytestTest(tlsClientOnPlainPort)
test_untrusted_server_certificate = pytestTest(untrustedServerCertificate)


class FakeTLSError(Exception):
    """Stands in for OpenSSL.SSL.Error: the diagnosis knows TLS errors by their module."""


FakeTLSError.__module__ = "OpenSSL.SSL"


class DiagnosisTests(SynchronousTestCase):
    """diagnoseLoss changes only the reason of a connection on which nothing arrived."""

    def test_afterTheFirstByte(self) -> None:
        """Once any byte of the peer's preamble arrived, a clean close or a TLS error is reported as it was."""
        decoder = Decoder()
        decoder.feed(PREAMBLE[:1])
        for error in (ConnectionDone(), FakeTLSError([("SSL routines", "", "wrong version number")])):
            reason = Failure(error)
            self.assertIs(diagnoseLoss(decoder, reason), reason)

    def test_beforeTheFirstByte(self) -> None:
        """Before any byte, a clean close becomes ClosedBeforePreamble and a TLS error NotTLS, with OpenSSL's words."""
        self.assertIsInstance(diagnoseLoss(Decoder(), Failure(ConnectionDone())).value, ClosedBeforePreamble)
        tls = diagnoseLoss(Decoder(), Failure(FakeTLSError([("SSL routines", "", "wrong version number")]))).value
        self.assertIsInstance(tls, NotTLS)
        self.assertIsInstance(tls, ConnectionLost)
        self.assertIn("(wrong version number)", str(tls))

    def test_refusedCertificate(self) -> None:
        """Before any byte, a failed verification or a peer's alert is a TLSHandshakeFailed, not a NotTLS."""
        for words, advice in (
            ("certificate verify failed", "caCertsDir="),
            ("tlsv13 alert certificate required", "refused this side's certificate"),
        ):
            error = diagnoseLoss(Decoder(), Failure(FakeTLSError([("SSL routines", "", words)]))).value
            self.assertIsInstance(error, TLSHandshakeFailed)
            self.assertNotIsInstance(error, NotTLS)
            self.assertIn(f"({words})", str(error))
            self.assertIn(advice, str(error))

    def test_otherReasons(self) -> None:
        """A connection lost for another reason (reset, refused) keeps its reason."""
        reason = Failure(ConnectionLost("reset"))
        self.assertIs(diagnoseLoss(Decoder(), reason), reason)
