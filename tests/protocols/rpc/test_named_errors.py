"""Errors of a call name the method and the peer; a cancelled whenDisconnected waiter is forgotten at once."""

from __future__ import annotations

import gc
import weakref

from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionDone
from twisted.logger import formatEvent
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits, Violation
from framing.rpc import _errors as errors
from framing.rpc._errors import CallLost, ErrorRegistry, UnexpectedAnswer, callLost
from framing.rpc._wire import ANSWER, Message
from protocols import rpc
from protocols.rpc import RemoteViolation

from .services import RpcPair, Service
from .test_memory import quiet


class LostCallTests(SynchronousTestCase):
    """A call failed by a lost connection keeps the reason's type and names the method and the peer."""

    def test_connectionDone(self) -> None:
        """A clean close fails each waiting call with a ConnectionDone naming its method and the peer."""
        pair = RpcPair(Service())
        answers = [pair.root.callRemote("later", 1), pair.root.callRemote("stubborn", 2)]
        pair.flush()
        pair.client.disconnect()
        pair.flush()
        peer = pair.client.connection.peerName()
        for answer, name in zip(answers, ["later", "stubborn"], strict=True):
            error = self.failureResultOf(answer, ConnectionDone).value
            self.assertIsInstance(error, CallLost)
            self.assertIn(f"while calling {name!r} on {peer}", str(error))
            self.assertIn("closed cleanly", str(error))

    def test_protocolError(self) -> None:
        """A connection dropped for a ProtocolError fails the calls with that error's type, code and message."""
        pair = RpcPair(Service())
        quiet(pair.client, pair.server)
        answer = pair.root.callRemote("later", 1)
        pair.flush()
        pair.server.sendObject(Message((ANSWER, 999, None)))
        pair.flush()
        error = self.failureResultOf(answer, UnexpectedAnswer).value
        self.assertEqual(error.code, "unexpected-answer")
        self.assertIn("request 999, which was never made", str(error))
        self.assertIn("while calling 'later'", str(error))

    def test_unextendable(self) -> None:
        """A reason whose type cannot be extended is given as it is."""

        class Final(Exception):
            def __init_subclass__(cls) -> None:
                raise TypeError("final")

        reason = Final("x")
        self.assertIs(callLost(reason, "m", "p"), reason)


class RefusedResultTests(SynchronousTestCase):
    """A refused result names the method and the peer, on whichever side refused it."""

    def test_refusedHere(self) -> None:
        """An answer this side refuses fails the call with a Violation naming the method and the peer."""
        pair = RpcPair(Service(), clientLimits=Limits(max_string_length=10))
        quiet(pair.client)
        answer = pair.root.callRemote("echo", "x" * 11)
        pair.flush()
        violation = self.failureResultOf(answer, Violation).value
        self.assertEqual(violation.where, "result")
        self.assertIn(f"in the answer to 'echo' from {pair.client.connection.peerName()}", str(violation))

    def test_refusedThere(self) -> None:
        """A result the peer's constraint refuses arrives naming the method and the peer; the peer logs the method."""
        pair = RpcPair(Service())
        events = quiet(pair.server)
        answer = pair.root.callRemote("wordy", "hello")
        pair.flush()
        error = self.failureResultOf(answer, RemoteViolation).value
        self.assertEqual(error.where, "result")
        self.assertIn(f"the result of 'wordy' from {pair.client.connection.peerName()}", str(error))
        self.assertIn("Refused call 1 of wordy from", formatEvent(events[0]))


class WhenDisconnectedTests(SynchronousTestCase):
    """Cancelling a whenDisconnected waiter unregisters it."""

    def test_cancelForgets(self) -> None:
        """A cancelled waiter fails with CancelledError and the broker keeps nothing of it; the others still fire."""
        pair = RpcPair(Service())
        cancelled = pair.client.whenDisconnected()
        kept = pair.root.whenDisconnected()
        cancelled.cancel()
        self.failureResultOf(cancelled, CancelledError)
        gone = weakref.ref(cancelled)
        del cancelled
        gc.collect()
        self.assertIsNone(gone())
        pair.client.disconnect()
        pair.flush()
        self.assertIsInstance(self.successResultOf(kept), ConnectionDone)

    def test_cancelAfterLoss(self) -> None:
        """Cancelling a waiter that already fired changes nothing."""
        pair = RpcPair(Service())
        waiter = pair.client.whenDisconnected()
        pair.client.disconnect()
        pair.flush()
        waiter.cancel()
        self.assertIsInstance(self.successResultOf(waiter), ConnectionDone)


class _OldStyleError(Exception):
    """An application's error, registered under the deprecated name."""


class RegisterErrorAliasTests(SynchronousTestCase):
    """C{rpc.register_error}, the old name of C{rpc.registerError}, still registers, and says it is deprecated."""

    def test_deprecated(self) -> None:
        """A call registers the type as registerError does and warns, pointing at the caller and the new name."""
        table = ErrorRegistry()
        self.patch(errors, "ERRORS", table)  # the process-wide table (in the sans-IO core) stays as it was
        rpc.register_error(_OldStyleError, "tests.rpc.OldStyleError")
        self.assertEqual(table.nameFor(_OldStyleError), "tests.rpc.OldStyleError")
        warnings = self.flushWarnings([self.test_deprecated])
        self.assertEqual([w["category"] for w in warnings], [DeprecationWarning])
        self.assertIn("use protocols.rpc.registerError", warnings[0]["message"])
