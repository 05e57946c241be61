"""The blocking client (L{protocols.blocking}) against scripted servers on real sockets: errors, timeouts, threads.

These servers are threads of this process speaking chunkwire by hand
(L{framing} and L{framing.rpc}), so each case can do what a real server
would not (stay silent, answer a call never made, close mid-call); the
cases against the real example server are in C{test_blocking_kv}.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, Registry
from framing._encoder import error_token
from framing._errors import PeerError
from framing.rpc._errors import (
    NO_SUCH_OBJECT,
    VIOLATION,
    CallTimedOut,
    DeadReferenceError,
    NoSuchMethod,
    UnexpectedAnswer,
    describe,
    noSuchMethod,
)
from framing.rpc._limits import CallLimits
from framing.rpc._wire import (
    ANSWER,
    CALL,
    CANCEL,
    FAIL,
    GOAWAY,
    NO_ANSWER,
    Message,
    addMessageTypes,
)
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PONG, PREAMBLE, encode_header
from protocols.blocking import ConnectionLost, ServerSilent, connect, parseAddress
from protocols.options import ClientOptions
from tests.processes import ENV, ROOT

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""

REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)


class ScriptedPeer:
    """The server's side of one accepted connection: read messages, send messages."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.decoder = Decoder(registry=REGISTRY)
        self.encoder = Encoder(REGISTRY)
        self.received: list[Any] = []

    def next(self) -> Any:
        """The next top-level object the client sent (C{None} once it closed)."""
        while not self.received:
            chunk = self.connection.recv(65536)
            if not chunk:
                return None
            self.received.extend(self.decoder.feed(chunk))
        return self.received.pop(0)

    def send(self, message: Message) -> None:
        """Send one message."""
        self.connection.sendall(self.encoder.encode(message))

    def rest(self) -> bytes:
        """Every byte the client sends from now until it closes, undecoded (none read by L{next} yet)."""
        data = b""
        while chunk := self.connection.recv(65536):
            data += chunk
        return data


ERROR_UNEXPECTED = error_token(UnexpectedAnswer("an answer to request 99, which was never made"))
"""The ERROR a client sends (the bytes the Twisted connection sends) for an ANSWER to request 99, never made."""


def assertToldWhy(test: SynchronousTestCase, received: list[bytes], code: str) -> None:
    """C{received} is one peer's bytes up to EOF: a preamble, then an ERROR naming C{code}, as a decoder reads them."""
    [written] = received
    test.assertTrue(written.startswith(PREAMBLE), written)
    with test.assertRaises(PeerError) as raised:
        Decoder().feed(written)
    test.assertIn(f"the peer reported: {code}: ", str(raised.exception))


class ScriptedServer:
    """A listening socket whose one connection is served by C{script(peer)} in a thread."""

    def __init__(self, test: SynchronousTestCase, script: Callable[[ScriptedPeer], None], preamble: bool = True):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = int(self.listener.getsockname()[1])
        self.errors: list[BaseException] = []
        self.done = threading.Event()
        self._script, self._preamble = script, preamble
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        test.addCleanup(self.listener.close)

    def _serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
            with connection:
                if self._preamble:
                    connection.sendall(PREAMBLE)
                self._script(ScriptedPeer(connection))
        except BaseException as error:
            self.errors.append(error)
        finally:
            self.done.set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def answerAll(peer: ScriptedPeer) -> None:
    """Answer each CALL with its method name and arguments, until the client closes."""
    while True:
        message = peer.next()
        if message is None:
            return
        if type(message) is Message and message[0] == CALL:
            _, requestId, _, name, args, kwargs = message
            peer.send(Message((ANSWER, requestId, [name, list(args), kwargs])))


