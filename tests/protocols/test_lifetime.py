"""How a connection ends (L{protocols._lifetime}): dropped for a protocol error, then freed without the collector."""

from __future__ import annotations

import socket
import time
from typing import Any

from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.task import Clock
from twisted.internet.threads import deferToThread
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Decoder
from framing._encoder import MAX_ERROR_MESSAGE
from framing._errors import MalformedHeader, PeerError, error_token_text
from framing.wire import ERROR, PREAMBLE, encode_header
from protocols._lifetime import abortLingering, breakCycles, dropConnection
from protocols._proxyheader import ProxiedEndpoint, TrustedProxies

from .helpers import pytestTest, trialTest


class Transport:
    """What dropping asks of a connection's transport, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.pendingBytes = 123
        self.readingObserver: Any = object()
        self.bytesWritten = len(PREAMBLE)  # (the preamble went out; 0: it is still held)

    def abandonStreams(self, failure: Failure) -> None:
        self.calls.append(("abandonStreams", failure))

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def loseConnection(self) -> None:
        self.calls.append("loseConnection")

    def seal(self) -> None:
        self.calls.append("seal")

    def abortConnection(self) -> None:
        self.calls.append("abortConnection")

    def written(self) -> list[bytes]:
        """What was written, write by write."""
        return [call[1] for call in self.calls if isinstance(call, tuple) and call[0] == "write"]


class Config:
    dropGrace = 10.0

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def reactor(self) -> Clock:
        return self.clock


class Inbound:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


class Log:
    def __init__(self) -> None:
        self.warnings: list[dict[str, Any]] = []

    def warn(self, format: str, **fields: Any) -> None:
        self.warnings.append({"format": format, **fields})


class Protocol:
    """A connection's protocol as L{dropConnection} sees it."""

    def __init__(self, clock: Clock) -> None:
        self.transport = Transport()
        self.config = Config(clock)
        self.inbound = Inbound()
        self.log = Log()
        self.failure: Failure | None = None
        self.lingering: Any = None
        self.lost: list[Any] = []

    def peerName(self) -> str:
        return "peer"

    def connectionLost(self, reason: Any) -> None:
        self.lost.append(reason)


class DropTests(SynchronousTestCase):
    """The peer is told why, the close is polite but bounded, and connectionLost sees the error."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.protocol = Protocol(self.clock)

    def test_peerToldAndClosed(self) -> None:
        """
        Delivery stops, queued streams fail, an ERROR token says why, the
        connection closes, and the transport is sealed: nothing after the ERROR.
        """
        error = MalformedHeader("bad header")
        failure = dropConnection(self.protocol, error)
        body = error_token_text(error).encode()
        self.assertIs(failure.value, error)
        self.assertIs(self.protocol.failure, failure)
        self.assertTrue(self.protocol.inbound.stopped)
        self.assertEqual(
            self.protocol.transport.calls,
            [("abandonStreams", failure), ("write", encode_header(ERROR, len(body)) + body), "loseConnection", "seal"],
        )
        self.assertEqual(self.protocol.log.warnings, [])  # not logged unless asked
        self.assertIsNone(error.__traceback__)

    def test_heldPreambleFirst(self) -> None:
        """
        Nothing written yet (the preamble still held): the preamble goes
        before the ERROR, after the rest was dropped, so that the peer reads
        the ERROR where an ERROR may be.
        """
        self.protocol.transport.bytesWritten = 0
        error = MalformedHeader("bad header")
        failure = dropConnection(self.protocol, error)
        body = error_token_text(error).encode()
        self.assertEqual(
            self.protocol.transport.calls,
            [
                ("abandonStreams", failure),
                ("write", PREAMBLE),
                ("write", encode_header(ERROR, len(body)) + body),
                "loseConnection",
                "seal",
            ],
        )

    def test_heldPreambleWithoutError(self) -> None:
        """For the peer's own ERROR, a held preamble still goes out (alone): the peer's stream was a chunkwire one."""
        self.protocol.transport.bytesWritten = 0
        dropConnection(self.protocol, PeerError("you broke"))
        self.assertEqual(self.protocol.transport.written(), [PREAMBLE])

    def test_peerErrorNotEchoed(self) -> None:
        """An error the peer sent is not sent back to it."""
        dropConnection(self.protocol, PeerError("you broke"))
        self.assertEqual(self.protocol.transport.written(), [])

    def test_messageBounded(self) -> None:
        """The ERROR body is at most L{MAX_ERROR_MESSAGE} bytes, whatever the error's text."""
        error = MalformedHeader("x" * 10_000)
        dropConnection(self.protocol, error)
        [written] = self.protocol.transport.written()
        self.assertEqual(
            written, encode_header(ERROR, MAX_ERROR_MESSAGE) + error_token_text(error).encode()[:MAX_ERROR_MESSAGE]
        )

    def test_noMethodReplaced(self) -> None:
        """
        The error is left in the protocol's failure (which its lossReason
        reads), not in a connectionLost shadowing the class's on the instance.
        """
        failure = dropConnection(self.protocol, MalformedHeader("bad"))
        self.assertIs(self.protocol.failure, failure)
        self.assertNotIn("connectionLost", vars(self.protocol))

    def test_logged(self) -> None:
        """Asked to, it logs the peer, the error's code and its text."""
        dropConnection(self.protocol, MalformedHeader("bad"), logged=True)
        [warning] = self.protocol.log.warnings
        self.assertEqual((warning["peer"], warning["code"]), ("peer", MalformedHeader.code))

    def test_abortedAfterGrace(self) -> None:
        """A connection still open C{dropGrace} seconds later is aborted, and that is logged."""
        dropConnection(self.protocol, MalformedHeader("bad"))
        self.clock.advance(9.9)
        self.assertNotIn("abortConnection", self.protocol.transport.calls)
        self.clock.advance(0.1)
        self.assertEqual(self.protocol.transport.calls[-1], "abortConnection")
        self.assertIsNone(self.protocol.lingering)
        [warning] = self.protocol.log.warnings
        self.assertEqual((warning["pending"], warning["grace"]), (123, 10.0))

    def test_lingeringIsTheTimer(self) -> None:
        """C{protocol.lingering} is the abort timer, so connectionLost can cancel it."""
        dropConnection(self.protocol, MalformedHeader("bad"))
        self.protocol.lingering.cancel()
        self.clock.advance(60)
        self.assertNotIn("abortConnection", self.protocol.transport.calls)

    def test_abortLingering(self) -> None:
        """Called directly, it aborts and forgets the timer."""
        self.protocol.lingering = object()
        abortLingering(self.protocol, 5.0)
        self.assertEqual((self.protocol.transport.calls, self.protocol.lingering), (["abortConnection"], None))


