# -*- test-case-name: tests.protocols.auth.test_certificates,tests.protocols.auth.test_identity -*-
"""TLS over any stream server endpoint, as an object and as a C{chunkwire-tls:} description.

Contract: L{tlsServerEndpoint} serves TLS (L{twisted.protocols.tls}) over
any plain stream server endpoint, C{unix:} included, where Twisted's own
C{ssl:} description is TCP only and cannot require client certificates.
The C{chunkwire-tls:} description (parsed by the endpoint plugin in
C{twisted/plugins/chunkwire_endpoints.py}) names the same thing as a
string, so anything that takes a description takes it::

    chunkwire-tls:tcp:8443:interface=127.0.0.1:privateKey=server.pem
    chunkwire-tls:unix:/run/kv.sock:privateKey=server.pem:caCertsDir=ca/

that is, a plain description followed by C{privateKey=} (a PEM file with
the key, and the certificate unless C{certKey=} names another file) and,
to require client certificates issued by the CAs whose C{*.pem} files are
in a directory, C{caCertsDir=}.  A client without such a certificate fails
the handshake and the server's protocol never receives a byte from it.

pyOpenSSL (the C{tls} extra) is imported inside the functions that need it,
so C{protocols} imports without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString
from twisted.internet.interfaces import IListeningPort, IStreamServerEndpoint
from zope.interface import implementer

PREFIX = "chunkwire-tls"
"""The endpoint type of a C{chunkwire-tls:} server description."""

TLS_KEYWORDS = ("privateKey", "certKey", "caCertsDir")
"""The keywords a C{chunkwire-tls:} description takes for itself; the rest belong to the wrapped endpoint."""


@implementer(IStreamServerEndpoint)
class TLSServerEndpoint:
    """
    TLS over another stream server endpoint.

    @ivar wrapped: the endpoint carrying the TLS bytes.
    @ivar options: the server's TLS options (an C{IOpenSSLServerConnectionCreator}).
    """

    def __init__(self, wrapped: Any, options: Any, reactor: Any = None) -> None:
        self.wrapped, self.options, self.reactor = wrapped, options, reactor

    def listen(self, protocolFactory: Any) -> Deferred[IListeningPort]:
        """Listen on the wrapped endpoint; each connection speaks TLS to C{protocolFactory}'s protocols."""
        from twisted.protocols.tls import TLSMemoryBIOFactory

        tls = TLSMemoryBIOFactory(self.options, False, protocolFactory, self.reactor)
        listening: Deferred[IListeningPort] = self.wrapped.listen(tls)
        return listening


def tlsServerEndpoint(reactor: Any, listen: str, options: Any) -> TLSServerEndpoint:
    """
    Serve TLS with C{options} over the server endpoint description C{listen}.

    @param listen: any stream server endpoint description that is not
        already TLS, e.g. C{tcp:0:interface=127.0.0.1} or C{unix:/run/s.sock}.
    @param options: server TLS options (L{serverTLSOptions}, or
        L{protocols.auth._identity.ServerIdentity.certificateOptions}).
    @raise ValueError: C{listen} is already TLS.
    """
    kind = splitDescription(listen)[0].lower()
    if kind in ("ssl", PREFIX):
        raise ValueError(f"{listen!r} is TLS already; give the plain endpoint to wrap")
    return TLSServerEndpoint(serverFromString(reactor, listen), options, reactor)  # type: ignore[no-untyped-call]


def tlsServerFromArguments(reactor: Any, args: tuple[str, ...], kwargs: dict[str, str]) -> TLSServerEndpoint:
    """
    The endpoint a C{chunkwire-tls:} description names, from the arguments
    Twisted split it into (everything after the prefix).

    @raise ValueError: no wrapped endpoint, or no C{privateKey=}.
    """
    options = {key: kwargs.pop(key) for key in TLS_KEYWORDS if key in kwargs}
    if not args:
        raise ValueError(f"{PREFIX}: needs the endpoint to wrap, e.g. {PREFIX}:tcp:8443:privateKey=server.pem")
    if "privateKey" not in options:
        raise ValueError(f"{PREFIX}: needs privateKey= (a PEM file with the key and certificate)")
    tls = serverTLSOptions(options["privateKey"], options.get("certKey"), options.get("caCertsDir"))
    return tlsServerEndpoint(reactor, joinDescription(args[0], list(args[1:]), kwargs), tls)


def asTLSDescription(description: str) -> str:
    """
    The C{chunkwire-tls:} description that listens where the TLS server
    description C{description} does, with the same key and certificate:
    C{description} itself if it is one, else an C{ssl:} one (port,
    C{interface}, C{backlog}, C{privateKey}, by default C{server.pem} as in
    Twisted, and C{certKey}) as TLS over C{tcp:}.  Its plain part is then
    L{plainPart}'s, which a process can bind without the key.

    @raise ValueError: neither kind, or an C{ssl:} option this does not carry over.
    """
    kind, positional, keywords = splitDescription(description)
    if kind.lower() == PREFIX:
        return description
    if kind.lower() != "ssl":
        raise ValueError(f"{description!r} is not an ssl: or {PREFIX}: server description")
    unsupported = set(keywords) - {"port", "interface", "backlog", "privateKey", "certKey"}
    if unsupported or len(positional) > 1:
        raise ValueError(f"unsupported in {description!r}: {sorted(unsupported) or positional[1:]}")
    port = positional[0] if positional else keywords.pop("port", "0")
    keywords.setdefault("privateKey", "server.pem")
    return joinDescription(PREFIX, ["tcp", port], keywords)