class AddressTests(SynchronousTestCase):
    """Addresses are "host:port", "[v6]:port" or (host, port); anything else is a clear ValueError."""

    def test_forms(self) -> None:
        """The three forms give the host and the port."""
        self.assertEqual(parseAddress("example.org:8760"), ("example.org", 8760))
        self.assertEqual(parseAddress("[::1]:8760"), ("::1", 8760))
        self.assertEqual(parseAddress(("127.0.0.1", 8760)), ("127.0.0.1", 8760))

    def test_endpointDescriptionRefused(self) -> None:
        """A Twisted endpoint description is refused, saying what form is expected."""
        error = self.assertRaises(ValueError, parseAddress, "tcp:host=127.0.0.1:port=8760")
        self.assertIn("host:port", str(error))


class NoTwistedTests(SynchronousTestCase):
    """Importing and using the blocking client loads no Twisted."""

    def test_importLoadsNoTwisted(self) -> None:
        """
        A fresh interpreter that imports protocols.blocking (and calls connect's parts), and the bulk
        clients (protocols.blockingbulk, protocols.asynciobulk), has no twisted module.
        """
        probe = (
            "import json, sys\n"
            "import protocols.blocking, protocols.blockingbulk, protocols.asynciobulk\n"
            "from protocols.blocking import connect, parseAddress\n"
            "parseAddress('127.0.0.1:1')\n"
            "print(json.dumps(sorted(sys.modules)))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        modules = json.loads(result.stdout)
        self.assertIn("protocols.blocking", modules)
        self.assertIn("framing.rpc._calltable", modules)
        self.assertIn("framing.bulk._streams", modules)
        self.assertEqual([name for name in modules if name == "twisted" or name.startswith("twisted.")], [])

    def test_protocolsNamesStillThere(self) -> None:
        """protocols' public names still resolve, loaded when asked for."""
        import protocols
        from protocols._base import TokenProtocol
        from protocols._coalescing import CoalescingTransport

        self.assertIs(protocols.TokenProtocol, TokenProtocol)
        self.assertIs(protocols.CoalescingTransport, CoalescingTransport)
        self.assertRaises(AttributeError, getattr, protocols, "NoSuchName")


class CallTests(SynchronousTestCase):
    """Calls block until their answer, and fail as the Twisted client's do."""

    def test_resultAndArguments(self) -> None:
        """A call returns the server's ANSWER; its arguments and keyword arguments arrived as given."""
        server = ScriptedServer(self, answerAll)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            result = connection.root.callRemote("echo", 1, b"two", three=[3.0])
        self.assertEqual(result, ["echo", [1, b"two"], {"three": [3.0]}])

    def test_failRebuilt(self) -> None:
        """A FAIL is raised as the error it describes (a NoSuchMethod here, with its message)."""

        def script(peer: ScriptedPeer) -> None:
            message = peer.next()
            typeName, text, details = describe(noSuchMethod("gte", ["get", "put"]))
            peer.send(Message((FAIL, message[1], typeName, text, None, details)))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            error = self.assertRaises(NoSuchMethod, connection.root.callRemote, "gte")
        self.assertIn("did you mean 'get'", str(error))

    def test_afterCloseDead(self) -> None:
        """A call on a closed connection fails at once with DeadReferenceError; nothing is sent."""
        server = ScriptedServer(self, answerAll)
        connection = connect(server.address, options=ClientOptions(timeout=HANG))
        connection.close()
        self.assertRaises(DeadReferenceError, connection.root.callRemote, "get", "k")

    def test_threadsShareOneConnection(self) -> None:
        """Calls from several threads at once each get their own answer, answered out of order by the server."""

        def script(peer: ScriptedPeer) -> None:
            # Answer in batches of four, last call first: answers never come in the order of the calls.
            batch: list[Message] = []
            while True:
                message = peer.next()
                if message is None:
                    return
                batch.append(message)
                if len(batch) == 4:
                    for call in reversed(batch):
                        peer.send(Message((ANSWER, call[1], call[4])))
                    batch = []

        server = ScriptedServer(self, script)
        results: dict[int, list[Any]] = {}
        with connect(
            server.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
        ) as connection:

            def work(worker: int) -> None:
                results[worker] = [connection.root.callRemote("echo", worker, n) for n in range(25)]

            threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(HANG)
        self.assertEqual(results, {worker: [(worker, n) for n in range(25)] for worker in range(4)})

    def test_aloneWakesNobody(self) -> None:
        """
        One thread calling alone reads its own answers and wakes no other caller (there is none): the
        readers' notify_all is never called, while the calls of threads sharing the connection
        (L{test_threadsShareOneConnection}) wake each other.
        """
        server = ScriptedServer(self, answerAll)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            wakes: list[int] = []
            notifyAll = connection._changed.notify_all

            def counted() -> None:
                wakes.append(1)
                notifyAll()

            connection._changed.notify_all = counted  # type: ignore[method-assign]
            results = [connection.root.callRemote("echo", n) for n in range(20)]
        self.assertEqual(results, [["echo", [n], {}] for n in range(20)])
        self.assertEqual(wakes, [1])  # (once: when close() ended the connection, which wakes every caller)

    def test_callRemoteOnly(self) -> None:
        """callRemoteOnly sends a CALL numbered NO_ANSWER and waits for nothing; the next call is numbered 1."""
        seen: list[Any] = []

        def script(peer: ScriptedPeer) -> None:
            seen.append(peer.next())
            call = peer.next()
            seen.append(call)
            peer.send(Message((ANSWER, call[1], "answered")))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            self.assertIsNone(connection.root.callRemoteOnly("log", "line"))
            self.assertEqual(connection.root.callRemote("get"), "answered")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual([message[:4] for message in seen], [(CALL, NO_ANSWER, 0, "log"), (CALL, 1, 0, "get")])

    def test_serverCallsRefused(self) -> None:
        """The server's calls to this side are answered: NoSuchObject (nothing is exported yet), or the refusal."""
        answers: list[Any] = []

        def script(peer: ScriptedPeer) -> None:
            call = peer.next()
            peer.send(Message((CALL, 7, 3, "changed", None, "k")))
            answers.append(peer.next())
            peer.send(Message((CALL, 8, 3, "changed", ("not", "a", "dict"), "k")))
            answers.append(peer.next())
            peer.send(Message((ANSWER, call[1], "done")))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            self.assertEqual(connection.root.callRemote("watch"), "done")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(answers[0][:3], (FAIL, 7, NO_SUCH_OBJECT))
        self.assertEqual(answers[1][:3], (FAIL, 8, VIOLATION))
        self.assertEqual(answers[1][5], ("kind-refused", "kwargs"))

    def test_goAway(self) -> None:
        """After the server's GOAWAY the call in flight still gets its answer; a new call raises DeadReferenceError."""

        def script(peer: ScriptedPeer) -> None:
            call = peer.next()
            peer.send(Message((GOAWAY, 5000)))
            peer.send(Message((ANSWER, call[1], "last")))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            self.assertEqual(connection.root.callRemote("get"), "last")
            error = self.assertRaises(DeadReferenceError, connection.root.callRemote, "get")
        self.assertIn("going away", str(error))


class TimeoutTests(SynchronousTestCase):
    """A silent or slow server is a timely typed error, never a hang."""

    def test_noPreamble(self) -> None:
        """A server that accepts and says nothing fails connect with ServerSilent within its timeout."""
        server = ScriptedServer(self, lambda peer: peer.next(), preamble=False)
        started = time.monotonic()
        error = self.assertRaises(ServerSilent, connect, server.address, options=ClientOptions(timeout=0.5))
        self.assertLess(time.monotonic() - started, HANG)
        self.assertIn("no chunkwire preamble", str(error))

    def test_notChunkwire(self) -> None:
        """A server that speaks something else fails connect with a ProtocolError, not a hang."""
        from framing import ProtocolError

        def script(peer: ScriptedPeer) -> None:
            peer.connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        server = ScriptedServer(self, script, preamble=False)
        self.assertRaises(ProtocolError, connect, server.address, options=ClientOptions(timeout=HANG))

    def test_notChunkwireToldWhy(self) -> None:
        """
        A server whose first bytes are no preamble reads this side's
        preamble, then the ERROR naming the rule, then EOF: the preamble is
        sent before anything is read, so the farewell never goes first.
        """
        from framing import ProtocolError

        received: list[bytes] = []

        def script(peer: ScriptedPeer) -> None:
            peer.connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            received.append(peer.rest())

        server = ScriptedServer(self, script, preamble=False)
        self.assertRaises(ProtocolError, connect, server.address, options=ClientOptions(timeout=HANG))
        self.assertTrue(server.done.wait(HANG))
        assertToldWhy(self, received, "bad-preamble")

    def test_callTimedOut(self) -> None:
        """A call unanswered within callTimeout raises CallTimedOut, the server gets a CANCEL, the connection lives."""
        cancels: list[Any] = []

        def script(peer: ScriptedPeer) -> None:
            first = peer.next()
            cancel = peer.next()
            cancels.append((first[1], cancel))
            second = peer.next()
            peer.send(Message((ANSWER, first[1], "late")))  # the one late answer expected: ignored
            peer.send(Message((ANSWER, second[1], "fresh")))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(
            server.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=0.3))
        ) as connection:
            error = self.assertRaises(CallTimedOut, connection.root.callRemote, "slow")
            self.assertEqual((error.name, error.seconds), ("slow", 0.3))
            connection.callTimeout = HANG
            self.assertEqual(connection.root.callRemote("next"), "fresh")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(cancels, [(1, Message((CANCEL, 1)))])

    def test_timeoutsSetLater(self) -> None:
        """
        C{callTimeout} and C{silenceTimeout} set on a connection in use are
        heeded by the next call's reads: the socket's receive timeout (the
        tick) becomes an eighth of the shortest bound at its next read, though
        a read checks only the wait's own bound to keep it; and a send is
        bounded by the new C{silenceTimeout} at once (SO_SNDTIMEO).
        """
        server = ScriptedServer(self, answerAll)

        def timeout(connection: Any, option: int) -> float:
            seconds, microseconds = struct.unpack("ll", connection._socket.getsockopt(socket.SOL_SOCKET, option, 16))
            return float(seconds + microseconds / 1_000_000)

        def tick(connection: Any) -> float:
            return timeout(connection, socket.SO_RCVTIMEO)

        with connect(server.address, options=ClientOptions(timeout=None, silenceTimeout=None)) as connection:
            self.assertEqual(connection.root.callRemote("first"), ["first", [], {}])
            self.assertEqual(tick(connection), 0.0)  # (no bound: reads wait for good)
            connection.callTimeout = 8.0
            self.assertEqual(connection.root.callRemote("second"), ["second", [], {}])
            self.assertEqual(tick(connection), 1.0)
            connection.silenceTimeout = 4.0
            self.assertEqual(connection.root.callRemote("third"), ["third", [], {}])
            self.assertEqual(tick(connection), 0.5)
            self.assertEqual((connection.callTimeout, connection.silenceTimeout), (8.0, 4.0))
            self.assertEqual(timeout(connection, socket.SO_SNDTIMEO), 4.0)  # (a send is bounded by it too)
            connection.silenceTimeout = None
            self.assertEqual(timeout(connection, socket.SO_SNDTIMEO), 0.0)

    def test_silentServer(self) -> None:
        """A server that stops answering (PINGs too) fails the waiting call with ServerSilent after silenceTimeout."""
        pings: list[Any] = []

        def script(peer: ScriptedPeer) -> None:
            peer.next()
            peer.next()  # (the connection's end; meanwhile the client's PING is counted)
            pings.extend(peer.decoder.control_events)

        server = ScriptedServer(self, script)
        started = time.monotonic()
        with connect(server.address, options=ClientOptions(timeout=HANG, silenceTimeout=0.6)) as connection:
            error = self.assertRaises(ServerSilent, connection.root.callRemote, "get", "k")
        self.assertLess(time.monotonic() - started, HANG)
        self.assertIn("127.0.0.1", str(error))
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(len(pings), 1)

    def test_idleTimeIsNoSilence(self) -> None:
        """
        The time no call waited does not count as the server's silence: after
        a call that timed out (its reads found nothing) and an idle spell longer
        than silenceTimeout, a call answered promptly gets its answer.
        """

        def script(peer: ScriptedPeer) -> None:
            peer.next()  # (the call that times out)
            peer.next()  # (its CANCEL)
            second = peer.next()
            time.sleep(0.15)  # (long enough for the client's reads to time out, a tick each)
            peer.send(Message((ANSWER, second[1], "prompt")))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(
            server.address,
            options=ClientOptions(timeout=HANG, silenceTimeout=1.2, callLimits=CallLimits(callTimeout=0.3)),
        ) as connection:
            self.assertRaises(CallTimedOut, connection.root.callRemote, "slow")
            time.sleep(1.4)
            self.assertEqual(connection.root.callRemote("next"), "prompt")
        self.assertTrue(server.done.wait(HANG))

    def test_pongKeepsCallAlive(self) -> None:
        """A slow method's server that answers PINGs is not silent: the call gets its answer after several windows."""

        def script(peer: ScriptedPeer) -> None:
            call = peer.next()
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                peer.connection.settimeout(0.05)
                try:
                    peer.received.extend(peer.decoder.feed(peer.connection.recv(65536)))
                except TimeoutError:
                    pass
                for event in peer.decoder.control_events:
                    peer.connection.sendall(encode_header(PONG, event.id))
                peer.decoder.control_events.clear()
            peer.connection.settimeout(None)
            peer.send(Message((ANSWER, call[1], "done")))
            peer.next()

        server = ScriptedServer(self, script)
        with connect(server.address, options=ClientOptions(timeout=HANG, silenceTimeout=0.4)) as connection:
            self.assertEqual(connection.root.callRemote("slow"), "done")


