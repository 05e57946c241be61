"""References either way in the sans-IO client session: L{framing.rpc._exports}, L{framing.rpc._incoming}.

The server's side is written by hand with the same sans-IO tables
(L{framing.rpc._exports.References} serves as any side's tables), so
every byte the session sends or takes is checked here without a socket.
"""

from __future__ import annotations

import gc
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, Limits, Violation
from framing.rpc._connection import RpcConnection
from framing.rpc._errors import NO_SUCH_OBJECT, VIOLATION, DeadReferenceError, TooManyReferences
from framing.rpc._exports import References
from framing.rpc._incoming import CALLS_ACCOUNT, callBytes
from framing.rpc._interfaces import ExportedReference
from framing.rpc._referenceable import Referenceable
from framing.rpc._session import ClientSession
from framing.rpc._signatures import remote
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, NO_ANSWER, RELEASE, ROOT_ID, Message
from framing.wire import PONG, PREAMBLE, encode_header

PEER = "127.0.0.1:8760"


class Counter(Referenceable):
    """A callback the client passes."""

    def __init__(self, value: int) -> None:
        self.value = value

    @remote
    def add(self, amount: int) -> int:
        self.value += amount
        return self.value

    @remote
    def fail(self) -> None:
        raise ValueError("as asked")

    @remote
    def wrongResult(self) -> int:
        return "not an int"  # type: ignore[return-value]

    def hidden(self) -> str:
        return "not remote"


class Ref(ExportedReference):
    """The client's reference class in these tests (its connection: the test's owner)."""


class Owner:
    """What a reference's C{connection} is here: the session's owner, releasing through the session."""

    peer = PEER

    def __init__(self) -> None:
        self.session: ClientSession[str] | None = None
        self.released: list[bytes] = []

    def releaseReference(self, reference: Ref) -> None:
        assert self.session is not None
        self.released.append(self.session.release(reference))


class Server:
    """The server's side, by hand: its own tables, so that references travel both ways."""

    def __init__(self, root: Any = None) -> None:
        self.tables = References(self, lambda exportId, names: Ref(self, exportId, names), root=root)
        connection: RpcConnection[Any] = RpcConnection()
        connection.carryReferences(self.tables, ExportedReference)
        registry = connection.registry
        self.decoder = Decoder(registry=registry)
        self.encoder = Encoder(registry)

    def read(self, data: bytes) -> list[Any]:
        return self.decoder.feed(data)

    def send(self, *messages: Message) -> bytes:
        return b"".join(self.encoder.encode(message) for message in messages)


def opened(**options: Any) -> tuple[ClientSession[str], Server, Owner, list[int]]:
    """A session with references, its preamble exchanged; and the count of its C{released} hints."""
    owner = Owner()
    hints: list[int] = []
    session: ClientSession[str] = ClientSession(
        PEER,
        makeReference=lambda exportId, names: Ref(owner, exportId, names),
        owner=owner,
        released=lambda: hints.append(1),
        **options,
    )
    owner.session = session
    server = Server()
    server.read(session.start())
    session.receive(PREAMBLE)
    return session, server, owner, hints


