"""The sans-IO client session (L{framing.rpc._session.ClientSession}): calls to bytes, bytes to settled calls."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, EncodingError, Limits, ProtocolError, Registry, Violation
from framing._encoder import error_token
from framing._errors import MalformedHeader, PeerError, ResourceExhausted
from framing._limits import DEFAULT_LIMITS
from framing._refusals import TooManyRefusals
from framing.rpc._context import Scope, sentWith
from framing.rpc._drain import DrainDeadlineExceeded, GoingAway
from framing.rpc._errors import (
    NO_SUCH_OBJECT,
    VIOLATION,
    CallLost,
    ClosedBeforePreamble,
    ConnectionLost,
    DeadReferenceError,
    NoSuchMethod,
    NotAnRpcMessage,
    ServerSilent,
    UnexpectedAnswer,
    describe,
    noSuchMethod,
)
from framing.rpc._referenceable import Referenceable
from framing.rpc._session import UNSCOPED, ClientSession, SessionState
from framing.rpc._signatures import remote
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, GOAWAY, NO_ANSWER, Message, addMessageTypes, callContext
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import ERROR, PING, PONG, PREAMBLE, encode_header

from ..test_cores import COMPILED, core, differential, values

REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)
PEER = "127.0.0.1:8760"


class Callback(Referenceable):
    """An object of the client's the server calls."""

    @remote
    def add(self, number: int) -> int:
        return number + 1


class Server:
    """The server's side, by hand: what it reads of the session's bytes, and the bytes it sends."""

    def __init__(self) -> None:
        self.decoder = Decoder(registry=REGISTRY)
        self.encoder = Encoder(REGISTRY)

    def read(self, data: bytes) -> list[Any]:
        """The messages in C{data} (the client's preamble first of all is taken in passing)."""
        return self.decoder.feed(data)

    def send(self, *messages: Message) -> bytes:
        """The bytes of C{messages}."""
        return b"".join(self.encoder.encode(message) for message in messages)


def opened(limits: Limits | None = None) -> tuple[ClientSession[str], Server]:
    """A session whose preamble went both ways."""
    session: ClientSession[str] = ClientSession(PEER, limits=limits)
    server = Server()
    server.read(session.start())
    session.receive(PREAMBLE)
    return session, server


class PreambleTests(SynchronousTestCase):
    """The session opens with the preamble both ways."""

    def test_preamble(self) -> None:
        """start() is the preamble; the session is ready once the server's whole preamble came, in any cut."""
        session: ClientSession[str] = ClientSession(PEER)
        self.assertEqual(session.start(), PREAMBLE)
        self.assertFalse(session.ready)
        self.assertEqual(session.receive(PREAMBLE[:3]), [])
        self.assertEqual(session.state, SessionState.WANT_PREAMBLE)
        session.receive(PREAMBLE[3:])
        self.assertTrue(session.ready)
        self.assertEqual(session.state, SessionState.OPEN)

    def test_peerClosed(self) -> None:
        """A clean close before any byte is ClosedBeforePreamble (a TLS server did it); after one byte, not."""
        silent: ClientSession[str] = ClientSession(PEER)
        reason = silent.peerClosed()
        self.assertIsInstance(reason, ClosedBeforePreamble)
        self.assertIn(PEER, str(reason))
        self.assertIn("TLS", str(reason))
        for heard in (PREAMBLE[:1], PREAMBLE):
            session: ClientSession[str] = ClientSession(PEER)
            session.receive(heard)
            reason = session.peerClosed()
            self.assertNotIsInstance(reason, ClosedBeforePreamble)
            self.assertIsInstance(reason, ConnectionLost)

    def test_callsBeforePreamble(self) -> None:
        """
        Calls may be made before the server's preamble came (the states
        other than OPEN take the longer check): the same CALL bytes, then
        answered as any; a name that is no str is still refused.
        """
        session: ClientSession[str] = ClientSession(PEER)
        server = Server()
        server.read(session.start())
        self.assertRaises(TypeError, session.call, "w", 0, b"get", (), {})
        requestId, data = session.call("w", 0, "echo", (1,), {})
        self.assertEqual(session.state, SessionState.WANT_PREAMBLE)
        self.assertEqual(server.read(data), [Message((CALL, requestId, 0, "echo", (1,), {}))])
        self.assertEqual(session.receive(PREAMBLE + server.send(Message((ANSWER, requestId, 1)))), [("w", 1, None)])
        self.assertEqual(session.state, SessionState.OPEN)

    def test_notChunkwire(self) -> None:
        """Something else than the preamble ends the session with a ProtocolError; receive raises nothing."""
        session: ClientSession[str] = ClientSession(PEER)
        self.assertEqual(session.receive(b"HTTP/1.1 400 Bad Request\r\n\r\n"), [])
        self.assertEqual(session.state, SessionState.ENDED)
        self.assertIsInstance(session.failure, ProtocolError)
        self.assertTrue(session.ready)


