"""The same interceptors on every client: the Twisted, blocking and asyncio clients tell them the same of each call.

One real server (Twisted, in this process, port 0) records the CALLs it
receives with their metadata.  Each client connects to it with the same
interceptors (L{Recording}, which records every start and end; L{Tagging},
which adds metadata; L{Refusing}, which refuses one method; L{Tallying}, a
recorder with C{tallyFor} only) and makes the same calls: one answered, one
failing with the method's error, one to no such method, one refused here,
one past its deadline.  Every client must tell the interceptors the same
sequence of C{(method, side, outcome, errorType)}, send nothing of the
refused call, and send what L{Tagging} added with the others (with the
connection's metadata).  A connection with a recorder alone (kept as
C{(method, start)}, no L{CallInfo}) counts its calls in the same tallies.
The blocking and asyncio clients run on threads of their own while the
reactor serves.
"""

from __future__ import annotations

import asyncio
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing.rpc._interception import CLIENT, ERROR, OK, REFUSED, SERVER, CallInfo, CallTally
from protocols import asyncioclient, blocking
from protocols._clientcontext import callContext as clientContext
from protocols.options import ClientOptions
from protocols.rpc import Referenceable, connect, remote, serve
from protocols.rpc._context import callContext as twistedContext
from protocols.rpc._interceptors import CallInterceptor
from protocols.rpc._options import ServerOptions

from ..helpers import pytestTest, trialTest

WAIT = 60.0
"""Seconds a client thread may take: only a hang misses it."""

DEADLINE = 0.2
"""The deadline of the call that never answers, in seconds."""

STEPS: list[tuple[str, float | None]] = [
    ("echo", None),
    ("fail", None),
    ("nothing", None),
    ("forbidden", None),
    ("hang", DEADLINE),
]
"""The calls every client makes, in order: the method, and its call context's timeout (or none)."""

EXPECTED = [
    ("echo", CLIENT, OK, None),
    ("fail", CLIENT, ERROR, "KeyError"),
    ("nothing", CLIENT, REFUSED, "NoSuchMethod"),
    ("forbidden", CLIENT, REFUSED, "PermissionError"),
    ("hang", CLIENT, ERROR, "chunkwire.DeadlineExceeded"),
]
"""What L{Recording} hears of L{STEPS}, on every client."""


class Service(Referenceable):
    """The server's root."""

    @remote
    def echo(self, value: Any = None) -> Any:
        return value

    @remote
    def fail(self) -> None:
        raise KeyError("missing")

    @remote
    def forbidden(self) -> str:
        return "should never run"

    @remote
    def hang(self) -> Deferred[None]:
        return Deferred()


class Received(CallInterceptor):
    """The server's: every call received, with its metadata."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []

    def callStarted(self, call: CallInfo) -> None:
        if call.side == SERVER:
            self.calls.append((call.method, dict(call.metadata)))


class Recording(CallInterceptor):
    """Records each start and each end, as (method, side, outcome, errorType)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[tuple[str, str, str | None, str | None]] = []

    def callStarted(self, call: CallInfo) -> None:
        self.started.append(call.method)

    def callEnded(self, call: CallInfo) -> None:
        self.ended.append((call.method, call.side, call.outcome, call.errorType))


class Tagging(CallInterceptor):
    """Adds C{trace} to each call's metadata."""

    def callStarted(self, call: CallInfo) -> None:
        call.metadata["trace"] = f"t-{call.method}"  # type: ignore[index]


class Refusing(CallInterceptor):
    """Refuses the calls of C{forbidden}: nothing is sent, the caller gets the error."""

    def callStarted(self, call: CallInfo) -> None:
        if call.method == "forbidden":
            raise PermissionError("not from here")


class Tallying(CallInterceptor):
    """A recorder: a tally per (side, method, outcome), counted by the interception."""

    def __init__(self) -> None:
        self.tallies: dict[tuple[str, str, str], CallTally] = {}

    def tallyFor(self, side: str, method: str, outcome: str, errorType: str | None) -> CallTally | None:
        return self.tallies.setdefault((side, method, outcome), CallTally((1.0,)))

    def counts(self) -> dict[tuple[str, str, str], int]:
        return {key: sum(tally.buckets) for key, tally in self.tallies.items()}


TALLIED = {(CLIENT, "echo", OK): 1, (CLIENT, "fail", ERROR): 1}
"""What L{Tallying} alone on a connection counts of a call of C{echo} and one of C{fail}."""


