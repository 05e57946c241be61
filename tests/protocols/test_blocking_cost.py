"""What one sequential call of the blocking client runs: its Python calls, counted (test_served_call: the server)."""

from __future__ import annotations

import dis
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any
from unittest import skipIf

from twisted.trial.unittest import SynchronousTestCase

import framing.rpc._calltable
import framing.rpc._session
import protocols.blocking
from framing import Decoder, Encoder, Registry
from framing.rpc._wire import ANSWER, CALL, ROOT_ID, Message, addMessageTypes
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.blocking import BlockingConnection

from ..framing.test_cores import COMPILED, needs_compiled

CLIENT_FILES = tuple(module.__file__ for module in (protocols.blocking, framing.rpc._session, framing.rpc._calltable))
"""The client's own modules: what a call runs in them is the blocking client's cost, the decoder's apart."""

MOST_CALLS = 28
"""
Most Python calls (functions and built-ins, anywhere) one call may make on
the compiled core: 46 before the client's per-call path was cut down, 33
after, 29 once the compiled reader built the ANSWER itself (no
C{buildMessage} and three C{len} calls fewer), 28 once the decoder stopped
asking its whole body for a read that begins between objects.  Of the 28, eight are the
locks' C{acquire} and C{release}, taken by hand: a C{with} block counts one
call (its C{__exit__}) but costs about twice the instructions.
"""

MOST_BYTECODES = 454
"""
Most bytecodes one call may run in the client's own modules (L{CLIENT_FILES})
on the compiled core, under CPython 3.11: 462 before a read kept its tick by
its wait's bound alone (no tuple of the timeouts built and compared per
read), the session opened as the preamble's last byte is counted (no test
for it per read after) and the session's call tested its commonest case
once; 441 after; 455 once a CALL's send stopped blocking past the call's
time (one C{MSG_DONTWAIT} send, what it left looked at: the rest, if any,
is sent as the socket drains, within the call's time); 454 once the call
table made the call (its refusals, GOAWAY's and a name's, one test).  Each
costs about 25 to 40 instructions: a count that grows back is the cost
growing back, though the Python calls stay the same.
"""

GENERIC = frozenset(
    f"{name}{suffix}" for name in ("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR") for suffix in ("", "_ADAPTIVE")
)
"""
CPython 3.11's names for an attribute read, method lookup or attribute
store left unspecialized (once warm: its specializer refused it): each
runs the generic lookup, about 170 instructions, where a specialized one
costs about 10.
"""

REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)