class CallTests(SynchronousTestCase):
    """Calls become CALL bytes; the server's answers settle their waiters."""

    def test_callBytes(self) -> None:
        """A call is numbered from 1 and its bytes are its CALL, arguments and keyword arguments included."""
        session, server = opened()
        requestId, data = session.call("w", 0, "echo", (1, b"two"), {"three": 3})
        self.assertEqual(requestId, 1)
        self.assertEqual(server.read(data), [Message((CALL, 1, 0, "echo", (1, b"two"), {"three": 3}))])
        self.assertEqual(len(session), 1)

    def test_answersInAnyOrder(self) -> None:
        """Answers that come in any order, several in one chunk, settle each its own waiter, in arrival order."""
        session, server = opened()
        ids = [session.call(f"waiter {n}", 0, "get", (n,), {})[0] for n in range(3)]
        settled = session.receive(server.send(*(Message((ANSWER, i, f"result {i}")) for i in reversed(ids))))
        self.assertEqual(settled, [(f"waiter {i - 1}", f"result {i}", None) for i in reversed(ids)])
        self.assertEqual(len(session), 0)

    def test_failRebuilt(self) -> None:
        """A FAIL settles its call with the error it describes."""
        session, server = opened()
        requestId, _ = session.call("w", 0, "gte", (), {})
        typeName, text, details = describe(noSuchMethod("gte", ["get"]))
        [(waiter, result, error)] = session.receive(
            server.send(Message((FAIL, requestId, typeName, text, None, details)))
        )
        self.assertEqual((waiter, result), ("w", None))
        self.assertIsInstance(error, NoSuchMethod)
        self.assertIn("did you mean 'get'", str(error))

    def test_refusedAnswer(self) -> None:
        """An answer over this side's limits settles its call alone with the Violation naming it; the session stays."""
        session, server = opened(Limits(max_string_length=100))
        first, _ = session.call("big", 0, "big", (), {})
        second, _ = session.call("small", 0, "small", (), {})
        settled = session.receive(server.send(Message((ANSWER, first, "x" * 200)), Message((ANSWER, second, "ok"))))
        self.assertEqual([(waiter, result) for waiter, result, _ in settled], [("big", None), ("small", "ok")])
        self.assertIsInstance(settled[0][2], Violation)
        self.assertIn(f"in the answer to 'big' from {PEER}", str(settled[0][2]))
        self.assertEqual(session.state, SessionState.OPEN)

    def test_failedCallsToldToExtension(self) -> None:
        """
        The extension (bulk streams) is told of each call that failed by the
        server's answer, a FAIL or an answer refused here alike, so that a
        stream its CALL carried is given up either way; not of one answered.
        """

        class Recorder:
            controlTypes: tuple[type, ...] = ()

            def __init__(self) -> None:
                self.failed: list[tuple[int, bool]] = []

            def install(self, registry: Registry, encoder: Encoder) -> None:
                pass

            def messageEncoded(self, data: bytes, requestId: int = NO_ANSWER) -> bytes:
                return data

            def callFailed(self, requestId: int, cancelled: bool) -> None:
                self.failed.append((requestId, cancelled))

            def messageDropped(self) -> None:
                pass

            def received(self, obj: Any) -> object:
                return None

            def takeSettled(self) -> list[Any]:
                return []

            def piecesToSend(self) -> list[bytes]:
                return []

            def ended(self, reason: BaseException) -> list[Any]:
                return []

        extension = Recorder()
        session: ClientSession[str] = ClientSession(PEER, limits=Limits(max_string_length=100), extension=extension)
        server = Server()
        server.read(session.start())
        session.receive(PREAMBLE)
        refused, _ = session.call("big", 0, "big", (), {})
        failed, _ = session.call("gte", 0, "gte", (), {})
        answered, _ = session.call("small", 0, "small", (), {})
        typeName, text, details = describe(noSuchMethod("gte", ["get"]))
        session.receive(
            server.send(
                Message((ANSWER, refused, "x" * 200)),
                Message((FAIL, failed, typeName, text, None, details)),
                Message((ANSWER, answered, "ok")),
            )
        )
        self.assertEqual(extension.failed, [(refused, False), (failed, False)])

    def test_answerWithoutRoom(self) -> None:
        """
        What the decoder holds of an answer between reads is charged to the
        session's ledger: an answer that would hold more than the budget
        has room for settles its call alone with ResourceExhausted, never
        half held; the next answer is taken, and nothing stays charged.
        """
        session, server = opened(Limits(max_connection_memory=64 * 1024))
        first, _ = session.call("big", 0, "big", (), {})
        second, _ = session.call("small", 0, "small", (), {})
        data = server.send(Message((ANSWER, first, b"x" * 200_000)), Message((ANSWER, second, "ok")))
        settled = []
        for start in range(0, len(data), 16 * 1024):
            settled += session.receive(data[start : start + 16 * 1024])
        self.assertEqual([(waiter, result) for waiter, result, _ in settled], [("big", None), ("small", "ok")])
        self.assertIsInstance(settled[0][2], ResourceExhausted)
        self.assertEqual(session.ledger.held, 0)
        self.assertEqual(session.state, SessionState.OPEN)

    def test_unsendableArgument(self) -> None:
        """An argument the encoder refuses raises EncodingError and leaves no call pending."""
        session, _ = opened()
        self.assertRaises(EncodingError, session.call, "w", 0, "put", (object(),), {})
        self.assertEqual(len(session), 0)

    def test_nameMustBeText(self) -> None:
        """A method name that is no str raises TypeError and nothing is kept."""
        session, _ = opened()
        self.assertRaises(TypeError, session.call, "w", 0, b"get", (), {})
        self.assertEqual(len(session), 0)

    def test_callOnly(self) -> None:
        """callOnly's bytes are a CALL numbered NO_ANSWER, and nothing waits."""
        session, server = opened()
        self.assertEqual(
            server.read(session.callOnly(0, "log", ("line",), {})),
            [Message((CALL, NO_ANSWER, 0, "log", ("line",), {}))],
        )
        self.assertEqual(len(session), 0)

    def test_callContext(self) -> None:
        """
        A call made in a scope carries what sentWith says, its call context
        as the Twisted client's does; in none, its bytes are a plain call's.
        """
        session, server = opened()
        clock = lambda: 100.0  # noqa: E731
        both, _ = sentWith("get", {"x": 1}, Scope(101.5, {"request-id": "r1"}), clock)
        _, both = session.call("w", 0, "get", ("k",), {"x": 1}, both)
        _, deadlineOnly = session.call("w", 0, "get", (), {}, sentWith("get", {}, Scope(100.02, None), clock)[0])
        _, plain = session.call("w", 0, "get", (), {})
        self.assertEqual(
            server.read(both + deadlineOnly + plain),
            [
                Message((CALL, 1, 0, "get", ("k",), {"x": 1}, 1500, {"request-id": "r1"})),
                Message((CALL, 2, 0, "get", (), {}, 20, {})),
                Message((CALL, 3, 0, "get", (), {})),
            ],
        )
        self.assertEqual(
            server.read(session.callOnly(0, "log", (), {}, sentWith("log", {}, Scope(None, {"a": "b"}), clock)[0])),
            [Message((CALL, NO_ANSWER, 0, "log", (), {}, None, {"a": "b"}))],
        )

    def test_goAway(self) -> None:
        """
        After GOAWAY the call in flight is still answered and a new call
        raises GoingAway (a DeadReferenceError), as on the Twisted client.
        """
        session, server = opened()
        requestId, _ = session.call("w", 0, "get", (), {})
        session.receive(server.send(Message((GOAWAY, 5000))))
        self.assertEqual(session.state, SessionState.GOING_AWAY)
        self.assertEqual(session.drain.grace, 5.0)
        error = self.assertRaises(GoingAway, session.call, "x", 0, "get", (), {})
        self.assertIsInstance(error, DeadReferenceError)
        self.assertIn("is draining (received GOAWAY)", str(error))
        self.assertRaises(GoingAway, session.callOnly, 0, "log", (), {})
        self.assertEqual(session.receive(server.send(Message((ANSWER, requestId, "last")))), [("w", "last", None)])

    def test_closesOnceDrained(self) -> None:
        """
        After GOAWAY the session ends itself once nothing is in flight (the
        receiver of GOAWAY closes: wire format 12.1), keeping what is due for
        its I/O layer to send first; not while a call waits.
        """
        session, server = opened()
        requestId, _ = session.call("w", 0, "get", (), {})
        session.receive(server.send(Message((GOAWAY, 5000))))
        self.assertFalse(session.drained)
        self.assertIsNone(session.failure)
        settled = session.receive(server.send(Message((ANSWER, requestId, "last"))) + encode_header(PING, 9))
        self.assertEqual(settled, [("w", "last", None)])
        self.assertEqual(session.state, SessionState.ENDED)
        self.assertTrue(session.closing)
        self.assertIsInstance(session.failure, ConnectionLost)
        self.assertIn("going away", str(session.failure))
        self.assertEqual(session.dataToSend(), encode_header(PONG, 9))

    def test_goAwayWhenIdle(self) -> None:
        """A GOAWAY with nothing in flight ends the session in the read that brought it."""
        session, server = opened()
        session.receive(server.send(Message((GOAWAY, 0))))
        self.assertTrue(session.closing)
        self.assertEqual(session.state, SessionState.ENDED)

    def test_drainWaitsForServersCall(self) -> None:
        """A server's call running here is in flight too: the session ends once its answer is due."""
        session: ClientSession[str] = ClientSession(PEER, makeReference=lambda exportId, names: object())
        server = Server()
        server.read(session.start())
        session.receive(PREAMBLE)
        callback = Callback()
        self.assertEqual(session.references.exportFor(callback), 1)  # type: ignore[union-attr]
        session.receive(server.send(Message((CALL, 7, 1, "add", None, 2)), Message((GOAWAY, 0))))
        self.assertEqual(session.state, SessionState.GOING_AWAY)
        [call] = session.incomingCalls.take()
        self.assertEqual(session.answerCall(call, 3), [])
        self.assertTrue(session.closing)
        self.assertEqual(server.read(session.dataToSend()), [Message((ANSWER, 7, 3))])

    def test_pingIds(self) -> None:
        """The session's PINGs are numbered from 1, as the Twisted connection's are."""
        session, _ = opened()
        self.assertEqual([session.ping(), session.ping()], [encode_header(PING, 1), encode_header(PING, 2)])