class Spent:
    """A decoder or encoder whose parts refer to each other."""

    def __init__(self) -> None:
        self.me = self
        self.table = {"method": self.__init__}


class BreakCyclesTests(SynchronousTestCase):
    """After breakCycles, nothing of a closed connection refers back to itself."""

    def test_stateDropped(self) -> None:
        """Config and registry go; the reading observer is cleared; decoder and encoder emptied."""
        protocol = Protocol(Clock())
        protocol.registry = object()  # type: ignore[attr-defined]
        decoder, encoder = Spent(), Spent()
        protocol.decoder, protocol.encoder = decoder, encoder  # type: ignore[attr-defined]
        breakCycles(protocol)
        for name in ("config", "registry"):
            self.assertNotIn(name, vars(protocol))
        self.assertIsNone(protocol.transport.readingObserver)
        self.assertEqual((vars(decoder), vars(encoder)), ({}, {}))

    def test_noTransport(self) -> None:
        """A protocol never connected (no transport, no decoder) is left as it is."""

        class Bare:
            pass

        bare = Bare()
        breakCycles(bare)
        self.assertEqual(vars(bare), {})


# -- on a real reactor -------------------------------------------------------------

HTTP = b"GET / HTTP/1.1\r\n\r\n"
DEADLINE = 30.0


def _sendAndReadToEnd(port: int, data: bytes) -> tuple[bytes, bool]:
    """
    Connect, send C{data} at once, and read what the server sends until it
    closes or L{DEADLINE} passes (in a thread: it blocks).

    @return: the bytes read, and whether the server closed (EOF) in time.
    """
    deadline = time.monotonic() + DEADLINE
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as peer:
        peer.sendall(data)
        received = b""
        while (left := deadline - time.monotonic()) > 0:
            peer.settimeout(left)
            try:
                chunk = peer.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                return received, True
            received += chunk
        return received, False


async def proxiedFirstBytesBreakARule(reactor: Any) -> None:
    """
    An RPC server behind a trusted PROXY header: the header and bytes that
    are no preamble come in one read, so the connection is made and dropped
    in the turn its preamble is held.  The peer reads the preamble, then an
    ERROR naming the rule, then EOF (it read the ERROR alone: a bad preamble).
    """
    from protocols.rpc import Referenceable, serverFactory

    factory = serverFactory(Referenceable(), clock=reactor)
    endpoint = ProxiedEndpoint(TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1"), TrustedProxies(), reactor)
    port = await endpoint.listen(factory)
    try:
        header = b"PROXY TCP4 192.0.2.7 127.0.0.1 40000 4000\r\n"
        received, closed = await deferToThread(_sendAndReadToEnd, port.getHost().port, header + HTTP)
    finally:
        await port.stopListening()
    assert closed, received
    assert received.startswith(PREAMBLE), received
    try:
        Decoder().feed(received)
    except PeerError as error:
        assert "the peer reported: bad-preamble: " in str(error), error
    else:
        raise AssertionError(f"no ERROR in {received!r}")


class RealReactorTests(TestCase):
    """Dropped in the turn its preamble is held, on a real socket, under trial."""

    test_proxied_first_bytes_break_a_rule = trialTest(proxiedFirstBytesBreakARule)


test_proxied_first_bytes_break_a_rule = pytestTest(proxiedFirstBytesBreakARule)
