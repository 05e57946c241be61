# -*- test-case-name: tests.protocols.serving.test_own_workers,tests.protocols.auth.test_login -*-
"""The PROXY protocol header (HAProxy's v1 and v2) in front of a connection, believed only from trusted proxies.

Contract: on a C{haproxy:} listener (L{serverEndpoint}), every connection
starts with a PROXY header, and a connection has one client address,
which L{clientAddress} gives and C{transport.getPeer()} returns to
everything above (the guard's caps, the login throttle, the log).  From a
trusted proxy (L{TrustedProxies}; loopback only by default,
C{--trusted-proxy} names others) the address is the header's source, and
the connection reaches the protocol once the header is read, within
C{GuardPolicy.headerTimeout} (L{HEADER_TIMEOUT} unguarded); from any other peer the header is read,
removed and ignored.  A missing, malformed or oversized header drops the
connection with a logged L{ProxyHeaderError}.

Cost: the header is parsed once, at most C{16 + 65,535} bytes are held
for it (v2's length field), then every read goes straight through.

Design: docs/design/serving.md
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort, IStreamServerEndpoint
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from zope.interface import directlyProvides, implementer, providedBy

from framing import ProtocolError

V1_PREFIX = b"PROXY "
V1_MAX = 107
"""The longest v1 header, CRLF included (the protocol's own bound)."""
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V2_FIXED = 16
HEADER_TIMEOUT = 3.0
"""Seconds a trusted proxy has to send its header (it sends it at once), unless the protocol's guard says otherwise."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ProxyHeaderError(ProtocolError):
    """A connection did not start with a valid PROXY header; C{code} says how."""

    code = "proxy-header"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TrustedProxies:
    """
    The immediate peers whose PROXY headers are believed.

    @ivar networks: the trusted addresses and networks.
    @ivar unix: whether a peer on a UNIX socket is trusted (the socket's
        permissions say who may connect).
    """

    networks: tuple[Network, ...] = field(
        default_factory=lambda: (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
    )
    unix: bool = True

    @classmethod
    def parse(cls, text: str) -> TrustedProxies:
        """
        C{ADDR[,ADDR...]}, each an address or a network (C{10.0.0.5},
        C{10.1.0.0/16}, C{::1}); C{none} trusts nobody (every header's
        claims ignored), C{loopback} is the default.

        @raise ValueError: something that is not an address.
        """
        networks: list[Network] = []
        unix = False
        for item in filter(None, (part.strip() for part in text.split(","))):
            if item == "none":
                continue
            if item == "loopback":
                networks += TrustedProxies().networks
                unix = True
                continue
            networks.append(ipaddress.ip_network(item, strict=False))
        return cls(tuple(networks), unix)

    def trusts(self, peer: Any) -> bool:
        """Whether C{peer} (an C{IAddress}) is a trusted proxy."""
        host = getattr(peer, "host", None)
        if not isinstance(host, str):
            # No IP address: a UNIX socket's peer (its permissions say who may connect).
            return self.unix and hasattr(peer, "name")
        try:
            address = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped
        return any(address in network for network in self.networks)


def clientAddress(transport: Any) -> str:
    """
    The one address of a connection's client, for caps, throttles and
    logs: its host (or C{unix:NAME} on a UNIX socket).  Behind a
    L{ProxyHeaderProtocol} it is the PROXY header's source only if the
    immediate peer is a trusted proxy.
    """
    try:
        peer = transport.getPeer()
    except Exception:
        return "?"
    host = getattr(peer, "host", None)
    if isinstance(host, str):
        return host
    name = getattr(peer, "name", None)
    return f"unix:{name!r}" if name is not None else repr(peer)


def readHeader(data: bytes) -> tuple[Any, int] | None:
    """
    Read the PROXY header at the start of C{data}: C{(source, length)},
    C{source} an C{IPv4Address}/C{IPv6Address} or C{None} (LOCAL,
    UNKNOWN, UNIX), or C{None} if more bytes are needed.

    @raise ProxyHeaderError: it is not, or cannot become, a valid header.
    """
    if V2_SIGNATURE.startswith(data[:12]):
        return _readV2(data)
    if V1_PREFIX.startswith(data[:6]):
        return _readV1(data)
    raise ProxyHeaderError("no-proxy-header", "the connection did not start with a PROXY header")


def _readV1(data: bytes) -> tuple[Any, int] | None:
    end = data.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if len(data) >= V1_MAX:
            raise ProxyHeaderError("proxy-header-too-long", f"a v1 PROXY header has no CRLF in {V1_MAX} bytes")
        return None
    parts = data[:end].split(b" ")
    if len(parts) >= 2 and parts[1] == b"UNKNOWN":
        return None, end + 2
    if len(parts) != 6 or parts[1] not in (b"TCP4", b"TCP6"):
        raise ProxyHeaderError("bad-proxy-header", "a v1 PROXY header is not PROXY TCP4|TCP6 SRC DST SPORT DPORT")
    try:
        host, destination = (ipaddress.ip_address(part.decode("ascii")) for part in parts[2:4])
        port, destinationPort = int(parts[4]), int(parts[5])
    except (ValueError, UnicodeDecodeError):
        raise ProxyHeaderError("bad-proxy-header", "a v1 PROXY header's addresses are not addresses") from None
    version = 4 if parts[1] == b"TCP4" else 6
    if host.version != version or destination.version != version or not 0 <= min(port, destinationPort):
        raise ProxyHeaderError("bad-proxy-header", "a v1 PROXY header's addresses do not match its family")
    if max(port, destinationPort) > 65535:
        raise ProxyHeaderError("bad-proxy-header", "a v1 PROXY header's port is out of range")
    return _address(host, port), end + 2


def _readV2(data: bytes) -> tuple[Any, int] | None:
    if len(data) < V2_FIXED:
        return None
    command, family, length = data[12], data[13], struct.unpack("!H", data[14:16])[0]
    if command >> 4 != 2 or command & 0xF not in (0, 1):
        raise ProxyHeaderError("bad-proxy-header", f"a v2 PROXY header with version/command {command:#x}")
    if len(data) < V2_FIXED + length:
        return None
    total = V2_FIXED + length
    if command & 0xF == 0:  # LOCAL: the proxy's own connection (a health check)
        return None, total
    body = data[V2_FIXED:total]
    if family >> 4 == 1:
        if length < 12:
            raise ProxyHeaderError("bad-proxy-header", "a v2 PROXY header too short for IPv4 addresses")
        return _address(ipaddress.IPv4Address(body[:4]), struct.unpack("!H", body[8:10])[0]), total
    if family >> 4 == 2:
        if length < 36:
            raise ProxyHeaderError("bad-proxy-header", "a v2 PROXY header too short for IPv6 addresses")
        return _address(ipaddress.IPv6Address(body[:16]), struct.unpack("!H", body[32:34])[0]), total
    if family >> 4 in (0, 3):  # UNSPEC, UNIX: no network address to believe
        return None, total
    raise ProxyHeaderError("bad-proxy-header", f"a v2 PROXY header with address family {family:#x}")


def _address(host: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> Any:
    if host.version == 4:
        return IPv4Address("TCP", str(host), port)
    return IPv6Address("TCP", str(host), port)


class ProxyHeaderProtocol(ProtocolWrapper):
    """
    Reads the PROXY header of one connection, then passes everything
    through; C{getPeer()} is the client's one address (L{clientAddress}).
    """

    factory: ProxyHeaderFactory

    def __init__(self, factory: ProxyHeaderFactory, wrappedProtocol: Any) -> None:
        super().__init__(factory, wrappedProtocol)  # type: ignore[arg-type]
        self._buffer = b""
        self._reading = True
        self._trusted = False
        self._source: Any = None
        self._handedOver = False
        self._timeout: Any = None

    def makeConnection(self, transport: Any) -> None:
        # Not ProtocolWrapper's, which connects the wrapped protocol at once.
        directlyProvides(self, providedBy(transport))
        Protocol.makeConnection(self, transport)  # type: ignore[no-untyped-call]
        self.factory.registerProtocol(self)  # type: ignore[no-untyped-call]

    def connectionMade(self) -> None:
        self._trusted = self.factory.trusted.trusts(self._immediatePeer())
        if self._trusted:
            # The address is known only once the header is read: the protocol waits for it, but its guard
            # counts it from now, under the proxy's address (unguarded, it is not counted at all).
            timeout: float | None = HEADER_TIMEOUT
            guard = self._guard()
            if guard is not None:
                timeout = guard.policy.headerTimeout
                refusal = guard.awaitingHeader(clientAddress(self.transport), self._evicted)
                if refusal is not None:
                    self._fail(ProxyHeaderError("too-many-connections", refusal))
                    return
            if timeout is not None:
                self._timeout = self.factory.clock.callLater(timeout, self._timedOut, timeout)
        else:
            self._handOver()

    def _wrapped(self) -> Any:
        return self.wrappedProtocol

    def _immediatePeer(self) -> Any:
        transport: Any = self.transport
        return transport.getPeer() if transport is not None else None

    def _handOver(self) -> None:
        self._handedOver = True
        self._wrapped().makeConnection(self)

    def _guard(self) -> Any:
        """The guard of the wrapped protocol (or of the connection of a receiver that made its own), or C{None}."""
        wrapped = self.wrappedProtocol
        for candidate in (wrapped, getattr(wrapped, "connection", None)):
            guard = getattr(candidate, "guard", None)
            if hasattr(guard, "awaitingHeader"):
                return guard
        return None

    def _timedOut(self, timeout: float) -> None:
        self._timeout = None
        self._fail(ProxyHeaderError("proxy-header-timeout", f"no complete PROXY header within {timeout} s"))

    def _evicted(self) -> None:
        """Dropped, still waiting for its header, to make room for a newer connection (the guard's cap)."""
        if self._reading and not self._handedOver:
            self._fail(
                ProxyHeaderError(
                    "proxy-header-evicted",
                    "dropped while waiting for its PROXY header, the one waiting longest, to make room",
                )
            )

    def dataReceived(self, data: bytes) -> None:
        if not self._reading:
            self._wrapped().dataReceived(data)
            return
        self._buffer += data
        try:
            header = readHeader(self._buffer)
        except ProxyHeaderError as error:
            self._fail(error)
            return
        if header is None:
            return
        source, length = header
        rest, self._buffer, self._reading = self._buffer[length:], b"", False
        if self._timeout is not None and self._timeout.active():
            self._timeout.cancel()
        self._timeout = None
        if self._trusted:
            self._source = source
            self._handOver()
        elif source is not None:
            self.factory.untrustedHeader(self._immediatePeer(), source)
        if rest and self._handedOver and self.wrappedProtocol is not None:
            self._wrapped().dataReceived(rest)

    def _fail(self, error: ProxyHeaderError) -> None:
        self._reading = False
        self.factory.headerFailed(self._immediatePeer(), error)
        if self.transport is not None:
            self.transport.abortConnection()

    def getPeer(self) -> Any:
        if self._source is not None:
            return self._source
        return self._immediatePeer()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._timeout is not None and self._timeout.active():
            self._timeout.cancel()
        self._timeout = None
        self.factory.unregisterProtocol(self)  # type: ignore[no-untyped-call]
        if self._handedOver:
            self._wrapped().connectionLost(reason)
        elif self._trusted:
            # Never handed over: its guard counted it while it waited for its header.
            guard = self._guard()
            if guard is not None:
                guard.headerAbandoned()
        self.wrappedProtocol = None  # type: ignore[assignment]


class ProxyHeaderFactory(WrappingFactory):
    """
    Wraps a server factory: each connection starts with a PROXY header,
    believed only from C{trusted} proxies.

    @ivar trusted: the L{TrustedProxies}.
    @ivar untrusted: headers whose claims were ignored (their peer is no trusted proxy).
    @ivar failed: connections dropped for their header.
    """

    protocol = ProxyHeaderProtocol
    _log = Logger()

    def __init__(self, factory: Any, trusted: TrustedProxies, clock: Any = None) -> None:
        super().__init__(factory)  # type: ignore[no-untyped-call]
        if clock is None:
            from twisted.internet import reactor

            clock = reactor
        self.trusted = trusted
        self.clock = clock
        self.untrusted = 0
        self.failed = 0

    def logPrefix(self) -> str:
        prefix = getattr(self.wrappedFactory, "logPrefix", None)
        inner = str(prefix()) if prefix is not None else self.wrappedFactory.__class__.__name__
        return f"{inner} (PROXY)"

    def untrustedHeader(self, peer: Any, claimed: Any) -> None:
        """A peer that is no trusted proxy sent a header: its claim is ignored (logged 1st, 2nd, 4th, ... time)."""
        self.untrusted += 1
        if self.untrusted & (self.untrusted - 1) == 0:
            self._log.warn(
                "PROXY header from {peer}, which is no trusted proxy, claims {claimed}: ignored, the address "
                "is the peer's ({count} so far; see --trusted-proxy)",
                peer=str(getattr(peer, "host", peer)),
                claimed=str(getattr(claimed, "host", claimed)),
                count=self.untrusted,
            )

    def headerFailed(self, peer: Any, error: ProxyHeaderError) -> None:
        """A connection is dropped for its header (logged 1st, 2nd, 4th, ... time)."""
        self.failed += 1
        if self.failed & (self.failed - 1) == 0:
            self._log.warn(
                "Dropping connection from {peer}: {code}: {error} ({count} so far)",
                peer=str(getattr(peer, "host", peer)),
                code=error.code,
                error=str(error),
                count=self.failed,
            )


@implementer(IStreamServerEndpoint)
class ProxiedEndpoint:
    """A server endpoint whose connections start with a PROXY header (L{ProxyHeaderFactory})."""

    def __init__(self, endpoint: Any, trusted: TrustedProxies, clock: Any = None) -> None:
        self.endpoint = endpoint
        self.trusted = trusted
        self.clock = clock

    def listen(self, factory: Any) -> Deferred[IListeningPort]:
        listening: Deferred[IListeningPort] = self.endpoint.listen(
            ProxyHeaderFactory(factory, self.trusted, self.clock)
        )
        return listening


class BadEndpointDescription(ValueError):
    """
    A server endpoint description that does not parse (C{tcp:abc}, an
    unknown endpoint type, an argument the type does not take).  A
    C{ValueError}, as Twisted's own parse errors are, but whatever the
    parser raised (Twisted raises C{ValueError} for some mistakes and
    C{TypeError} for others), and naming the description.

    @ivar description: the description as given.
    @ivar reason: what the parser said.
    """

    def __init__(self, description: str, reason: Exception) -> None:
        super().__init__(f"{description}: not a server endpoint description ({reason})")
        self.description = description
        self.reason = reason


def serverEndpoint(reactor: Any, description: str, trusted: TrustedProxies | None = None) -> Any:
    """
    The server endpoint of C{description}, as C{serverFromString}, except
    that C{haproxy:...} is a L{ProxiedEndpoint} believing only C{trusted}
    (loopback if C{None}) instead of Twisted's, which believes anyone.

    @raise BadEndpointDescription: C{description} does not parse.
    @raise OSError: a file it names (an C{ssl:} key or certificate) cannot be read.
    """
    from twisted.internet.endpoints import serverFromString

    proxied = description.startswith("haproxy:")
    inner = description[len("haproxy:") :] if proxied else description
    try:
        endpoint = serverFromString(reactor, inner)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, KeyError) as error:
        raise BadEndpointDescription(description, error) from error
    if proxied:
        return ProxiedEndpoint(endpoint, trusted or TrustedProxies(), reactor)
    return endpoint