class Interceptors:
    """One client's interceptors, and its options."""

    def __init__(self) -> None:
        self.recording = Recording()
        self.tallying = Tallying()
        self.options = ClientOptions(
            timeout=WAIT,
            metadata={"tenant": "t1"},
            interceptors=(self.recording, Tagging(), Refusing(), self.tallying),
        )
        self.lean = Tallying()
        self.leanOptions = ClientOptions(timeout=WAIT, interceptors=(self.lean,))


async def twistedClient(reactor: Any, address: str, seen: Interceptors) -> None:
    root = await connect(reactor, f"tcp:host={address.replace(':', ':port=')}", options=seen.options)
    for method, timeout in STEPS:
        try:
            if timeout is None:
                waiting = root.callRemote(method)
            else:
                with twistedContext(timeout=timeout):
                    waiting = root.callRemote(method)
            await waiting
        except Exception:
            pass
    await root.broker.disconnect()
    lean = await connect(reactor, f"tcp:host={address.replace(':', ':port=')}", options=seen.leanOptions)
    await lean.callRemote("echo", 1)
    try:
        await lean.callRemote("fail")
    except Exception:
        pass
    await lean.broker.disconnect()


def blockingClient(address: str, seen: Interceptors) -> None:
    with blocking.connect(address, options=seen.options) as connection:
        for method, timeout in STEPS:
            try:
                if timeout is None:
                    connection.root.callRemote(method)
                else:
                    with clientContext(timeout=timeout):
                        connection.root.callRemote(method)
            except Exception:
                pass
    with blocking.connect(address, options=seen.leanOptions) as connection:
        connection.root.callRemote("echo", 1)
        try:
            connection.root.callRemote("fail")
        except Exception:
            pass


async def asyncioClient(address: str, seen: Interceptors) -> None:
    async with await asyncioclient.connect(address, options=seen.options) as connection:
        for method, timeout in STEPS:
            try:
                if timeout is None:
                    await connection.root.callRemote(method)
                else:
                    with clientContext(timeout=timeout):
                        await connection.root.callRemote(method)
            except Exception:
                pass
    async with await asyncioclient.connect(address, options=seen.leanOptions) as connection:
        await connection.root.callRemote("echo", 1)
        try:
            await connection.root.callRemote("fail")
        except Exception:
            pass


async def sameOnEveryClient(reactor: Any) -> None:
    """
    The Twisted, blocking and asyncio clients tell the same interceptors the
    same (method, side, outcome, errorType) of the same calls, in order; a
    call an interceptor refused is never sent; what an interceptor added to
    the metadata reaches the server with the connection's; a recorder alone
    counts the same tallies.
    """
    received = Received()
    port = await serve(reactor, "tcp:0:interface=127.0.0.1", Service(), options=ServerOptions(interceptors=[received]))
    address = f"127.0.0.1:{port.getHost().port}"
    try:
        clients = {
            "twisted": lambda seen: twistedClient(reactor, address, seen),
            "blocking": lambda seen: deferToThread(blockingClient, address, seen),
            "asyncio": lambda seen: deferToThread(
                lambda: asyncio.run(asyncio.wait_for(asyncioClient(address, seen), WAIT))
            ),
        }
        sent = [(method, {"tenant": "t1", "trace": f"t-{method}"}) for method, _ in STEPS if method != "forbidden"] + [
            ("echo", {}),
            ("fail", {}),
        ]
        for client, run in clients.items():
            seen = Interceptors()
            del received.calls[:]
            await run(seen)
            assert seen.recording.started == [method for method, _ in STEPS], (client, seen.recording.started)
            assert seen.recording.ended == EXPECTED, (client, seen.recording.ended)
            assert received.calls == sent, (client, received.calls)
            tallied = {key: count for key, count in seen.tallying.counts().items()}
            assert tallied == {(CLIENT, method, outcome): 1 for method, _, outcome, _ in EXPECTED}, (client, tallied)
            assert seen.lean.counts() == TALLIED, (client, seen.lean.counts())
    finally:
        await port.stopListening()
        await port.factory.disconnectAll()  # type: ignore[attr-defined]


class SameOnEveryClientTests(TestCase):
    """Interceptors on the three clients, under trial."""

    test_same_on_every_client = trialTest(sameOnEveryClient)


test_same_on_every_client = pytestTest(sameOnEveryClient)
