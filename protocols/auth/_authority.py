# -*- test-case-name: tests.protocols.auth.test_certcommand,tests.protocols.auth.test_tls_options -*-
"""A small certificate authority: a CA of your own for TLS client certificates (C{--client-ca}) and servers.

Contract: L{CertificateAuthority.generate} makes a P-256 key and a
self-signed CA certificate (path length 0: it signs end certificates only);
L{CertificateAuthority.issue} makes a new key and a certificate for it
signed by the CA: a client certificate (extended key usage clientAuth)
whose common name is the avatar id L{protocols.auth._certificates.CertificateChecker}
gives, or a server certificate (serverAuth) naming its host names, 127.0.0.1
and ::1 in its subjectAltName.  Every certificate is valid from five minutes
ago (clocks drift) for C{days} days, L{DEFAULT_DAYS} unless told.

On disk (L{CertificateAuthority.save}, L{CertificateAuthority.load}) a CA
is a directory holding its key, C{ca.key} (mode 0600, never rewritten),
and C{certs/ca.pem}, its certificate alone: C{certs/} is the directory a
server's C{--client-ca} (and a client's C{caCertsDir=}) reads, and it holds
no key.  Every key file is created with mode 0600 from the start, never
widened afterwards.  The C{chunkwire-cert} command
(L{protocols.auth._certcommand}) does the same from a shell.

pyOpenSSL and cryptography (the C{tls} extra) are imported inside the
functions that need them, so C{protocols} imports without them.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._identity import InsecureKeyFile
from ._tlsendpoints import quote

DEFAULT_DAYS = 365
"""How long certificates are valid unless told: a year, renewed as a routine, not a surprise."""

CA_KEY = "ca.key"
"""The CA's key in its directory (not C{*.pem}, so no directory of trusted certificates ever takes it for one)."""

CA_CERTIFICATE = Path("certs") / "ca.pem"
"""The CA's certificate in its directory; C{certs/} is what C{--client-ca} and C{caCertsDir=} are given."""

CLOCK_SKEW = datetime.timedelta(minutes=5)
"""A certificate is valid from this long before it was made, so a peer whose clock is a little behind accepts it."""


def writePrivately(path: str | Path, content: bytes, *, replace: bool = False) -> Path:
    """
    Write C{content} to a new file at C{path} that only its owner may read
    (mode 0600 from its creation), synced to disk.

    @param replace: replace an existing file (written beside it, then
        renamed over it, so a reader sees the old file or the new one);
        otherwise an existing file is left alone.
    @raise FileExistsError: C{path} exists and C{replace} is false.
    """
    path = Path(path)
    target = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp") if replace else path
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        if replace:
            os.replace(target, path)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return path


def _keyPEM(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _validity(builder: Any, days: int) -> Any:
    if days < 1:
        raise ValueError(f"a certificate is valid for at least a day, not {days}")
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - CLOCK_SKEW).not_valid_after(now + datetime.timedelta(days=days))


def _alternativeNames(hostnames: Sequence[str]) -> Any:
    """DNS names for C{hostnames}, plus 127.0.0.1 and ::1, as IP addresses (those in C{hostnames} too)."""
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for hostname in (*hostnames, "127.0.0.1", "::1"):
        try:
            address = ipaddress.ip_address(hostname)
        except ValueError:
            names.append(x509.DNSName(hostname))
            continue
        if x509.IPAddress(address) not in names:
            names.append(x509.IPAddress(address))
    return x509.SubjectAlternativeName(names)


