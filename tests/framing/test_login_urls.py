"""The key hash a client pins, read from a DER certificate without an X.509 library (L{framing.login.urls})."""

from __future__ import annotations

import ssl

from twisted.trial.unittest import SynchronousTestCase

from framing.login.urls import KEY_HASH_LENGTH, certificateKeyHash
from protocols.auth.authority import CertificateAuthority
from protocols.auth.identity import keyHash


class CertificateKeyHashTests(SynchronousTestCase):
    """certificateKeyHash gives what protocols.auth.identity.keyHash (cryptography) gives, or a ValueError."""

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
