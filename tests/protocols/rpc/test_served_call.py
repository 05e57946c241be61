"""What a server does for one plain call: the Python functions of framing/ and protocols/ it runs, counted."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from twisted.internet import tcp
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

import framing
import framing._decoder
import framing._scanner
import framing.rpc._incoming
import protocols
import protocols._guard
import protocols._inbound
import protocols.rpc._answering
import protocols.rpc._broker
from framing.rpc._session import ClientSession
from framing.rpc._wire import ROOT_ID
from framing.wire import PREAMBLE
from protocols import rpc
from protocols._guard import DEFAULT_GUARD
from protocols.rpc._broker import BrokerFactory

from ...framing.test_cores import needs_compiled

ROOTS = tuple(package.__file__.rsplit("/", 1)[0] + "/" for package in (framing, protocols))  # type: ignore[union-attr]


def calledIn(action: Callable[[], None]) -> list[str]:
    """The functions of framing/ and protocols/ that C{action} calls, in order."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(ROOTS):
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return called


class Echo(rpc.Referenceable):
    @rpc.remote
    def echo(self, value: Any) -> Any:
        return value


class RecordingSocket:
    """A socket stand-in that takes whole whatever it is sent, and keeps it."""

    def __init__(self) -> None:
        self.sent = bytearray()
        self.sends = 0

    def send(self, data: bytes) -> int:
        self.sends += 1
        self.sent += data
        return len(data)

    def value(self) -> bytes:
        """What it was sent and has not forgotten (as C{StringTransport.value})."""
        return bytes(self.sent)

    def clear(self) -> None:
        """Forget what it was sent."""
        self.sent.clear()


class ServedCallTests(SynchronousTestCase):
    """A read holding one plain CALL, on a server connection as C{serve} makes it (guarded, no interceptors)."""

    def makeTransport(self) -> tuple[Any, Any]:
        """The transport to serve on, and where what it sends is found (with C{value} and C{clear})."""
        transport = StringTransport()
        return transport, transport

    def setUp(self) -> None:
        clock = Clock()
        self.connection = BrokerFactory(Echo(), clock=clock, guard=DEFAULT_GUARD).buildProtocol(None)
        self.transport, self.sent = self.makeTransport()
        self.connection.makeConnection(self.transport)
        self.connection.dataReceived(PREAMBLE)
        clock.advance(0)
        self.session: ClientSession[int] = ClientSession("test")
        self.session.receive(self.sent.value())
        self.sent.clear()
        self.call(0)  # (the first answer of its kind finds how to encode it; the rest do not)

    def call(self, number: int) -> list[str]:
        """Make call C{number} (C{echo(42)}); the functions the server's read of it ran."""
        _, data = self.session.call(number, ROOT_ID, "echo", (42,), {})
        called = calledIn(lambda: self.connection.dataReceived(data))
        self.assertEqual(self.session.receive(self.sent.value()), [(number, 42, None)])
        self.sent.clear()
        return called

    @needs_compiled
    def test_functionsOfOneCall(self) -> None:
        """
        With the compiled core, one call runs these functions and no others: no deadline or metadata
        (none was sent), no interceptor or extension (none is installed), no send block made for its one answer,
        the CALL built by the compiled reader (no buildMessage), one call to the guard per read (dataRead), which
        moves nothing in the connection counter for the connection already most recently active, and no
        boundary question asked of the decoder.  The call is admitted by the rule every shell shares (admit: its
        lookups are subscripts, and a call within the method's argument counts with no keyword arguments and no
        constraints calls no argument check).  (Any of those undone adds a function here.)
        """
        expected = [
            *("dataReceived", "dataReceived", "hold", "_decode"),  # (the protocol's, then its Inbound's)
            *("feed", "feed"),
            *("objectReceived", "callReceived", "admit", "_sendAnswer"),
            *("sendObject", "tokens", "write_piece", "flush"),
            "dataRead",
            *("release", "flushNow", "take_sized", "write", "sendNow"),
        ]
        for number in range(1, 4):
            self.assertEqual(self.call(number), expected)

    @needs_compiled
    def test_builtinsOfTheReceiveSide(self) -> None:
        """
        With the compiled core, the receive side (from the read to the method call, its admission included, and the
        guard) makes these built-in calls and no others: the whole CALL read in one call of the compiled reader, no
        whole body asked of between objects, no counter read before and after the read, and no clock read but the
        guard's (through the reactor's C{seconds}, a Python function of this test's clock, not counted here).
        """
        receiving = tuple(
            module.__file__
            for module in (
                framing._decoder,
                framing._scanner,
                protocols._inbound,
                protocols._guard,
                protocols.rpc._broker,
                protocols.rpc._answering,
                framing.rpc._incoming,
            )
        )
        expected = [
            *(("scanner", "read"), ("scanner", "len")),
            *(("decoder", "copy"), ("decoder", "clear"), ("decoder", "len")),
            ("inbound", "isinstance"),
            ("answering", "len"),
            *(("incoming", "len"), ("incoming", "len")),  # (the running calls, the arguments: admit's only built-ins)
            *(("answering", "set"), ("answering", "reset")),
            *(("inbound", "len"), ("inbound", "len")),
        ]
        for number in range(1, 4):
            _, data = self.session.call(number, ROOT_ID, "echo", (42,), {})
            called: list[tuple[str, str]] = []

            def profile(frame: FrameType, event: str, arg: Any, called: list[tuple[str, str]] = called) -> None:
                where = frame.f_code.co_filename
                if event == "c_call" and where in receiving:
                    called.append((where.rsplit("/", 1)[1][: -len(".py")].removeprefix("_"), arg.__name__))

            sys.setprofile(profile)
            try:
                self.connection.dataReceived(data)
            finally:
                sys.setprofile(None)
            self.assertEqual(self.session.receive(self.sent.value()), [(number, 42, None)])
            self.sent.clear()
            self.assertEqual(called, expected)

    def test_nothingForWhatTheCallDoesNotUse(self) -> None:
        """
        On either core, a plain call runs nothing of deadlines and metadata, interceptors or object streams
        (every broker loads them; a call that uses none costs nothing there).
        """
        unused = ("protocols/rpc/_context.py", "protocols/rpc/_interceptors.py", "protocols/rpc/_streams.py")
        files: list[str] = []

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                files.append(frame.f_code.co_filename)

        _, data = self.session.call(1, ROOT_ID, "echo", (42,), {})
        sys.setprofile(profile)
        try:
            self.connection.dataReceived(data)
        finally:
            sys.setprofile(None)
        self.assertEqual(self.session.receive(self.sent.value()), [(1, 42, None)])
        self.assertIn(protocols.rpc._answering.__file__, files)
        self.assertEqual([name for name in files if name.endswith(unused)], [])


class DirectlySentCallTests(ServedCallTests):
    """
    The same, on a connection of Twisted's own whose socket takes everything: each answer leaves in one send
    straight to the socket, and deciding that it may costs no call of its own (the list above ends with sendNow).
    """

    def makeTransport(self) -> tuple[Any, Any]:
        connection = tcp.Server.__new__(tcp.Server)  # (never connected: only its socket is written to)
        connection.socket = RecordingSocket()
        connection.connected = 1
        connection._tempDataLen = 0
        return connection, connection.socket

    def test_oneSendPerAnswer(self) -> None:
        """Each call's answer is one send to the socket."""
        sends = self.sent.sends
        self.call(1)
        self.call(2)
        self.assertEqual(self.sent.sends, sends + 2)