class CertificateAuthority:
    """
    A CA's key and self-signed certificate, which issues server and client certificates.

    @ivar name: the CA's common name.
    @ivar certPEM: the CA's certificate, PEM.
    @ivar keyPEM: the CA's private key, PEM.
    """

    def __init__(self, name: str, certPEM: bytes, keyPEM: bytes) -> None:
        self.name, self.certPEM, self.keyPEM = name, certPEM, keyPEM

    def __repr__(self) -> str:
        return f"<CertificateAuthority {self.name!r}>"

    @classmethod
    def generate(cls, name: str = "chunkwire CA", days: int = DEFAULT_DAYS) -> CertificateAuthority:
        """
        A new CA: a P-256 key and a self-signed CA certificate valid for C{days} days.

        @raise ValueError: C{days} is less than 1.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
        )
        certificate = (
            _validity(builder, days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            # Signs certificates and CRLs, nothing else.
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(name, certificate.public_bytes(serialization.Encoding.PEM), _keyPEM(key))

    @classmethod
    def load(cls, directory: str | Path) -> CertificateAuthority:
        """
        The CA kept in C{directory} by L{save}.

        @raise FileNotFoundError: the directory holds no CA.
        @raise InsecureKeyFile: the key file's mode lets group or others in.
        @raise ValueError: the files do not hold a key and a CA certificate for it.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.x509.oid import NameOID

        directory = Path(directory)
        keyPath, certPath = directory / CA_KEY, directory / CA_CERTIFICATE
        mode = keyPath.stat().st_mode & 0o777
        if os.name == "posix" and mode & 0o077:
            raise InsecureKeyFile(f"{keyPath} is open to group or others (mode {mode:o}); use 0600")
        keyPEM, certPEM = keyPath.read_bytes(), certPath.read_bytes()
        key = serialization.load_pem_private_key(keyPEM, password=None)
        certificate = x509.load_pem_x509_certificate(certPEM)
        spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        if key.public_key().public_bytes(*spki) != certificate.public_key().public_bytes(*spki):
            raise ValueError(f"{certPath} is not the certificate of the key in {keyPath}")
        names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        name = str(names[0].value) if names else ""
        return cls(name, certPEM, keyPEM)

    def save(self, directory: str | Path) -> Path:
        """
        Keep this CA in C{directory} (made mode 0700 if missing): its key as
        C{ca.key} (mode 0600), its certificate as C{certs/ca.pem}.

        @return: the directory of trusted certificates, C{directory/certs},
            for a server's C{--client-ca}.
        @raise FileExistsError: the directory holds a CA key already (a CA
            is never overwritten: every certificate it issued would stop
            being trusted).
        """
        directory = Path(directory)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        writePrivately(directory / CA_KEY, self.keyPEM)
        return self.writeCADirectory(directory / CA_CERTIFICATE.parent)

    def writeCADirectory(self, directory: str | Path) -> Path:
        """
        Write this CA's certificate, alone, as C{ca.pem} in C{directory}
        (made if needed): the directory C{caCertsDir=} and
        L{protocols.auth._certificates.requireClientCertificates} read
        (every C{*.pem} file in it).

        @return: C{directory}.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ca.pem").write_bytes(self.certPEM)
        return directory

    def issue(
        self,
        commonName: str,
        *,
        server: bool = False,
        hostnames: Sequence[str] = ("localhost",),
        days: int = DEFAULT_DAYS,
    ) -> IssuedCertificate:
        """
        A new P-256 key and a certificate for it signed by this CA, valid for C{days} days.

        @param commonName: the subject's common name: for a client
            certificate, the user it logs in as.
        @param server: a server certificate (names C{hostnames}, 127.0.0.1
            and ::1; extended key usage serverAuth) instead of a client one
            (clientAuth, no host names).
        @raise ValueError: C{days} is less than 1.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        caKey: Any = serialization.load_pem_private_key(self.keyPEM, password=None)
        caCertificate = x509.load_pem_x509_certificate(self.certPEM)
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, commonName)]))
            .issuer_name(caCertificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
        )
        caPublicKey: Any = caCertificate.public_key()
        builder = (
            _validity(builder, days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(caPublicKey), critical=False)
        )
        if server:
            builder = builder.add_extension(_alternativeNames(hostnames), critical=False)
        certificate = builder.sign(caKey, hashes.SHA256())
        return IssuedCertificate(commonName, certificate.public_bytes(serialization.Encoding.PEM), _keyPEM(key))


class IssuedCertificate:
    """
    A key and a certificate a L{CertificateAuthority} issued for it.

    @ivar commonName: the subject's common name.
    @ivar certPEM: the certificate, PEM.
    @ivar keyPEM: the private key, PEM.
    @ivar pemPath: after L{writePEM}, the file holding key and certificate.
    """

    def __init__(self, commonName: str, certPEM: bytes, keyPEM: bytes) -> None:
        self.commonName, self.certPEM, self.keyPEM = commonName, certPEM, keyPEM
        self.pemPath: Path | None = None

    def __repr__(self) -> str:
        return f"<IssuedCertificate {self.commonName!r}>"

    def writePEM(self, path: str | Path, *, replace: bool = True) -> Path:
        """
        Write key and certificate to one file at C{path} (mode 0600 from
        its creation), for C{privateKey=} (a server's) or C{certKey=} and
        C{privateKey=} (a client's); return the path.

        @param replace: replace a file already there (atomically); otherwise
            raise C{FileExistsError}.
        """
        self.pemPath = writePrivately(path, self.keyPEM + self.certPEM, replace=replace)
        return self.pemPath

    def privateCertificate(self) -> Any:
        """This key and certificate as a C{twisted.internet.ssl.PrivateCertificate}."""
        from twisted.internet.ssl import PrivateCertificate

        return PrivateCertificate.loadPEM(self.keyPEM + self.certPEM)  # type: ignore[no-untyped-call]

    def serverOptions(self) -> Any:
        """Server TLS options presenting this certificate and asking for no client certificate."""
        from twisted.internet.ssl import CertificateOptions

        from ._tlsendpoints import keyAndCertificate

        return CertificateOptions(**keyAndCertificate(self.keyPEM, self.certPEM))

    def clientOptions(self, ca: CertificateAuthority, hostname: str = "localhost") -> Any:
        """
        Client TLS options (for C{wrapClientTLS}) presenting this
        certificate, trusting only C{ca}, and checking that the server's
        certificate names C{hostname}.
        """
        from twisted.internet.ssl import Certificate, optionsForClientTLS

        from ._tlsendpoints import keyAndCertificate

        return optionsForClientTLS(
            hostname,
            trustRoot=Certificate.loadPEM(ca.certPEM),
            extraCertificateOptions=keyAndCertificate(self.keyPEM, self.certPEM),
        )

    def clientEndpoint(
        self, caDirectory: str | Path, port: int, host: str = "127.0.0.1", hostname: str = "localhost"
    ) -> str:
        """
        The C{ssl:} client endpoint description presenting this certificate
        (from L{writePEM}'s file) and trusting the CAs in C{caDirectory}.

        @raise RuntimeError: L{writePEM} was not called.
        """
        if self.pemPath is None:
            raise RuntimeError("call writePEM() first")
        pem = quote(str(self.pemPath))
        return (
            f"ssl:host={quote(host)}:port={port}:certKey={pem}:privateKey={pem}"
            f":caCertsDir={quote(str(caDirectory))}:hostname={quote(hostname)}"
        )
