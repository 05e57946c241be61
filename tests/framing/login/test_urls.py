"""The key hash a client pins, read from a DER certificate without an X.509 library (L{framing.login._urls})."""

from __future__ import annotations

import ssl

from twisted.trial.unittest import SynchronousTestCase

from framing.login import LoginRefused
from framing.login._urls import (
    KEY_HASH_LENGTH,
    HintAttempts,
    KeyMismatch,
    ObjectURL,
    certificateKeyHash,
    checkPresentedKey,
    hintAddress,
)
from protocols.auth._authority import CertificateAuthority
from protocols.auth._identity import keyHash


class CertificateKeyHashTests(SynchronousTestCase):
    """certificateKeyHash gives what protocols.auth._identity.keyHash (cryptography) gives, or a ValueError."""

    def test_sameAsKeyHash(self) -> None:
        """For a CA, a server and a client certificate: the same hash as the cryptography-based keyHash."""
        authority = CertificateAuthority.generate()
        for pem in (authority.certPEM, authority.issue("s", server=True).certPEM, authority.issue("c").certPEM):
            der = ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
            self.assertEqual(certificateKeyHash(der), keyHash(pem))
            self.assertEqual(len(certificateKeyHash(der)), KEY_HASH_LENGTH)

    def test_notACertificate(self) -> None:
        """Bytes that are not a DER certificate, or one cut short, are a ValueError, never another exception."""
        der = ssl.PEM_cert_to_DER_cert(CertificateAuthority.generate().certPEM.decode("ascii"))
        for bad in (
            b"",
            b"\x30",
            b"\x04\x00",
            der[: len(der) // 2],
            b"\x30\x85" + der[2:],
            b"\x30\x03\x02\x01\x01",
            b"\x30\x02\x30\x00",
        ):
            self.assertRaises(ValueError, certificateKeyHash, bad)


class ClientHelperTests(SynchronousTestCase):
    """What the clients without Twisted share of an object URL: its hints' addresses, the walk, the key check."""

    def test_hintAddress(self) -> None:
        """A host and port (IPv6 unbracketed), or a UNIX socket's path."""
        self.assertEqual(hintAddress("127.0.0.1:8760"), ("127.0.0.1", 8760))
        self.assertEqual(hintAddress("[::1]:8760"), ("::1", 8760))
        self.assertEqual(hintAddress("unix:/run/kv.sock"), "/run/kv.sock")

    def test_checkPresentedKey(self) -> None:
        """The certificate's key hash must be the expected one; another, or no certificate, is KeyMismatch."""
        der = ssl.PEM_cert_to_DER_cert(CertificateAuthority.generate().certPEM.decode("ascii"))
        checkPresentedKey(der, certificateKeyHash(der))
        mismatch = self.assertRaises(KeyMismatch, checkPresentedKey, der, "a" * KEY_HASH_LENGTH)
        self.assertEqual(mismatch.presented, certificateKeyHash(der))
        mismatch = self.assertRaises(KeyMismatch, checkPresentedKey, None, "a" * KEY_HASH_LENGTH)
        self.assertEqual(mismatch.presented, "(no certificate)")

    def test_hintAttempts(self) -> None:
        """Each hint in order; a connection error moves on and the last one is raised; a key or login failure stops."""
        url = ObjectURL("a" * KEY_HASH_LENGTH, ("127.0.0.1:1", "unix:/nowhere"), "b" * 26)
        attempts = HintAttempts(url)
        seen = []
        for target, hint in attempts:
            seen.append((target, hint))
            attempts.failed(ConnectionRefusedError(hint))
        self.assertEqual(seen, [(("127.0.0.1", 1), "127.0.0.1:1"), ("/nowhere", "unix:/nowhere")])
        self.assertEqual(str(attempts.failure()), "unix:/nowhere")
        for stopping in (KeyMismatch("a", "b"), LoginRefused("no")):
            self.assertRaises(type(stopping), HintAttempts(url).failed, stopping)
