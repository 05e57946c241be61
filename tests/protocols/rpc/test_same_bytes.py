"""One scripted conversation through every client shell: each sends the same bytes.

The Twisted client (L{protocols.rpc.connect}), the blocking client
(L{protocols.blocking}) and the asyncio client (L{protocols.asyncioclient})
each hold one conversation with a L{ScriptedPeer}, a server played from a
script on a thread of its own that records what the client sends at each
step: the preambles, a call answered (with a PING answered by a PONG while
it waits), a call failed with a registered error (rebuilt as itself), a
call with metadata and a deadline, a reference to the client's object passed
and called back (then released by the server), a call of the server's to
no object refused in the read that also brings a PING, a stream of objects in the
arguments sent under the server's credit, and GOAWAY (the next call fails
without being sent, and the client closes the connection once nothing is
in flight, section 12.1 of C{docs/wire-format.md}, without being told to).
The steps' bytes must be equal between the shells, but for these
allowances, each legitimately different:

 - B{the deadline's milliseconds}: a CALL carries the time its deadline
   leaves when it is sent, read on the shell's own clock (the reactor's, or
   C{time.monotonic}), so the INT differs by the time the shells took.  It
   is checked to be within the call context's timeout and replaced by the
   timeout itself (the message re-encoded, and the original bytes checked to
   be that message's encoding first).
 - B{the blocking client sends no stream}: it has no thread of its own to
   pull one (L{framing.rpc._clientstreams.StreamArgumentRefused}, raised
   before anything is sent).  Its transcript is the others' without the
   stream's steps; the request id the refused call took is not reused, so
   its later messages are byte for byte the others'.

How the bytes are cut into writes (the Twisted client's held preamble shares
the first call's write; the asyncio client gathers a turn's messages) is no
difference: a step's bytes are all the client sent between two of the
peer's sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing import Encoder, Pong
from framing.rpc._clientstreams import StreamArgumentRefused
from framing.rpc._errors import DeadReferenceError, registerError
from framing.rpc._streams import CREDIT, END, ITEM, FlowMessage
from framing.rpc._wire import ANSWER, CALL, FAIL, GOAWAY, RELEASE, Message
from framing.wire import PING, PONG, PREAMBLE, encode_header
from protocols import asyncioclient, blocking
from protocols._clientcontext import callContext as clientContext
from protocols.rpc import Referenceable, connect, remote
from protocols.rpc._context import callContext as twistedContext

from ..helpers import pytestTest, trialTest
from .scripted import WAIT, ScriptedSide, peerRegistry

TIMEOUT_MS = 600_000
"""The call context's timeout, in milliseconds: what the deadline's INT is replaced with (see the module docstring)."""

PING_ID = 7


class Overdrawn(Exception):
    """The registered error the peer fails a call with: every client rebuilds it as itself."""


registerError(Overdrawn, "tests.sameBytes.Overdrawn")


class Listener(Referenceable):
    """The client's object passed to the peer, which calls it back."""

    def __init__(self) -> None:
        self.notes: list[int] = []

    @remote
    def notify(self, number: int) -> int:
        self.notes.append(number)
        return number + 1


async def numbers(count: int) -> AsyncIterator[int]:
    """The stream the clients send in a call's arguments."""
    for number in range(1, count + 1):
        yield number


# -- the peer -----------------------------------------------------------------------------------------------


