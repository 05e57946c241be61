"""One scripted conversation answered by every shell: each sends the same bytes back.

A L{AnsweringPeer} (L{tests.protocols.rpc.scripted.ScriptedSide}: a raw
socket speaking the wire format) calls an object the shell under test
exports, and records what the shell sends back at each step.  The shells:
the Twisted server (L{protocols.rpc.serve}, the object its root gives), and
the Twisted client (L{protocols.rpc.connect}), the blocking client
(L{protocols.blocking}) and the asyncio client (L{protocols.asyncioclient}),
each answering the peer's calls on the object it passed in a call of its
own.  Every shell allows one running call (C{CallLimits(maxRunning=1)}).
The script, by C{docs/wire-format.md} section 12: an ANSWER; a FAIL of a
registered error (its wire name and C{args}) and of an unregistered one
(its qualified name, no details, no traceback: tracebacks are off by
default on every shell); a call to no object and to no method, refused;
a call context whose deadline had passed (0 ms: a FAIL
C{DeadlineExceeded}, the connection kept, 12.7); a call with metadata; a
PING answered by a PONG; a call refused while another runs
(C{too-many-running-calls}); a CANCEL of the running call (nothing sent
for it, 12.3), the method then asked whether it was stopped; a call whose
deadline passes while it runs (a FAIL C{DeadlineExceeded}, its work
stopped, 12.7), asked again; a RELEASE of the export and a call to it
then (C{NoSuchObject}, 12.5).  The steps' bytes must be equal between
the shells, but for these allowances, each legitimately different:

 - B{the setup}: how the peer comes to hold the object (the server's root
   answers a call with it; a client passes it in a call to the peer's
   root), with each side's preamble, and how the conversation ends (the
   peer closes the server's connection; it answers the client's call with
   a GOAWAY, and the client closes).  That is calling and serving, which
   C{test_same_bytes} compares; here the steps between are compared.
 - B{the blocking client cannot stop a plain method}: it runs the peer's
   calls on the thread that read them, and no thread can be interrupted,
   so after a CANCEL, and after a deadline passed, its method runs to its
   end (12.3: the callee stops the work "if it can").  It sends the same
   bytes (nothing after the CANCEL; the FAIL C{DeadlineExceeded} when the
   method returns, as it has no timer to send it at the deadline), but
   the method, asked, says it returned rather than was cancelled: those
   two ANSWERs are checked to say so and replaced by the others'.

How the bytes are cut into writes is no difference: a step's bytes are all
the shell sent between two of the peer's sends.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing import Encoder
from framing.rpc._errors import registerError
from framing.rpc._limits import CallLimits
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, GOAWAY, RELEASE, Message
from framing.wire import PING, PONG, PREAMBLE, encode_header
from protocols import asyncioclient, blocking
from protocols.options import ClientOptions
from protocols.rpc import Referenceable, connect, remote, serve
from protocols.rpc._options import ServerOptions

from ..helpers import pytestTest, trialTest
from .scripted import WAIT, ScriptedSide, peerRegistry

LIMITS = CallLimits(maxRunning=1)
"""Every shell's call limits: one of the peer's calls running at once (the script reaches the bound)."""

DEADLINE_MS = 50
"""The deadline, in milliseconds, of the call that outlives it."""

TARGET = 1
"""The export id the peer calls: the object every shell exported first."""


class Overdrawn(Exception):
    """The registered error a method fails with: it travels by its wire name, with its C{args}."""


registerError(Overdrawn, "tests.sameAnswers.Overdrawn")


class Unregistered(Exception):
    """An error no registry names: it travels by its qualified name, without details."""


class Answering(Referenceable):
    """
    The object the peer calls, one subclass per shell for L{hold} (a call
    that runs until it is stopped, each shell's way).

    @ivar outcome: how the last L{hold} ended (C{"cancelled"}, C{"returned"}), or C{"running"}.
    """

    outcome = "running"

    @remote
    def echo(self, value: Any) -> Any:
        return value

    @remote
    def withdraw(self, amount: int) -> int:
        raise Overdrawn(amount)

    @remote
    def explode(self) -> None:
        raise Unregistered("no registry names this")

    @remote
    def held(self) -> str:
        """How the last L{hold} ended."""
        return self.outcome

    def hold(self) -> Any:
        raise NotImplementedError


class TwistedAnswering(Answering):
    """L{hold} on Twisted: a Deferred that never fires, whose cancelling is noted."""

    @remote
    def hold(self) -> Deferred[None]:
        self.outcome = "running"
        return Deferred(lambda _: setattr(self, "outcome", "cancelled"))


class AsyncAnswering(Answering):
    """L{hold} on asyncio: a coroutine awaiting what never comes, whose cancelling is noted."""

    @remote
    async def hold(self) -> None:
        self.outcome = "running"
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            raise


class BlockingAnswering(Answering):
    """
    L{hold} on the blocking client: it waits on its thread until the peer's
    script lets it go (L{AnsweringPeer.hooks}): no thread can be stopped.

    @ivar holds: per L{hold} started, when it started and the events that let it go and that say it ended.
    """

    def __init__(self) -> None:
        self.holds: queue.Queue[tuple[float, threading.Event, threading.Event]] = queue.Queue()
        self.began = threading.Event()

    @remote
    def hold(self) -> None:
        self.outcome = "running"
        release, ended = threading.Event(), threading.Event()
        self.holds.put((time.monotonic(), release, ended))
        self.began.set()
        try:
            release.wait(WAIT)
        finally:
            self.outcome = "returned"
            ended.set()

    def beforeCancel(self) -> None:
        """
        The held call runs before its CANCEL is sent: the thread that read
        it may not have taken it yet, and a call cancelled before it is
        taken never runs (L{framing.rpc._incoming.IncomingCalls.cancelled}).
        """
        assert self.began.wait(WAIT)

    def afterCancel(self) -> None:
        """The CANCEL was read: let the held call return (its answer is dropped), and wait for it."""
        _, release, ended = self.holds.get(timeout=WAIT)
        release.set()
        assert ended.wait(WAIT)

    def afterDeadlineCall(self) -> None:
        """
        The call with a deadline was sent: let it return once its deadline
        passed on the client's clock (it started after the client read the
        CALL, so its start plus the deadline is no earlier): the method's
        work outlives its deadline, which is what the step is about.
        """
        started, release, _ = self.holds.get(timeout=WAIT)
        time.sleep(max(0.0, started + DEADLINE_MS / 1000 - time.monotonic()))
        release.set()


class Front(Referenceable):
    """The Twisted server's root: it gives the object the peer calls (exported as 1)."""

    def __init__(self, answering: Answering) -> None:
        self.answering = answering

    @remote
    def answering(self) -> Referenceable:
        return self.answering


