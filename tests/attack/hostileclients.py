"""The clients the hostile server visits: one small adapter per client, one generic driver, run as a child process.

    PYTHONPATH=. python -m tests.attack.hostileclients CLIENT PORT BEHAVIOUR SCALE CALL_TIMEOUT

Contract: a child process runs one client (L{ADAPTERS}: C{twisted},
C{reconnecting}, C{blocking}, C{asyncio}) through L{drive} against the
hostile server on 127.0.0.1:PORT: connect, each of the behaviour's calls
(with the connection's C{callTimeout}), the items of a stream result, then
close.  It prints one JSON line per event on stdout: C{begin} (a step,
with its deadline in seconds, printed before the step starts) and C{end}
(its outcome: C{answer} with a summary of the value, C{error} with the
error's type, whether it is typed, and its message, or C{over} for a
stream's end), then C{done} with the process's peak RSS.  The driver sets
no timer of its own: what bounds each step is the client's own deadline,
and the parent (L{tests.attack.catalogue}) kills a child whose step runs
past its deadline plus a margin, and judges the events.  A client added
later is covered by one more adapter: an object with the coroutine
methods C{connect}, C{call}, C{next} and C{close} and a C{isStream} test.

The interop client (C{examples/interop_client.py}) is not driven here: it
is run as its own command line (see L{tests.attack.catalogue}).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from framing.rpc._limits import CallLimits
from protocols.options import ClientOptions

from .hostileserver import BEHAVIOURS, FULL, SHORT, Scale

CONNECT_TIMEOUT = 5.0
"""Seconds each client may take to connect and hear the preamble (its C{timeout})."""

CLOSE_GRACE = 5.0
"""Seconds a client's close may take: none of the clients documents a longer grace, and a close that sends
nothing more need wait for nothing but the socket's close."""

TYPED_MODULES = ("framing", "protocols")
"""An error is typed when its class (or one of its bases before the built-in ones) is one of chunkwire's."""

TWISTED_TYPED = ("twisted.internet.error",)
"""The Twisted clients also fail calls with the reason the connection was lost, as Twisted gives it."""


def typed(error: BaseException, client: str) -> bool:
    """Whether C{error} is one of the typed errors C{client} documents (not a raw socket or asyncio error)."""
    allowed = TYPED_MODULES + (TWISTED_TYPED if client in ("twisted", "reconnecting") else ())
    return type(error).__module__.split(".")[0] in allowed or type(error).__module__ in allowed


def rss(field: str = "VmRSS") -> int:
    """
    This process's resident set size (or C{"VmHWM"}: its peak), in bytes.
    (Not C{getrusage}'s C{ru_maxrss}: a child's counts its parent's size at
    the fork.)
    """
    match = re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(match.group(1)) * 1024 if match else 0


STREAM_TYPES = frozenset({"StreamReader", "BlockingStream", "AsyncStream"})
"""The clients' stream results, by class name."""


def summary(value: Any) -> str:
    """What an answer was, as the behaviours state what it must be (C{"bytes:N"}, C{"stream"}...)."""
    if type(value).__name__ in STREAM_TYPES:
        return "stream"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"bytes:{memoryview(value).nbytes}"
    if isinstance(value, str):
        return f"str:{len(value)}"
    if isinstance(value, (list, tuple)):
        return f"list:{len(value)}"
    if isinstance(value, dict):
        return f"dict:{len(value)}"
    return "none" if value is None or value is True else type(value).__name__


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


class BlockingAdapter:
    """L{protocols.blocking}: each step a plain call, inside the coroutine."""

    def __init__(self, port: int, scale: Scale, callTimeout: float) -> None:
        import protocols.blocking  # noqa: F401 (imported before the idle RSS is taken)

        self.address, self.scale, self.callTimeout = f"127.0.0.1:{port}", scale, callTimeout
        self.connection: Any = None

    async def connect(self) -> None:
        from protocols.blocking import connect

        self.connection = connect(
            self.address,
            options=ClientOptions(
                timeout=CONNECT_TIMEOUT, limits=self.scale.limits(), callLimits=CallLimits(callTimeout=self.callTimeout)
            ),
        )

    async def call(self, name: str) -> Any:
        return self.connection.root.callRemote(name)

    def isStream(self, value: Any) -> bool:
        from protocols.blocking import BlockingStream

        return isinstance(value, BlockingStream)

    async def next(self, stream: Any) -> Any:
        try:
            return next(stream)
        except StopIteration:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


class AsyncioAdapter:
    """L{protocols.asyncioclient}, on C{asyncio.run}'s loop."""

    def __init__(self, port: int, scale: Scale, callTimeout: float) -> None:
        import protocols.asyncioclient  # noqa: F401 (imported before the idle RSS is taken)

        self.address, self.scale, self.callTimeout = f"127.0.0.1:{port}", scale, callTimeout
        self.connection: Any = None

    async def connect(self) -> None:
        from protocols.asyncioclient import connect

        self.connection = await connect(
            self.address,
            options=ClientOptions(
                timeout=CONNECT_TIMEOUT, limits=self.scale.limits(), callLimits=CallLimits(callTimeout=self.callTimeout)
            ),
        )

    async def call(self, name: str) -> Any:
        return await self.connection.root.callRemote(name)

    def isStream(self, value: Any) -> bool:
        from protocols.asyncioclient import AsyncStream

        return isinstance(value, AsyncStream)

    async def next(self, stream: Any) -> Any:
        return await stream.__anext__()

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()