class ImportTests(SynchronousTestCase):
    """A reference from the server becomes the client's reference object, one per id, released when dropped."""

    def test_resultReference(self) -> None:
        """A result holding rpc.ref is the client's reference; the same id again is the same object."""
        session, server, _, _ = opened()
        served = Counter(1)
        session.call("first", ROOT_ID, "make", (), {})
        session.call("second", ROOT_ID, "make", (), {})
        settled = session.receive(server.send(Message((ANSWER, 1, served)), Message((ANSWER, 2, [served]))))
        (_, first, _), (_, [second], _) = settled
        self.assertIsInstance(first, Ref)
        self.assertIs(first, second)
        self.assertIs(server.tables.exports[first.exportId][0], served)
        # A reference of the server's sent back goes home as rpc.yourref: the server reads its own object.
        _, data = session.call("back", ROOT_ID, "keep", (first,), {})
        (message,) = server.read(data)
        self.assertIs(message[4][0], served)

    def test_droppedReleased(self) -> None:
        """A reference dropped: the hint is given, and its RELEASE, counting each receipt, is in the output."""
        session, server, _, hints = opened()
        session.call("w", ROOT_ID, "make", (), {})
        session.call("w", ROOT_ID, "make", (), {})
        served = Counter(1)
        settled = session.receive(server.send(Message((ANSWER, 1, served)), Message((ANSWER, 2, served))))
        exportId = settled[0][1].exportId
        self.assertEqual(session.dataToSend(), b"")
        del settled
        gc.collect()
        self.assertEqual(hints, [1])
        (release,) = server.read(session.dataToSend())
        self.assertEqual(tuple(release), (RELEASE, exportId, 2))
        self.assertEqual(session.references.importCount, 0)  # type: ignore[union-attr]
        self.assertEqual(session.dataToSend(), b"")

    def test_rootNeverReleased(self) -> None:
        """
        The server's root received as a reference (export 0) and dropped:
        no hint and no RELEASE, which wire format 12.5 forbids for export 0.
        """
        root = Counter(0)
        session, _, _, hints = opened()
        server = Server(root)
        session.call("w", ROOT_ID, "me", (), {})
        settled = session.receive(server.send(Message((ANSWER, 1, root))))
        self.assertEqual(settled[0][1].exportId, ROOT_ID)
        del settled
        gc.collect()
        self.assertEqual((hints, session.dataToSend()), ([], b""))

    def test_droppedReleaseInOutputAfterRead(self) -> None:
        """
        A reference dropped before a read has its RELEASE in the session's
        C{output} once that read's C{receive} returns: an I/O layer that
        sends only when C{output} holds something sends it.
        """
        session, server, _, _ = opened()
        session.call("w", ROOT_ID, "make", (), {})
        settled = session.receive(server.send(Message((ANSWER, 1, Counter(1)))))
        exportId = settled[0][1].exportId
        del settled
        gc.collect()
        self.assertEqual(session.output, [])
        session.receive(encode_header(PONG, 1))
        (release,) = server.read(b"".join(session.output))
        self.assertEqual(tuple(release), (RELEASE, exportId, 1))

    def test_releasedExplicitly(self) -> None:
        """release() sends RELEASE now, later calls raise DeadReferenceError, and its death releases nothing more."""
        session, server, owner, hints = opened()
        session.call("w", ROOT_ID, "make", (), {})
        ((_, ref, _),) = session.receive(server.send(Message((ANSWER, 1, Counter(1)))))
        with ref:
            pass
        (release,) = server.read(owner.released[0])
        self.assertEqual(tuple(release), (RELEASE, ref.exportId, 1))
        self.assertRaises(DeadReferenceError, ref.connection.call, ref.exportId, "add", (1,), {})
        ref.release()  # (nothing more)
        self.assertEqual(len(owner.released), 1)
        del ref
        gc.collect()
        self.assertEqual(session.dataToSend(), b"")
        root = Ref(owner, ROOT_ID)
        root.release()
        self.assertEqual(owner.released, [owner.released[0]])
        self.assertIs(root.connection, owner)
        self.assertEqual(hints, [])

    def test_tooManyReferences(self) -> None:
        """Past maxImports, a message holding one more reference is refused; the ones held stay."""
        session, server, _, _ = opened(maxImports=2)
        for _ in range(3):
            session.call("w", ROOT_ID, "make", (), {})
        kept = [Counter(1), Counter(2), Counter(3)]
        settled = session.receive(server.send(*(Message((ANSWER, n + 1, kept[n])) for n in range(3))))
        self.assertIsInstance(settled[0][1], Ref)
        self.assertIsInstance(settled[1][1], Ref)
        self.assertIsInstance(settled[2][2], Violation)
        self.assertEqual(settled[2][2].code, TooManyReferences.code)