# -- the peer -----------------------------------------------------------------------------------------------


class AnsweringPeer(ScriptedSide):
    """
    The peer that calls the shell's object (see the module docstring): a
    client of the Twisted server (L{connectTo}), or a server the clients
    connect to (L{listen}).

    @ivar server: the shell is the Twisted server.
    @ivar hooks: what to do at a step, by name, besides the script (the
        blocking client's L{hold}, let go).
    """

    def __init__(self, server: bool, hooks: dict[str, Callable[[], None]] | None = None) -> None:
        super().__init__()
        self.server = server
        self.hooks = hooks or {}

    def hook(self, name: str) -> None:
        hook = self.hooks.get(name)
        if hook is not None:
            hook()

    def script(self) -> None:
        """The peer's half (see the module docstring)."""
        if self.server:
            self.send(PREAMBLE, Message((CALL, 1, 0, "answering", None)))
            self.expect("setup", 1)  # the preamble, ANSWER 1 <its export 1>
        else:
            self.send(PREAMBLE)
            self.expect("setup", 1)  # the preamble, CALL 1 subscribe(<its export 1>)
        self.send(Message((CALL, 11, TARGET, "echo", None, 7)))
        self.expect("answer", 1)
        self.send(Message((CALL, 12, TARGET, "withdraw", None, 100)))
        self.expect("registered error", 1)
        self.send(Message((CALL, 13, TARGET, "explode", None)))
        self.expect("unregistered error", 1)
        self.send(Message((CALL, 14, 99, "echo", None, 1)))
        self.expect("no such object", 1)
        self.send(Message((CALL, 15, TARGET, "nope", None)))
        self.expect("no such method", 1)
        self.send(Message((CALL, 16, TARGET, "echo", (None, 0, None), 1)))
        self.expect("deadline passed", 1)
        self.send(Message((CALL, 17, TARGET, "echo", (None, None, {"tenant": "t1"}), "m")))
        self.expect("metadata", 1)
        self.send(encode_header(PING, 7))
        self.expect("pong", 1)
        # The held call runs: the next, in the same write, is past the bound.
        self.send(Message((CALL, 18, TARGET, "hold", None)), Message((CALL, 19, TARGET, "echo", None, 2)))
        self.expect("too many running", 1)
        # Nothing for the cancelled call: the PONG says the CANCEL was read.
        self.hook("before cancel")
        self.send(Message((CANCEL, 18)), encode_header(PING, 8))
        self.expect("cancel", 1)
        self.hook("after cancel")
        self.send(Message((CALL, 20, TARGET, "held", None)))
        self.expect("after cancel", 1)
        self.send(Message((CALL, 21, TARGET, "hold", (None, DEADLINE_MS, None))))
        self.hook("after deadline call")
        self.expect("deadline while running", 1)
        self.send(Message((CALL, 22, TARGET, "held", None)))
        self.expect("after deadline", 1)
        self.send(Message((RELEASE, TARGET, 1)), Message((CALL, 23, TARGET, "echo", None, 3)))
        self.expect("released", 1)
        if not self.server:
            self.send(Message((ANSWER, 1, None)), Message((GOAWAY, 5000)))
            self.expectEnd()