class TwistedAdapter:
    """L{protocols.rpc.connect}, under Twisted's C{react}: C{callLimits}' C{callTimeout}, closed with C{disconnect}."""

    def __init__(self, port: int, scale: Scale, callTimeout: float) -> None:
        from twisted.internet import reactor

        import protocols.rpc  # noqa: F401 (imported before the idle RSS is taken)

        self.reactor: Any = reactor
        self.description = f"tcp:host=127.0.0.1:port={port}"
        self.scale, self.callTimeout = scale, callTimeout
        self.root: Any = None

    def callLimits(self) -> Any:
        from protocols.rpc import CallLimits

        return CallLimits(callTimeout=self.callTimeout)

    async def connect(self) -> None:
        from protocols import rpc

        self.root = await rpc.connect(
            self.reactor,
            self.description,
            options=ClientOptions(limits=self.scale.limits(), callLimits=self.callLimits(), timeout=CONNECT_TIMEOUT),
        )

    async def call(self, name: str) -> Any:
        return await self.root.callRemote(name)

    def isStream(self, value: Any) -> bool:
        from protocols.rpc import StreamReader

        return isinstance(value, StreamReader)

    async def next(self, stream: Any) -> Any:
        return await stream.next()

    async def close(self) -> None:
        if self.root is not None:
            await self.root.broker.disconnect()


class ReconnectingAdapter(TwistedAdapter):
    """L{protocols.rpc.reconnecting}: connected when its first connection is (or failed once), stopped to close."""

    client: Any = None

    async def connect(self) -> None:
        from protocols import rpc

        self.client = rpc.reconnecting(
            self.reactor,
            self.description,
            options=ClientOptions(limits=self.scale.limits(), callLimits=self.callLimits(), timeout=CONNECT_TIMEOUT),
        )
        await self.client.whenConnected(failAfterFailures=1)

    async def call(self, name: str) -> Any:
        return await self.client.callRemote(name)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.stopService()


ADAPTERS: dict[str, type[Any]] = {
    "twisted": TwistedAdapter,
    "reconnecting": ReconnectingAdapter,
    "blocking": BlockingAdapter,
    "asyncio": AsyncioAdapter,
}
"""The clients driven in a child process, by name (the interop client is run as its own command)."""


async def step(what: str, deadline: float, action: Coroutine[Any, Any, Any], client: str, **extra: Any) -> Any:
    """Run one step, announcing it first; print its outcome; return the value, or None if it failed."""
    emit(event="begin", step=what, deadline=deadline, **extra)
    started = time.monotonic()
    try:
        value = await action
    except StopAsyncIteration:
        emit(event="end", step=what, outcome="over", seconds=time.monotonic() - started, **extra)
        return None
    except BaseException as error:  # noqa: BLE001 - every failure is an outcome to judge
        emit(
            event="end",
            step=what,
            outcome="error",
            error=f"{type(error).__module__}.{type(error).__qualname__}",
            typed=typed(error, client),
            message=str(error)[:300],
            seconds=time.monotonic() - started,
            **extra,
        )
        return None
    emit(event="end", step=what, outcome="answer", value=summary(value), seconds=time.monotonic() - started, **extra)
    return value if value is not None else True


async def drive(client: str, adapter: Any, behaviour: str, callTimeout: float) -> None:
    """Connect, make each call of C{behaviour}, read a stream result's items and one more, close."""
    plan = BEHAVIOURS[behaviour]
    emit(event="start", rss=rss())
    if await step("connect", CONNECT_TIMEOUT, adapter.connect(), client) is not None:
        for name in plan.calls:
            value = await step("call", callTimeout, adapter.call(name), client, name=name)
            if value is not None and adapter.isStream(value):
                for index in range((plan.streamItems or 0) + 1):
                    got = await step("item", callTimeout, adapter.next(value), client, name=name, index=index)
                    if got is None:
                        break
            del value
    await step("close", CLOSE_GRACE, adapter.close(), client)
    emit(event="done", maxrss=rss("VmHWM"))


def main(argv: list[str]) -> int:
    client, port, behaviour, scaleName, callTimeout = argv
    scale = {"short": SHORT, "full": FULL}[scaleName]
    adapter = ADAPTERS[client](int(port), scale, float(callTimeout))
    coroutine = drive(client, adapter, behaviour, float(callTimeout))
    if client in ("twisted", "reconnecting"):
        from twisted.internet.defer import Deferred
        from twisted.internet.task import react

        react(lambda reactor: Deferred.fromCoroutine(coroutine))
    else:
        asyncio.run(coroutine)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
