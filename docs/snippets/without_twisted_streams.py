"""Streams of objects read without Twisted: a plain iterator in a script, an async iterator under asyncio."""

import sys

# The service: a Twisted server whose methods return generators, started so that the snippet runs as it is.
from _streams_service import startStreamsServer

from framing.rpc import CallLimits
from protocols.options import ClientOptions

server, port = startStreamsServer()

# -- the client ------------------------------------------------------------------------------
import asyncio  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from typing import Protocol  # noqa: E402

from framing import Violation  # noqa: E402
from framing.rpc import RemoteInterface  # noqa: E402
from protocols import asyncioclient, blocking  # noqa: E402


class IPrices(RemoteInterface, Protocol, name="howto.streams.IPrices"):
    def quotes(self) -> AsyncIterator[int]: ...


# A plain script: the stream is an iterator, read on this thread as calls are.
def script() -> None:
    with blocking.connect(
        f"127.0.0.1:{port}", options=ClientOptions(timeout=10, callLimits=CallLimits(callTimeout=10))
    ) as connection:
        print("blocking ticks:", list(connection.root.callRemote("ticks", 5)))
        for tick in connection.root.callRemote("ticks", 1_000_000):
            if tick == 102:
                break  # the stream is dropped: CANCEL, and the server's generator is closed
        print("closed on the server:", connection.root.callRemote("howManyClosed"))
        try:
            for quote in connection.root.typed(IPrices).quotes():
                print("quote:", quote)
        except Violation as error:
            print("refused here:", error.where)


# An asyncio application: the stream is an async iterator; calls and other streams go on meanwhile.
async def main() -> None:
    async with await asyncioclient.connect(
        f"127.0.0.1:{port}", options=ClientOptions(timeout=10, callLimits=CallLimits(callTimeout=10))
    ) as connection:
        root = connection.root
        print("asyncio ticks:", [tick async for tick in await root.callRemote("ticks", 5)])
        stream = await root.callRemote("ticks", 1_000_000)
        async for tick in stream:
            if tick == 102:
                await stream.aclose()  # (or break and drop it; or contextlib.aclosing)
                break
        print("closed on the server:", await root.callRemote("howManyClosed"))

        # A stream sent: an async generator as an argument, pulled as the server's credit allows.
        async def prices() -> AsyncIterator[int]:
            for price in (10, 20, 30):
                yield price

        print("average:", await root.callRemote("average", prices()))


try:
    script()
    asyncio.run(main())
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