class CancelTests(SynchronousTestCase):
    """A call given up on is told to the server; its one late answer is ignored, any other stray ends the session."""

    def test_cancelBytesAndLateAnswer(self) -> None:
        """cancel() gives the CANCEL's bytes; the late answer settles nothing; the session stays open."""
        session, server = opened()
        requestId, _ = session.call("w", 0, "slow", (), {})
        self.assertEqual(server.read(session.cancel(requestId)), [Message((CANCEL, requestId))])
        self.assertEqual(len(session), 0)
        self.assertEqual(session.receive(server.send(Message((ANSWER, requestId, "late")))), [])
        self.assertEqual(session.state, SessionState.OPEN)

    def test_cancelAfterAnswer(self) -> None:
        """A call whose answer came already is not cancelled: no bytes, and a later answer to it is unexpected."""
        session, server = opened()
        requestId, _ = session.call("w", 0, "get", (), {})
        session.receive(server.send(Message((ANSWER, requestId, "done"))))
        self.assertEqual(session.cancel(requestId), b"")
        session.receive(server.send(Message((ANSWER, requestId, "again"))))
        self.assertIsInstance(session.failure, UnexpectedAnswer)

    def test_strayAnswerEndsSession(self) -> None:
        """An answer to a call never made ends the session: every pending call settles with UnexpectedAnswer."""
        session, server = opened()
        session.call("w", 0, "get", (), {})
        [(waiter, result, error)] = session.receive(server.send(Message((ANSWER, 99, "stray"))))
        self.assertEqual(waiter, "w")
        self.assertIsInstance(error, UnexpectedAnswer)
        self.assertIsInstance(error, CallLost)
        self.assertIn("never made", str(error))
        self.assertIn("'get'", str(error))
        self.assertEqual(session.state, SessionState.ENDED)


