# -*- test-case-name: tests.protocols.rpc.test_admission -*-
"""
The peer's CALL is admitted alike on the Twisted broker (L{protocols.rpc._answering.CallRunner})
and on the clients without Twisted (L{framing.rpc._incoming.IncomingCalls}, in their L{ClientSession}).

Both are one rule, L{framing.rpc._incoming.CallAdmission.admit} (its own
tests: tests/framing/rpc/test_incoming.py).  This holds the two shells to
its outcomes: the same FAIL, type and text, for each refusal, and the end
of the connection for a CALL reusing a running call's request id.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Encoder, Registry
from framing._encoder import error_token
from framing.rpc._errors import DuplicateRequestId, describe
from framing.rpc._exports import ExportTable
from framing.rpc._incoming import IncomingCalls, failure
from framing.rpc._limits import CallLimits
from framing.rpc._session import ClientSession
from framing.rpc._wire import CALL, FAIL, Message, addMessageTypes
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from .services import RpcPair, Service
from .test_memory import messagesIn, quiet

CASES: list[tuple[str, Message]] = [
    ("no such object", Message((CALL, 11, 9, "echo", (1,), None))),
    ("no such method", Message((CALL, 12, 0, "nope", (1,), None))),
    ("a private method", Message((CALL, 13, 0, "hidden", (), None))),
    ("refused arguments", Message((CALL, 14, 0, "add", ("one", 2), None))),
    ("an unknown keyword", Message((CALL, 15, 0, "keywords", (1,), {"d": 4}))),
    ("too few arguments", Message((CALL, 17, 0, "add", (1,), None))),
    ("its deadline passed", Message((CALL, 18, 0, "echo", (1,), None, 0, None))),
    ("too many running", Message((CALL, 16, 0, "echo", (1,), None))),
]
"""
The CALLs refused before their method runs (one with a call context whose
deadline had passed: 0 ms left); the last one once a call runs and the bound is 1.
"""


class AdmissionAlikeTests(SynchronousTestCase):
    def twistedFails(self) -> dict[int, tuple[Any, ...]]:
        """The FAIL (type name, text) the Twisted server sends for each of L{CASES}, by request id."""
        pair = RpcPair(Service(), serverCallLimits=CallLimits(maxRunning=1))
        quiet(pair.server, pair.client)
        pair.flush()
        runner = pair.server.incoming
        for _, message in CASES[:-1]:
            runner.callReceived(message)
        runner.callReceived(Message((CALL, 10, 0, "later", ("k",), None)))  # (runs on: the bound is reached)
        runner.callReceived(CASES[-1][1])
        pair.flush()
        sent = messagesIn(b"".join(pair.serverWrites))
        return {
            message[1]: tuple(message[2:4]) for message in sent if isinstance(message, Message) and message[0] == FAIL
        }

    def sansIOFails(self) -> dict[int, tuple[Any, ...]]:
        """The FAIL a client without Twisted sends for each of L{CASES}, by request id."""
        calls = IncomingCalls(ExportTable(Service()), maxRunning=1)
        fails = {}
        for _, message in CASES[:-1]:
            refused = calls.received(message)
            assert refused is not None, message
            fails[message[1]] = tuple(failure(message[1], refused)[2:4])
        self.assertIsNone(calls.received(Message((CALL, 10, 0, "later", ("k",), None))))
        refused = calls.received(CASES[-1][1])
        assert refused is not None
        fails[CASES[-1][1][1]] = tuple(failure(CASES[-1][1][1], refused)[2:4])
        return fails

    def test_sameRefusals(self) -> None:
        """Every CALL refused before it runs gets the same FAIL, type and text, from both."""
        twisted, sansIO = self.twistedFails(), self.sansIOFails()
        for what, message in CASES:
            requestId = message[1]
            self.assertIn(requestId, twisted, what)
            self.assertEqual(twisted[requestId], sansIO[requestId], what)

    def test_reusedRunningIdEndsBoth(self) -> None:
        """
        A CALL reusing the request id of a call still running ends the
        connection on both, with the same L{DuplicateRequestId}, and is not
        answered (its FAIL would be taken for the running call's answer).
        """
        pair = RpcPair(Service())
        quiet(pair.server, pair.client)
        pair.flush()
        pair.server.incoming.callReceived(Message((CALL, 10, 0, "later", ("k",), None)))
        pair.server.incoming.callReceived(Message((CALL, 10, 0, "echo", (1,), None)))
        twisted = pair.server.failure.value  # type: ignore[union-attr]
        self.assertIsInstance(twisted, DuplicateRequestId)

        session: ClientSession[int] = ClientSession("test", makeReference=lambda exportId, names: object())
        session.start()
        session.receive(PREAMBLE)
        self.assertEqual(session.references.exportFor(Service()), 1)  # type: ignore[union-attr]
        registry = Registry(DEFAULT_REGISTRY)
        addMessageTypes(registry)
        encoder = Encoder(registry)
        session.receive(encoder.encode(Message((CALL, 10, 1, "later", None, "k"))))
        self.assertEqual(session.dataToSend(), b"")
        session.receive(encoder.encode(Message((CALL, 10, 1, "echo", None, 1))))
        self.assertIsInstance(session.failure, DuplicateRequestId)
        self.assertEqual(str(session.failure), str(twisted))
        # (no FAIL: only the ERROR saying why, wire format 12.3)
        self.assertEqual(session.dataToSend(), b"")
        self.assertEqual(session.farewell, error_token(twisted))

    def test_describedAlike(self) -> None:
        """(The FAIL's type name is the error's wire name, as describe gives it.)"""
        calls = IncomingCalls(ExportTable(Service()), maxRunning=None)
        refused = calls.received(CASES[0][1])
        assert refused is not None
        self.assertEqual(failure(11, refused)[2], describe(refused)[0])