class ServedCallTests(SynchronousTestCase):
    """A callback the client passed is exported; the server's calls to it wait for the I/O layer, then are answered."""

    def exported(self) -> tuple[ClientSession[str], Server, Counter, Ref]:
        """A session that sent a Counter as an argument, and the server's reference to it."""
        session, server, _, _ = opened()
        counter = Counter(1)
        _, data = session.call("w", ROOT_ID, "watch", (counter,), {})
        (message,) = server.read(data)
        reference = message[4][0]
        self.assertIsInstance(reference, Ref)
        return session, server, counter, reference

    def answers(self, session: ClientSession[str], server: Server) -> list[Any]:
        """Run every waiting call as an I/O layer would, and the server's reading of what the session sends."""
        for call in session.incomingCalls.take():
            try:
                session.answerCall(call, call.run())
            except Exception as error:
                session.answerCall(call, None, error)
        return [tuple(message) for message in server.read(session.dataToSend())]

    def test_callServed(self) -> None:
        """The server's CALL waits until the I/O layer runs it; its ANSWER follows; a call for no answer has none."""
        session, server, counter, reference = self.exported()
        session.receive(server.send(Message((CALL, 7, reference.exportId, "add", None, 2))))
        self.assertEqual(counter.value, 1)
        self.assertEqual(len(session.incomingCalls.waiting), 1)
        self.assertEqual(self.answers(session, server), [(ANSWER, 7, 3)])
        self.assertEqual(counter.value, 3)
        session.receive(server.send(Message((CALL, NO_ANSWER, reference.exportId, "add", None, 4))))
        self.assertEqual(self.answers(session, server), [])
        self.assertEqual(counter.value, 7)
        self.assertEqual(session.incomingCalls.runningCount, 0)

    def test_callWithContextServed(self) -> None:
        """A server's CALL carrying a call context (a deadline, metadata) is served as any other."""
        session, server, counter, reference = self.exported()
        session.receive(server.send(Message((CALL, 8, reference.exportId, "add", (None, 1500, {"a": "b"}), 2))))
        self.assertEqual(self.answers(session, server), [(ANSWER, 8, 3)])
        self.assertTrue(session.failure is None)

    def test_refusals(self) -> None:
        """Unknown object, unknown or hidden method, refused argument: a FAIL each, nothing run."""
        session, server, counter, reference = self.exported()
        session.receive(
            server.send(
                Message((CALL, 1, 99, "add", None, 1)),
                Message((CALL, 2, reference.exportId, "hidden", None)),
                Message((CALL, 3, reference.exportId, "add", None, "x")),
            )
        )
        self.assertEqual(session.incomingCalls.waiting, [])
        fails = server.read(session.dataToSend())
        self.assertEqual(
            [(m[0], m[1], m[2]) for m in fails],
            [(FAIL, 1, NO_SUCH_OBJECT), (FAIL, 2, "NoSuchMethod"), (FAIL, 3, VIOLATION)],
        )
        self.assertEqual(fails[2][5][1], "args[0]")
        self.assertEqual(counter.value, 1)

    def test_methodErrors(self) -> None:
        """The method's exception is a FAIL naming its type; a result its hint refuses is a violation at result."""
        session, server, _, reference = self.exported()
        session.receive(
            server.send(
                Message((CALL, 1, reference.exportId, "fail", None)),
                Message((CALL, 2, reference.exportId, "wrongResult", None)),
            )
        )
        fails = self.answers(session, server)
        self.assertEqual((fails[0][0], fails[0][2], fails[0][3]), (FAIL, "ValueError", "as asked"))
        self.assertEqual((fails[1][0], fails[1][2]), (FAIL, VIOLATION))
        self.assertTrue(fails[1][5][1].startswith("result"))

    def test_cancelDropsAnswer(self) -> None:
        """A CANCEL of a call waiting to run: its answer is not sent."""
        session, server, _, reference = self.exported()
        session.receive(server.send(Message((CALL, 5, reference.exportId, "add", None, 1)), Message((CANCEL, 5))))
        self.assertEqual(self.answers(session, server), [])

    def test_releaseHonoured(self) -> None:
        """The server's RELEASE of the whole count forgets the export: a later call to it is NoSuchObject."""
        session, server, _, reference = self.exported()
        references = session.references
        assert references is not None
        self.assertEqual(references.exportCount, 1)
        session.receive(server.send(Message((RELEASE, reference.exportId, 1))))
        self.assertEqual(references.exportCount, 0)
        session.receive(server.send(Message((CALL, 9, reference.exportId, "add", None, 1))))
        ((tag, requestId, typeName, *_),) = server.read(session.dataToSend())
        self.assertEqual((tag, requestId, typeName), (FAIL, 9, NO_SUCH_OBJECT))

    def test_yourReferenceComesHome(self) -> None:
        """The server sending the client's export back: it arrives as the local object."""
        session, server, counter, reference = self.exported()
        ((_, result, _),) = session.receive(server.send(Message((ANSWER, 1, reference))))
        self.assertIs(result, counter)

    def test_endForgets(self) -> None:
        """The session's end forgets exports, imports and the calls waiting; an answer after it sends nothing."""
        session, server, _, reference = self.exported()
        session.receive(server.send(Message((CALL, 1, reference.exportId, "add", None, 1))))
        calls = session.incomingCalls.take()
        session.end(ConnectionError("gone"))
        session.answerCall(calls[0], 2)
        self.assertEqual(session.dataToSend(), b"")
        self.assertEqual(session.references.exportCount, 0)  # type: ignore[union-attr]