class ServerSendsTests(SynchronousTestCase):
    """What the server's messages ask of this side waits in dataToSend."""

    def test_serverCallRefused(self) -> None:
        """A server's call is answered NoSuchObject, a refused one with its violation, a NO_ANSWER one not at all."""
        session, server = opened()
        session.receive(
            server.send(
                Message((CALL, 7, 3, "changed", None, "k")),
                Message((CALL, NO_ANSWER, 3, "changed", None, "k")),
                Message((CALL, 8, 3, "changed", ("not", "a", "dict"), "k")),
            )
        )
        answers = server.read(session.dataToSend())
        self.assertEqual([answer[:3] for answer in answers], [(FAIL, 7, NO_SUCH_OBJECT), (FAIL, 8, VIOLATION)])
        self.assertEqual(session.dataToSend(), b"")

    def test_pingAnswered(self) -> None:
        """A PING from the server is answered with a PONG of the same id."""
        session, _ = opened()
        session.receive(encode_header(PING, 42))
        self.assertEqual(session.dataToSend(), encode_header(PONG, 42))

    def test_notAnRpcMessage(self) -> None:
        """A top-level object that is no RPC message ends the session with NotAnRpcMessage."""
        session, server = opened()
        session.call("w", 0, "get", (), {})
        [(_, _, error)] = session.receive(server.encoder.encode(["a", "list"]))
        self.assertIsInstance(error, NotAnRpcMessage)

    def test_brokenStreamAfterAnswer(self) -> None:
        """A chunk with an answer then garbage settles the answer first, then ends the session with a ProtocolError."""
        session, server = opened()
        first, _ = session.call("a", 0, "get", (), {})
        session.call("b", 0, "get", (), {})
        settled = session.receive(server.send(Message((ANSWER, first, 1))) + b"\xff" * 16)
        self.assertEqual(settled[0], ("a", 1, None))
        self.assertEqual(settled[1][0], "b")
        self.assertIsInstance(settled[1][2], ProtocolError)
        self.assertEqual(session.state, SessionState.ENDED)