STEPS = [
    "answer",
    "registered error",
    "unregistered error",
    "no such object",
    "no such method",
    "deadline passed",
    "metadata",
    "pong",
    "too many running",
    "cancel",
    "after cancel",
    "deadline while running",
    "after deadline",
    "released",
]
"""The steps compared (the setup and the end are not: see the module docstring)."""


def compared(peer: AnsweringPeer) -> list[tuple[str, bytes]]:
    """The peer's steps between the setup and the end."""
    steps = [step for step in peer.steps if step[0] in STEPS]
    assert [name for name, _ in steps] == STEPS, peer.steps
    return steps


# -- the shells ---------------------------------------------------------------------------------------------


async def twistedServer(reactor: Any) -> list[tuple[str, bytes]]:
    """The steps as the Twisted server answered them."""
    answering = TwistedAnswering()
    port = await serve(reactor, "tcp:0:interface=127.0.0.1", Front(answering), options=ServerOptions(callLimits=LIMITS))
    try:
        peer = AnsweringPeer(server=True)
        peer.connectTo(port.getHost().port)
        await deferToThread(peer.join)
    finally:
        await port.stopListening()
    assert answering.outcome == "cancelled"
    return compared(peer)


async def twistedClient(reactor: Any) -> list[tuple[str, bytes]]:
    """The steps as the Twisted client answered them, on the object it passed."""
    peer = AnsweringPeer(server=False)
    peer.listen()
    answering = TwistedAnswering()
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={peer.port}", options=ClientOptions(callLimits=LIMITS))
    assert await root.callRemote("subscribe", answering) is None
    await deferToThread(peer.join)
    await root.broker.whenDisconnected()
    assert answering.outcome == "cancelled"
    return compared(peer)


def blockingClient() -> list[tuple[str, bytes]]:
    """The steps as the blocking client answered them: one thread calls, another serves meanwhile."""
    answering = BlockingAnswering()
    peer = AnsweringPeer(
        server=False,
        hooks={
            "before cancel": answering.beforeCancel,
            "after cancel": answering.afterCancel,
            "after deadline call": answering.afterDeadlineCall,
        },
    )
    peer.listen()
    connection = blocking.connect(("127.0.0.1", peer.port), options=ClientOptions(callLimits=LIMITS))
    assert isinstance(connection, blocking.BlockingConnection)

    def serving() -> None:
        try:
            while not connection.ended and connection.serve(WAIT):
                pass
        except Exception:
            pass  # (the connection ended: the peer's GOAWAY, then this side's close)

    server = threading.Thread(target=serving, name="serving", daemon=True)
    server.start()
    try:
        assert connection.root.callRemote("subscribe", answering) is None
        peer.join()
        server.join(WAIT)
        assert not server.is_alive()
        assert connection.ended
    finally:
        connection.close()
    assert answering.outcome == "returned"
    return compared(peer)