class Sizer(Referenceable):
    """A callback taking bytes, for the ledger's tests."""

    @remote
    def size(self, data: bytes) -> int:
        return len(data)


CALL_BYTES = 100_000
"""The bytes of each served call's argument in L{ServedCallLedgerTests}."""


class ServedCallLedgerTests(SynchronousTestCase):
    """The server's calls waiting or running here are charged to the session's ledger (account calls) until settled."""

    def exported(self, **options: Any) -> tuple[ClientSession[str], Server, Ref]:
        """A session that passed a L{Sizer}, and the server's reference to it."""
        session, server, _, _ = opened(**options)
        _, data = session.call("w", ROOT_ID, "watch", (Sizer(),), {})
        (message,) = server.read(data)
        return session, server, message[4][0]

    def call(self, session: ClientSession[str], server: Server, reference: Ref, requestId: int) -> None:
        """The server calls C{size} with L{CALL_BYTES} bytes."""
        session.receive(server.send(Message((CALL, requestId, reference.exportId, "size", None, b"x" * CALL_BYTES))))

    def test_chargedUntilSettled(self) -> None:
        """A waiting call holds its argument's bytes (callBytes) until its answer; a failed one until its FAIL."""
        session, server, reference = self.exported()
        self.call(session, server, reference, 1)
        self.call(session, server, reference, 2)
        one = callBytes((b"x" * CALL_BYTES,), {})
        self.assertEqual(session.ledger.holding(CALLS_ACCOUNT), 2 * one)
        first, second = session.incomingCalls.take()
        session.answerCall(first, first.run())
        self.assertEqual(session.ledger.holding(CALLS_ACCOUNT), one)
        session.answerCall(second, None, ValueError("no"))
        self.assertEqual(session.ledger.holding(CALLS_ACCOUNT), 0)
        self.assertEqual([m[0] for m in server.read(session.dataToSend())], [ANSWER, FAIL])

    def test_forNoAnswerCharged(self) -> None:
        """A call for no answer is charged until the I/O layer settles it."""
        session, server, reference = self.exported()
        self.call(session, server, reference, NO_ANSWER)
        self.assertGreater(session.ledger.holding(CALLS_ACCOUNT), CALL_BYTES)
        (call,) = session.incomingCalls.take()
        session.answerCall(call, call.run())
        self.assertEqual(session.ledger.holding(CALLS_ACCOUNT), 0)

    def test_cancelledReleasedWhenItEnds(self) -> None:
        """
        A call cancelled while it runs is charged until its method ends (a
        CANCEL cannot stop a plain method), then released, unanswered.
        (One cancelled before it was taken never runs: test_incoming
        test_cancelBeforeRunning.)
        """
        session, server, reference = self.exported()
        self.call(session, server, reference, 5)
        (call,) = session.incomingCalls.take()
        session.receive(server.send(Message((CANCEL, 5))))
        self.assertGreater(session.ledger.holding(CALLS_ACCOUNT), CALL_BYTES)
        session.answerCall(call, call.run())
        self.assertEqual(session.ledger.holding(CALLS_ACCOUNT), 0)
        self.assertEqual(session.dataToSend(), b"")

    def test_releasedAtTheEnd(self) -> None:
        """The session's end lets go of its calls; settling one later releases nothing twice."""
        session, server, reference = self.exported()
        self.call(session, server, reference, 1)
        (call,) = session.incomingCalls.take()
        session.end(ConnectionError("gone"))
        self.assertEqual(session.ledger.held, 0)
        session.answerCall(call, call.run())
        self.assertEqual(session.ledger.held, 0)

    def test_pastTheBudgetFull(self) -> None:
        """Calls holding more than max_connection_memory put the ledger over its budget (the I/O layer's cue)."""
        session, server, reference = self.exported(limits=Limits(max_connection_memory=int(1.5 * CALL_BYTES)))
        told: list[bool] = []
        session.ledger.on_full = told.append
        self.call(session, server, reference, 1)
        self.assertEqual(told, [])
        self.call(session, server, reference, 2)
        self.assertEqual(told, [True])
        calls = session.incomingCalls.take()
        session.answerCall(calls[0], calls[0].run())
        self.assertEqual(told, [True, False])