class LostTests(SynchronousTestCase):
    """The connection's end fails every waiting call with the reason, naming the call."""

    def test_closedMidCall(self) -> None:
        """The server closing while a call waits fails it with ConnectionLost naming the method and the server."""
        server = ScriptedServer(self, lambda peer: peer.next())
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            error = self.assertRaises(ConnectionLost, connection.root.callRemote, "get", "k")
            self.assertIn("'get'", str(error))
            self.assertIn(server.address, str(error))
            self.assertRaises(DeadReferenceError, connection.root.callRemote, "get", "k")

    def test_unexpectedAnswer(self) -> None:
        """
        An answer to a call never made ends the connection: the waiting
        call fails with UnexpectedAnswer, and the server is sent the ERROR
        saying why (wire format 12.3, 12.4: the Twisted connection's
        bytes), then the connection is closed.
        """
        received: list[bytes] = []

        def script(peer: ScriptedPeer) -> None:
            peer.next()
            peer.send(Message((ANSWER, 99, "stray")))
            received.append(peer.rest())

        server = ScriptedServer(self, script)
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            error = self.assertRaises(UnexpectedAnswer, connection.root.callRemote, "get")
            self.assertIn("never made", str(error))
            self.assertTrue(server.done.wait(HANG))
        self.assertEqual(received, [ERROR_UNEXPECTED])

    def test_refusedAnswer(self) -> None:
        """An answer this side refuses (over its limits) fails that call alone with the violation; the next works."""
        from framing import Limits, Violation

        def script(peer: ScriptedPeer) -> None:
            first = peer.next()
            peer.send(Message((ANSWER, first[1], "x" * 2000)))
            answerAll(peer)

        server = ScriptedServer(self, script)
        with connect(
            server.address, options=ClientOptions(timeout=HANG, limits=Limits(max_string_length=1000))
        ) as connection:
            error = self.assertRaises(Violation, connection.root.callRemote, "big")
            self.assertIn("in the answer to 'big'", str(error))
            self.assertEqual(connection.root.callRemote("small"), ["small", [], {}])