class RefusalRateTests(SynchronousTestCase):
    """Past 1,000 refusals within 10 s the session ends (TooManyRefusals), as the Twisted connection does."""

    def flooded(self, calls: int, now: list[float], maxRefusals: int | None = 5) -> tuple[ClientSession[str], Any]:
        session: ClientSession[str] = ClientSession(PEER, maxRefusals=maxRefusals, clock=lambda: now[0])
        server = Server()
        server.read(session.start())
        session.receive(PREAMBLE)
        pending, _ = session.call("mine", 0, "get", (), {})
        settled = session.receive(
            server.send(*(Message((CALL, n, 0, "x", None)) for n in range(1, calls + 1))) + encode_header(PING, 9)
        )
        return session, (pending, settled, server)

    def test_floodOfCallsEndsSession(self) -> None:
        """
        A server that sends calls to nothing past the rate ends the session
        with TooManyRefusals: its own pending call settled with it, no more
        FAILs (nor the PONG after them) held for it, but the ERROR saying
        why (wire format 12: as the Twisted broker sends), its ledger released.
        """
        session, (_, settled, _) = self.flooded(6, [0.0])
        self.assertEqual(session.state, SessionState.ENDED)
        self.assertIsInstance(session.failure, TooManyRefusals)
        self.assertEqual(session.failure.code, "too-many-refusals")
        [(waiter, _, error)] = settled
        self.assertEqual(waiter, "mine")
        self.assertIsInstance(error, CallLost)
        self.assertEqual(session.dataToSend(), b"")
        self.assertEqual(session.farewell, b"\xbc3too-many-refusals: more than 5 refusals within 10 s")

    def test_atTheRateStaysUp(self) -> None:
        """As many refusals as the rate allows: each FAILed, the session stays up."""
        session, (_, settled, server) = self.flooded(5, [0.0])
        self.assertEqual(settled, [])
        self.assertEqual(session.state, SessionState.OPEN)
        self.assertEqual(len(server.read(session.dataToSend())), 5)

    def test_ratePerInterval(self) -> None:
        """Refusals spread over intervals never end the session; the default rate is 1,000 within 10 s."""
        now = [0.0]
        session, _ = self.flooded(2, now)
        server = Server()
        for second in range(1, 40):
            now[0] = second * 2.5
            session.receive(server.send(Message((CALL, 100 + second, 0, "x", None))))
        self.assertEqual(session.state, SessionState.OPEN)
        self.assertEqual(session.refusals.total, 41)
        default: ClientSession[str] = ClientSession(PEER)
        self.assertEqual((default.refusals.limit, default.refusals.interval), (1000, 10.0))

    def test_noAnswerCallsCount(self) -> None:
        """Calls for no answer that are refused count too (they earn no FAIL, but are refusals)."""
        session, server = opened()
        session.refusals.limit = 3
        session.receive(server.send(*(Message((CALL, NO_ANSWER, 0, "x", None)) for _ in range(4))))
        self.assertIsInstance(session.failure, TooManyRefusals)

    def test_noLimit(self) -> None:
        """maxRefusals=None: the session never ends for refusals."""
        session, (_, settled, _) = self.flooded(50, [0.0], maxRefusals=None)
        self.assertEqual((settled, session.state), ([], SessionState.OPEN))