class ScriptedPeer(ScriptedSide):
    """
    A server on 127.0.0.1 (port 0) that plays L{script} to the one client
    that connects (L{tests.protocols.rpc.scripted.ScriptedSide}); its last
    step is C{("end", bytes)}, what came before the client closed.
    """

    def __init__(self, streams: bool) -> None:
        super().__init__()
        self.streams = streams
        self.listen()

    def script(self) -> None:
        """The server's half of the conversation (see the module docstring)."""
        self.send(PREAMBLE)
        self.expect("preamble, call", 1)  # CALL 1 echo(7)
        self.send(encode_header(PING, PING_ID))
        self.expect("pong", 1)
        self.send(Message((ANSWER, 1, 7)))
        self.expect("call to fail", 1)  # CALL 2 withdraw(100)
        self.send(Message((FAIL, 2, "tests.sameBytes.Overdrawn", "overdrawn by 100", None, (100,))))
        self.expect("call with a deadline", 1)  # CALL 3 echo("x"), its call context
        self.send(Message((ANSWER, 3, "x")))
        self.expect("reference passed", 1)  # CALL 4 subscribe(<its export 1>)
        # A call to no object and a PING in one read: the PONG goes before the FAIL the call earns.
        self.send(Message((CALL, 1, 99, "nothing", None)), encode_header(PING, PING_ID + 1))
        self.expect("refused call, ping", 2)
        self.send(Message((CALL, 2, 1, "notify", None, 41)))
        self.expect("callback answered", 1)  # ANSWER 2 42
        self.send(Message((ANSWER, 4, None)), Message((RELEASE, 1, 1)))
        requestId = 6
        if self.streams:
            self.expect("stream announced", 1)  # CALL 5 upload(<its stream 1>)
            self.send(FlowMessage((CREDIT, 1, 2, 1 << 20)))
            self.expectItems("items under credit", 2)
            self.send(FlowMessage((CREDIT, 1, 2, 1 << 20)))
            self.expectFlow("rest and end", END)
            self.send(Message((ANSWER, 5, 3)))
        self.expect("call before goaway", 1)  # CALL 6 echo(8) (5 went to the stream's call)
        self.send(Message((GOAWAY, 5000)), Message((ANSWER, requestId, 8)))
        self.expectEnd()

    def expectItems(self, name: str, count: int) -> list[Any]:
        """Read until flow messages carrying C{count} items came."""
        return self.read(name, lambda got: sum(len(o) - 2 for o in got if _flow(o, ITEM)) >= count)

    def expectFlow(self, name: str, tag: int) -> list[Any]:
        """Read until a flow message C{tag} came."""
        return self.read(name, lambda got: any(_flow(o, tag) for o in got))


def _flow(obj: Any, tag: int) -> bool:
    return type(obj) is FlowMessage and obj[0] == tag


# -- the clients' halves, each in its shell's own way -------------------------------------------------------


async def twistedConversation(reactor: Any, peer: ScriptedPeer) -> None:
    """The client's half on the Twisted client."""
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={peer.port}")
    assert await root.callRemote("echo", 7) == 7
    try:
        await root.callRemote("withdraw", 100)
    except Overdrawn as error:
        assert error.args == (100,)
    else:
        raise AssertionError("withdraw did not fail")
    with twistedContext(timeout=TIMEOUT_MS / 1000, metadata={"tenant": "t1"}):
        answered = root.callRemote("echo", "x")
    assert await answered == "x"
    listener = Listener()
    assert await root.callRemote("subscribe", listener) is None
    assert listener.notes == [41]
    assert await root.callRemote("upload", numbers(3)) == 3
    assert await root.callRemote("echo", 8) == 8
    try:
        await root.callRemote("echo", 9)
    except DeadReferenceError:
        pass
    else:
        raise AssertionError("a call after GOAWAY was sent")
    # Closed by the client itself once idle: nothing here closes it.
    await deferToThread(peer.ended.wait, WAIT)
    await root.broker.whenDisconnected()


def blockingConversation(peer: ScriptedPeer) -> None:
    """The client's half on the blocking client (no stream: see the module docstring)."""
    connection = blocking.connect(("127.0.0.1", peer.port))
    assert isinstance(connection, blocking.BlockingConnection)
    try:
        root = connection.root
        assert root.callRemote("echo", 7) == 7
        try:
            root.callRemote("withdraw", 100)
        except Overdrawn as error:
            assert error.args == (100,)
        else:
            raise AssertionError("withdraw did not fail")
        with clientContext(timeout=TIMEOUT_MS / 1000, metadata={"tenant": "t1"}):
            assert root.callRemote("echo", "x") == "x"
        listener = Listener()
        assert root.callRemote("subscribe", listener) is None
        assert listener.notes == [41]
        stream = numbers(3)
        try:
            root.callRemote("upload", stream)
        except StreamArgumentRefused:
            pass
        else:
            raise AssertionError("the blocking client sent a stream")
        assert root.callRemote("echo", 8) == 8
        try:
            root.callRemote("echo", 9)
        except DeadReferenceError:
            pass
        else:
            raise AssertionError("a call after GOAWAY was sent")
        # Closed by the client itself once idle: nothing here closes it.
        assert peer.ended.wait(WAIT)
        assert connection.ended
    finally:
        connection.close()