def bytecodesRun(action: Callable[[], None], files: tuple[str | None, ...]) -> int:
    """How many bytecodes C{action} runs in the functions of C{files} (C{sys.settrace}'s C{opcode} events)."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename not in files:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


def profiled(action: Callable[[], None]) -> list[tuple[str, str, str]]:
    """
    Every call C{action} makes, in order: C{(kind, name, file)}, kind
    C{"py"} for a Python function (its file), C{"c"} for a built-in (the
    file of the Python function calling it).
    """
    seen: list[tuple[str, str, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            seen.append(("py", frame.f_code.co_name, frame.f_code.co_filename))
        elif event == "c_call":
            seen.append(("c", arg.__name__, frame.f_code.co_filename))

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return [call for call in seen if call[2] != __file__]  # (not the action's own: the lambda, sys.setprofile)


class SequentialCallTests(SynchronousTestCase):
    """
    One thread calling, over a socket pair whose other end holds the answer
    before the call is sent: the call sends its CALL and reads its ANSWER
    in one C{recv} each, the commonest turn.
    """

    def setUp(self) -> None:
        self.client, self.server = socket.socketpair()
        self.addCleanup(self.server.close)
        self.server.sendall(PREAMBLE)
        self.connection = BlockingConnection(self.client, "pair")
        self.connection.start(30.0)
        self.addCleanup(self.connection.close)
        self.decoder = Decoder(registry=REGISTRY)
        self.assertEqual(self.decoder.feed(self.server.recv(len(PREAMBLE))), [])  # (the client's preamble)
        self.encoder = Encoder(REGISTRY)
        self.sent = 0
        self.call()  # (the first of each kind sets up what the next ones reuse: the read's tick)

    def call(self, watch: Callable[[Callable[[], None]], Any] = profiled) -> Any:
        """One C{echo(42)} call, answered; what C{watch} made of it (by default, what it ran)."""
        self.sent += 1
        self.server.sendall(self.encoder.encode(Message((ANSWER, self.sent, 42))))
        results: list[Any] = []
        seen = watch(lambda: results.append(self.connection.root.callRemote("echo", 42)))
        self.assertEqual(results, [42])
        self.assertEqual(
            self.decoder.feed(self.server.recv(65536)), [Message((CALL, self.sent, ROOT_ID, "echo", (42,), {}))]
        )
        return seen

    def test_clientCalls(self) -> None:
        """
        On either core, the client's own modules run these functions and
        built-ins and no others: no clock read, no method for the call
        table's length, no outbox, no reply to send, no thread woken, no
        C{with} block (its two bound methods).
        """
        encoded = [("c", "encode_parts")] if COMPILED is not None else []
        expected = [
            ("py", "callRemote"),
            ("py", "call"),
            ("c", "get"),  # (the thread's callContext: none)
            ("c", "acquire"),  # (the connection's lock, for the session)
            ("py", "call"),  # (the session's)
            ("py", "call"),  # (its call table's: the request id, the refusals, the CALL's fields)
            *encoded,
            ("c", "release"),
            ("py", "_exchange"),
            ("c", "acquire"),  # (the send lock)
            ("c", "send"),  # (MSG_DONTWAIT: whole here, or the rest sent within the call's time)
            ("c", "release"),
            ("c", "acquire"),  # (the connection's lock, to read)
            ("py", "_readTurn"),
            ("c", "release"),
            ("c", "recv"),
            ("c", "acquire"),
            ("py", "receive"),
            ("c", "pop"),
            ("c", "append"),
            ("c", "release"),
        ]
        for _ in range(3):
            ran = [(kind, name) for kind, name, where in self.call() if where in CLIENT_FILES]
            self.assertEqual(ran, expected)

    @needs_compiled
    def test_callsInAll(self) -> None:
        """On the compiled core, a call makes at most L{MOST_CALLS} Python calls, the decoder's included."""
        for _ in range(3):
            seen = self.call()
            self.assertLessEqual(
                len(seen), MOST_CALLS, "\n".join(f"{kind} {name} {where}" for kind, name, where in seen)
            )

    @needs_compiled
    @skipIf(sys.version_info[:2] != (3, 11), "bytecodes counted on CPython 3.11: another version compiles others")
    def test_bytecodesInClient(self) -> None:
        """On the compiled core, a call runs at most L{MOST_BYTECODES} bytecodes in the client's own modules."""
        for _ in range(3):
            self.assertLessEqual(self.call(lambda action: bytecodesRun(action, CLIENT_FILES)), MOST_BYTECODES)

    @skipIf(sys.version_info[:2] != (3, 11), "CPython 3.11's specialized instructions: another version names others")
    def test_attributesSpecialized(self) -> None:
        """
        Once warm, each attribute read or stored and each method looked up
        that a call runs in L{protocols.blocking} is specialized (none in
        L{GENERIC}): not a class attribute read through the instance (the
        connection's read size was, 190 instructions a call), not a callable
        kept on the instance called as a method (its scope reader was, 170).
        """
        for _ in range(100):
            self.call(lambda action: action())
        ran: set[tuple[Any, int]] = set()

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            if frame.f_code.co_filename != protocols.blocking.__file__:
                return None
            frame.f_trace_opcodes = True
            if event == "opcode":
                ran.add((frame.f_code, frame.f_lasti))
            return trace

        def traced(action: Callable[[], None]) -> None:
            sys.settrace(trace)
            try:
                action()
            finally:
                sys.settrace(None)

        self.call(traced)
        generic = []
        for code in {code for code, _ in ran}:
            for instruction in dis.get_instructions(code, adaptive=True):  # type: ignore[call-arg]  # (a 3.11 argument)
                if (code, instruction.offset) in ran and instruction.opname in GENERIC:
                    generic.append(f"{code.co_name}: {instruction.opname} {instruction.argrepr}")
        self.assertEqual(sorted(generic), [])

    def test_waiterDoneOnInstance(self) -> None:
        """
        The waiter a call hands the session holds C{done} itself (not the
        class's default) before its answer comes: the wait's first test of
        it is then the specialized read, not the generic one of a value
        the instance lacks (170 instructions a call).
        """
        results: list[Any] = []
        caller = threading.Thread(target=lambda: results.append(self.connection.root.callRemote("echo", 42)))
        caller.start()
        self.addCleanup(caller.join, 30.0)
        self.addCleanup(self.connection.abort)  # (first: a caller still waiting fails at once)
        self.sent += 1
        # (the CALL came: the call waits in the table, unanswered)
        self.assertEqual(
            self.decoder.feed(self.server.recv(65536)), [Message((CALL, self.sent, ROOT_ID, "echo", (42,), {}))]
        )
        [(waiter, name)] = self.connection._session.pending.values()
        self.assertEqual((name, vars(waiter)), ("echo", {"done": False}))
        self.server.sendall(self.encoder.encode(Message((ANSWER, self.sent, 42))))
        caller.join(30.0)
        self.assertEqual(results, [42])