class EndTests(SynchronousTestCase):
    """The session's end settles every pending call with the reason, naming each call; silence is judged here."""

    def test_end(self) -> None:
        """end() settles each pending call with the reason naming it; later calls raise DeadReferenceError."""
        session, _ = opened()
        session.call("a", 0, "get", (), {})
        session.call("b", 0, "put", (), {})
        settled = session.end(ConnectionLost("gone"))
        self.assertEqual([waiter for waiter, _, _ in settled], ["a", "b"])
        self.assertTrue(all(isinstance(error, ConnectionLost) for _, _, error in settled))
        self.assertIn("'put'", str(settled[1][2]))
        self.assertEqual(session.end(ConnectionLost("again")), [])
        self.assertRaises(DeadReferenceError, session.call, "c", 0, "get", (), {})

    def test_errorForBrokenRule(self) -> None:
        """
        A rule the server broke (here a reserved token header) ends the
        session with the ERROR saying why as its L{farewell}, the bytes the
        Twisted connection sends (wire format 12.4), nothing else to send.
        The server's own ERROR, and an end the I/O layer saw, have none.
        """
        session, _ = opened()
        session.call("w", 0, "get", (), {})
        session.receive(encode_header(PING, 3) + b"\xe0")
        self.assertIsInstance(session.failure, MalformedHeader)
        self.assertEqual(session.farewell, error_token(session.failure))
        self.assertEqual((session.closing, session.dataToSend()), (False, b""))
        session, _ = opened()
        session.receive(encode_header(ERROR, 4) + b"oops")
        self.assertIsInstance(session.failure, PeerError)
        self.assertEqual(session.farewell, b"")
        session, _ = opened()
        session.call("w", 0, "get", (), {})
        session.judgeSilence(2.5, 4.0)  # (a PING due in the output)
        self.assertTrue(session.output)
        session.end(ConnectionLost("gone"))
        self.assertEqual((session.farewell, session.dataToSend()), (b"", b""))

    def test_judgeSilence(self) -> None:
        """Quiet past half the bound: one PING waits to be sent; past all of it: the session ends with ServerSilent."""
        session, _ = opened()
        session.call("w", 0, "get", (), {})
        self.assertEqual(session.judgeSilence(1.0, 4.0), [])
        self.assertEqual(session.dataToSend(), b"")
        self.assertEqual(session.judgeSilence(2.5, 4.0), [])
        self.assertEqual(session.dataToSend(), encode_header(PING, 1))
        self.assertEqual(session.judgeSilence(3.0, 4.0), [])
        self.assertEqual(session.dataToSend(), b"")
        [(_, _, error)] = session.judgeSilence(4.0, 4.0)
        self.assertIsInstance(error, ServerSilent)
        self.assertIsInstance(session.failure, ServerSilent)

    def test_heardResetsPing(self) -> None:
        """Hearing from the server (a PONG) lets the next silence send a PING again."""
        session, _ = opened()
        session.call("w", 0, "get", (), {})
        session.judgeSilence(2.5, 4.0)
        self.assertTrue(session.pingSent)
        session.receive(encode_header(PONG, 1))
        self.assertFalse(session.pingSent)

    def test_pingsInTheTable(self) -> None:
        """A silence PING waits in the session's ping table, numbered from 1, until its PONG; the end forgets it."""
        session, server = opened()
        self.assertEqual(session.ping(), encode_header(PING, 1))
        self.assertEqual(dict(session.pings), {1: None})
        session.receive(encode_header(PONG, 1))
        self.assertEqual(len(session.pings), 0)
        session.ping()
        session.end(ConnectionLost("gone"))
        self.assertEqual(len(session.pings), 0)

    def test_noPongAfterEnd(self) -> None:
        """
        A PING in the same chunk as the message that ends the session is
        not answered: nothing is left to send but the ERROR saying why.
        """
        session, server = opened()
        session.call("w", 0, "get", (), {})
        session.receive(server.send(Message((ANSWER, 99, "stray"))) + encode_header(PING, 5))
        self.assertEqual(session.state, SessionState.ENDED)
        self.assertEqual(session.dataToSend(), b"")
        self.assertEqual(session.farewell, b"\xbc@unexpected-answer: an answer to request 99, which was never made")