def plainPart(description: str) -> tuple[str, dict[str, str]]:
    """
    The plain endpoint description a C{chunkwire-tls:} C{description} wraps,
    and its TLS keywords (L{TLS_KEYWORDS} given in it).

    @raise ValueError: C{description} is not a C{chunkwire-tls:} one, or names no endpoint to wrap.
    """
    kind, positional, keywords = splitDescription(description)
    if kind.lower() != PREFIX or not positional:
        raise ValueError(f"{description!r} is not a {PREFIX}: description over a plain endpoint")
    tls = {key: keywords.pop(key) for key in TLS_KEYWORDS if key in keywords}
    return joinDescription(positional[0], positional[1:], keywords), tls


def keyAndCertificate(keyPEM: bytes, certPEM: bytes) -> dict[str, Any]:
    """
    The key and certificate in PEM (either may hold both: the first block
    of its kind is read) as Twisted's C{CertificateOptions} takes them,
    C{{"privateKey": ..., "certificate": ...}}, in cryptography's types:
    pyOpenSSL deprecates its own C{PKey} and C{X509} there, which
    C{PrivateCertificate.options()} passes (a C{DeprecationWarning} per
    context made).  Also what C{optionsForClientTLS}'s
    C{extraCertificateOptions} takes for a client certificate.

    @raise ValueError: no key or no certificate in them.
    """
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from cryptography.x509 import load_pem_x509_certificate

    return {"privateKey": load_pem_private_key(keyPEM, None), "certificate": load_pem_x509_certificate(certPEM)}


def serverTLSOptions(
    privateKey: str | Path, certKey: str | Path | None = None, caCertsDir: str | Path | None = None
) -> Any:
    """
    Server TLS options presenting the key in C{privateKey} and the
    certificate in C{certKey} (C{privateKey} again if C{None}); with
    C{caCertsDir}, requiring a client certificate issued by one of the CAs
    there (see L{loadCADirectory}).
    """
    from twisted.internet.ssl import CertificateOptions, trustRootFromCertificates

    keyPEM = Path(privateKey).read_bytes()
    certPEM = Path(certKey).read_bytes() if certKey is not None else keyPEM
    trustRoot = None
    if caCertsDir is not None:
        # A trust root makes CertificateOptions verify the peer and require its certificate.
        trustRoot = trustRootFromCertificates(loadCADirectory(caCertsDir))  # type: ignore[no-untyped-call]
    return CertificateOptions(**keyAndCertificate(keyPEM, certPEM), trustRoot=trustRoot)


def loadCADirectory(caDirectory: str | Path) -> list[Any]:
    """
    The CA certificates in the C{*.pem} files of C{caDirectory} (the files
    Twisted's client C{caCertsDir=} reads), as C{twisted.internet.ssl.Certificate}s.

    @raise ValueError: the directory holds no certificate; a server with
        none would refuse every client.
    """
    from twisted.internet.ssl import Certificate

    paths = sorted(path for path in Path(caDirectory).iterdir() if path.suffix.lower() == ".pem" and path.is_file())
    certificates = [Certificate.loadPEM(path.read_bytes()) for path in paths]
    if not certificates:
        raise ValueError(f"no CA certificate (*.pem) in {caDirectory}")
    return certificates


def splitDescription(description: str) -> tuple[str, list[str], dict[str, str]]:
    """
    Split an endpoint description into its kind, positional arguments and
    keyword arguments (at each field's first unescaped C{=}), undoing
    backslash escapes, as Twisted reads it.
    """
    fields: list[list[tuple[str, bool]]] = [[]]
    escaped = False
    for character in description:
        if escaped:
            fields[-1].append((character, True))
            escaped = False
        elif character == "\\":
            escaped = True
        elif character == ":":
            fields.append([])
        else:
            fields[-1].append((character, False))
    positional: list[str] = []
    keywords: dict[str, str] = {}
    for field in fields[1:]:
        cut = next(
            (index for index, (character, wasEscaped) in enumerate(field) if (character, wasEscaped) == ("=", False)),
            None,
        )
        if cut is None:
            positional.append(_text(field))
        else:
            keywords[_text(field[:cut])] = _text(field[cut + 1 :])
    return _text(fields[0]), positional, keywords


def _text(field: list[tuple[str, bool]]) -> str:
    return "".join(character for character, _ in field)


def joinDescription(kind: str, positional: list[str], keywords: dict[str, str]) -> str:
    """The description L{splitDescription} would split into these parts, escaping what must be."""
    fields = [kind, *map(quote, positional), *(f"{quote(key)}={quote(value)}" for key, value in keywords.items())]
    return ":".join(fields)


def quote(value: str) -> str:
    """Escape C{value} for one field of an endpoint description."""
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")