async def asyncioClient() -> list[tuple[str, bytes]]:
    """The steps as the asyncio client answered them, on the object it passed."""
    peer = AnsweringPeer(server=False)
    peer.listen()
    answering = AsyncAnswering()
    connection = await asyncioclient.connect(("127.0.0.1", peer.port), options=ClientOptions(callLimits=LIMITS))
    assert isinstance(connection, asyncioclient.AsyncConnection)
    try:
        assert await connection.root.callRemote("subscribe", answering) is None
        assert await asyncio.to_thread(peer.ended.wait, WAIT)
        peer.join()
    finally:
        await connection.close()
    assert answering.outcome == "cancelled"
    return compared(peer)


# -- comparing ------------------------------------------------------------------------------------------------


def encoded(*messages: Any) -> bytes:
    encoder = Encoder(peerRegistry())
    return b"".join(m if type(m) is bytes else encoder.encode(m) for m in messages)


def withoutAllowances(steps: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """
    The blocking client's steps with its method's own word on how it ended
    replaced by the others' (the one allowance in its bytes: see the
    module docstring), after checking it says it returned.
    """
    replaced = {
        "after cancel": (Message((ANSWER, 20, "returned")), Message((ANSWER, 20, "cancelled"))),
        "after deadline": (Message((ANSWER, 22, "returned")), Message((ANSWER, 22, "cancelled"))),
    }
    result = []
    for name, data in steps:
        if name in replaced:
            sent, instead = replaced[name]
            assert data == encoded(sent), (name, data)
            data = encoded(instead)
        result.append((name, data))
    return result


async def sameAnswers(reactor: Any) -> None:
    """The Twisted server and the Twisted, blocking and asyncio clients answer the same calls with the same bytes."""
    server = await twistedServer(reactor)
    client = await twistedClient(reactor)
    blocked = await deferToThread(blockingClient)
    asynchronous = await deferToThread(asyncio.run, asyncioClient())

    steps = dict(server)
    # The answers as the Twisted server sent them (a check of the script, not of the shells).
    assert steps["answer"] == encoded(Message((ANSWER, 11, 7)))
    assert steps["registered error"] == encoded(Message((FAIL, 12, "tests.sameAnswers.Overdrawn", "100", None, (100,))))
    assert steps["pong"] == encode_header(PONG, 7)
    assert steps["cancel"] == encode_header(PONG, 8)
    assert steps["after cancel"] == encoded(Message((ANSWER, 20, "cancelled")))
    assert steps["after deadline"] == encoded(Message((ANSWER, 22, "cancelled")))
    assert steps["metadata"] == encoded(Message((ANSWER, 17, "m")))

    assertSame("the Twisted client", client, server)
    assertSame("the asyncio client", asynchronous, server)
    assertSame("the blocking client", withoutAllowances(blocked), server)


def assertSame(shell: str, steps: list[tuple[str, bytes]], expected: list[tuple[str, bytes]]) -> None:
    """C{steps} are C{expected}'s; else every step that differs is named, with both sides' messages."""
    decoded = [
        (name, peerDecoded(a), peerDecoded(b)) for (name, a), (_, b) in zip(steps, expected, strict=True) if a != b
    ]
    assert not decoded, f"{shell} differs from the Twisted server at {decoded}"


def peerDecoded(data: bytes) -> list[Any]:
    from framing import Decoder, Limits

    decoder = Decoder(Limits(), peerRegistry())
    decoder.feed(PREAMBLE)
    got = list(decoder.feed(data))
    return got + list(decoder.control_events)


class SameAnswersTests(TestCase):
    test_same_answers = trialTest(sameAnswers)


test_same_answers = pytestTest(sameAnswers)