def callOutcome(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: Any, metadata: Any) -> Any:
    """
    What a session made on core C{module} (C{None}: the pure one) gives for
    call 1 of C{echo(*args, **kwargs)}: C{("sent", bytes)}, or
    C{("raised", type name, text)} with no call left pending.
    """
    with core(module):
        session: ClientSession[str] = ClientSession(PEER)
    try:
        sent = UNSCOPED if deadline is None and metadata is None else callContext(kwargs, deadline, metadata)
        _, data = session.call("w", 0, "echo", args, kwargs, sent)
    except Exception as error:
        assert not session.pending, "a call refused at its encoding was kept"
        return ("raised", type(error).__name__, str(error))
    return ("sent", data)


def referenceOutcome(args: tuple[Any, ...], kwargs: dict[str, Any], deadline: Any, metadata: Any) -> Any:
    """What the pure-Python encoder writes for the same CALL as a L{Message} (or raises), as L{callOutcome} says it."""
    with core(None):
        encoder = Encoder(REGISTRY)
    try:
        return ("sent", encoder.encode(Message((CALL, 1, 0, "echo", callContext(kwargs, deadline, metadata), *args))))
    except Exception as error:
        return ("raised", type(error).__name__, str(error))


def nested(depth: int) -> list[Any]:
    """Lists C{depth} deep (an empty one innermost)."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


SHAPES: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((42,), {}),
    ((-1, 0, 2**63, 2**64, -(2**64) - 1, 2**70), {}),
    ((True, False, None, 1.5, math.inf, -0.0), {}),
    (("", "text", "é ☃ \U0001f600", b"", b"bytes"), {}),
    ((b"x" * (32 * 1024 - 1), b"y" * (32 * 1024)), {}),
    (([1, [2, [3]]], (1, (2,)), {"a": {"b": [None]}}, {1: "one", b"k": 2}), {}),
    (({1, 2}, frozenset({"a"}), [{3}], bytearray(b"ba"), memoryview(b"mv")), {}),
    ((), {"key": "value", "n": [1, 2]}),
    (("x", 1), {"nested": {"deep": [[[]]]}}),
    (("\ud800",), {}),
    ((object(),), {}),
    ((nested(DEFAULT_LIMITS.max_depth - 2), nested(DEFAULT_LIMITS.max_depth - 1)), {}),
    ((nested(DEFAULT_LIMITS.max_depth),), {}),
]
"""
Argument shapes the compiled CALL writes, hands back (a set, a big bytes, a
bigint, a bytearray) or refuses (a lone surrogate, an object, lists nested
deeper than the limit inside the message), around the depth limit.
"""


class CallEncodingTests(SynchronousTestCase):
    """
    A CALL's bytes are those of the general encoder, on the compiled core
    (one C call for built-in arguments) as on the pure one.
    """

    def cores(self) -> list[Any]:
        return [None] if COMPILED is None else [None, COMPILED]

    def assertSameCall(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: Any = None, metadata: Any = None
    ) -> None:
        expected = referenceOutcome(args, kwargs, deadline, metadata)
        for module in self.cores():
            self.assertEqual(callOutcome(module, args, kwargs, deadline, metadata), expected, f"core {module}")

    def test_shapes(self) -> None:
        """Each shape of L{SHAPES}, with and without a deadline and metadata, gives the reference's bytes or error."""
        for args, kwargs in SHAPES:
            self.assertSameCall(args, kwargs)
            self.assertSameCall(args, kwargs, 1500, {"trace": "abc"})
        self.assertEqual(referenceOutcome((42,), {}, None, None)[0], "sent")
        self.assertEqual(referenceOutcome(("\ud800",), {}, None, None)[0], "raised")

    @differential
    @given(
        st.lists(values, max_size=4),
        st.dictionaries(st.text(max_size=6), values, max_size=3),
        st.none() | st.integers(0, 2**40),
        st.none() | st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2),
    )
    def test_values(self, args: list[Any], kwargs: dict[str, Any], deadline: Any, metadata: Any) -> None:
        """Any arguments: the same bytes, or the same error, as the pure encoder's of the same message."""
        self.assertSameCall(tuple(args), kwargs, deadline, metadata)