async def asyncioConversation(peer: ScriptedPeer) -> None:
    """The client's half on the asyncio client."""
    connection = await asyncioclient.connect(("127.0.0.1", peer.port))
    assert isinstance(connection, asyncioclient.AsyncConnection)
    try:
        root = connection.root
        assert await root.callRemote("echo", 7) == 7
        try:
            await root.callRemote("withdraw", 100)
        except Overdrawn as error:
            assert error.args == (100,)
        else:
            raise AssertionError("withdraw did not fail")
        with clientContext(timeout=TIMEOUT_MS / 1000, metadata={"tenant": "t1"}):
            assert await root.callRemote("echo", "x") == "x"
        listener = Listener()
        assert await root.callRemote("subscribe", listener) is None
        assert listener.notes == [41]
        assert await root.callRemote("upload", numbers(3)) == 3
        assert await root.callRemote("echo", 8) == 8
        try:
            await root.callRemote("echo", 9)
        except DeadReferenceError:
            pass
        else:
            raise AssertionError("a call after GOAWAY was sent")
        # Closed by the client itself once idle: nothing here closes it.
        assert await asyncio.to_thread(peer.ended.wait, WAIT)
        assert connection.ended
    finally:
        await connection.close()


# -- comparing ------------------------------------------------------------------------------------------------


def normalized(peer: ScriptedPeer) -> list[tuple[str, bytes]]:
    """
    The peer's steps with the deadline's milliseconds replaced by the
    timeout (the one allowance in the bytes: see the module docstring).
    """
    steps = []
    encoder = Encoder(peerRegistry())
    for (name, data), objects in zip(peer.steps, peer.objects, strict=True):
        if name == "call with a deadline":
            [call] = objects
            _, requestId, target, method, args, kwargs, deadline, metadata = call
            assert 0 < deadline <= TIMEOUT_MS, deadline
            sent = Message((CALL, requestId, target, method, (kwargs or None, deadline, metadata), *args))
            assert encoder.encode(sent) == data, (data, call)
            data = encoder.encode(Message((CALL, requestId, target, method, (None, TIMEOUT_MS, metadata), *args)))
        steps.append((name, data))
    return steps


STREAM_STEPS = ("stream announced", "items under credit", "rest and end")


async def sameBytes(reactor: Any) -> None:
    """The Twisted, blocking and asyncio clients send the same bytes in the same conversation."""
    twisted = ScriptedPeer(streams=True)
    await twistedConversation(reactor, twisted)
    twisted.join()
    blocked = ScriptedPeer(streams=False)
    await deferToThread(blockingConversation, blocked)
    blocked.join()
    asynchronous = ScriptedPeer(streams=True)
    await deferToThread(asyncio.run, asyncioConversation(asynchronous))
    asynchronous.join()

    expected = normalized(twisted)
    # The conversation as the peer read it from the Twisted client (a check of the script, not of the shells).
    assert [name for name, _ in expected] == [
        "preamble, call",
        "pong",
        "call to fail",
        "call with a deadline",
        "reference passed",
        "refused call, ping",
        "callback answered",
        *STREAM_STEPS,
        "call before goaway",
        "end",
    ]
    assert expected[0][1].startswith(PREAMBLE)
    assert twisted.objects[1] == [Pong(PING_ID)]
    assert expected[5][1].startswith(encode_header(PONG, PING_ID + 1))  # (then the FAIL)
    assert expected[-1] == ("end", b"")
    assert normalized(asynchronous) == expected
    assert normalized(blocked) == [step for step in expected if step[0] not in STREAM_STEPS]


class SameBytesTests(TestCase):
    test_same_bytes = trialTest(sameBytes)


test_same_bytes = pytestTest(sameBytes)
