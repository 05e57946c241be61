"""Deadlines and metadata from the clients without Twisted: callContext, as with the Twisted client."""

import sys

# The service: a Twisted server that reports what each call carried, started in a process of its own.
from _timed_service import startTimedServer

from protocols.options import ClientOptions

server, port = startTimedServer()

# -- the clients -----------------------------------------------------------------------------
import asyncio  # noqa: E402

from framing.rpc import DeadlineExceeded  # noqa: E402
from protocols import asyncioclient, blocking  # noqa: E402
from protocols.blocking import callContext  # noqa: E402  (the same as protocols.asyncioclient.callContext)


def fromAScript() -> None:
    with blocking.connect(f"127.0.0.1:{port}", options=ClientOptions(timeout=10)) as connection:
        # Every call made inside the block has 2 s from now, and this metadata.
        with callContext(timeout=2.0, metadata={"request-id": "r-17"}):
            left, metadata = connection.root.callRemote("peek")
        print("blocking: the server saw under 2 s left:", 0 < left <= 2.0, "and", metadata)
        with callContext(timeout=0.2):
            try:
                connection.root.callRemote("slow")
            except DeadlineExceeded as error:
                print("blocking: deadline exceeded:", error)
        # The connection goes on; the server's method was cancelled.
        print("blocking: cancelled on the server:", connection.root.callRemote("cancelledCount"))


async def fromAsyncio() -> None:
    async with await asyncioclient.connect(f"127.0.0.1:{port}", options=ClientOptions(timeout=10)) as connection:
        with callContext(timeout=2.0, metadata={"request-id": "r-18"}):
            # The tasks gather starts inside the block copy its context: each call carries it.
            seen = await asyncio.gather(*(connection.root.callRemote("peek") for _ in range(3)))
        print("asyncio: request ids seen:", sorted({metadata["request-id"] for _, metadata in seen}))
        with callContext(timeout=0.2):
            try:
                await connection.root.callRemote("slow")
            except DeadlineExceeded as error:
                print("asyncio: deadline exceeded:", error)
        print("asyncio: cancelled on the server:", await connection.root.callRemote("cancelledCount"))


try:
    fromAScript()
    asyncio.run(fromAsyncio())
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