class OutputTests(SynchronousTestCase):
    """After L{ClientSession.receive}, what it made due is in C{output} (an empty one: nothing to send)."""

    def test_answerLeavesNothing(self) -> None:
        """An answer alone makes nothing due."""
        session, server = opened()
        session.call("w", 0, "get", (), {})
        self.assertEqual(session.receive(server.send(Message((ANSWER, 1, "v")))), [("w", "v", None)])
        self.assertEqual(session.output, [])
        self.assertEqual(session.dataToSend(), b"")

    def test_pongInOutput(self) -> None:
        """A PING's PONG is in C{output} once C{receive} returns, and C{dataToSend} takes it."""
        session, _ = opened()
        session.receive(encode_header(PING, 7))
        self.assertEqual(session.output, [encode_header(PONG, 7)])
        self.assertEqual(session.dataToSend(), encode_header(PONG, 7))
        self.assertEqual(session.output, [])


class DrainErrorTests(SynchronousTestCase):
    def test_drainDeadlineRebuilt(self) -> None:
        """
        A server's DrainDeadlineExceeded reaches a client without Twisted as
        itself, with its grace (registered sans-IO, no longer by the Twisted drain alone).
        """
        session, server = opened()
        requestId, _ = session.call("w", 0, "slow", (), {})
        fail = Message((FAIL, requestId, "chunkwire.DrainDeadlineExceeded", "late", None, ("late", 2.5)))
        [(waiter, result, error)] = session.receive(server.send(fail))
        self.assertIsInstance(error, DrainDeadlineExceeded)
        assert isinstance(error, DrainDeadlineExceeded)
        self.assertEqual((str(error), error.grace), ("late", 2.5))
