"""Calling a chunkwire service from an asyncio application: the standard event loop, and no Twisted imported."""

import sys

# The service: the key-value example server, started so that the snippet runs as it is
# (in real use it already runs somewhere: python examples/kv_server.py --listen tcp:8760).
from _kv_service import startKeyValueServer

from framing.rpc import CallLimits
from protocols.options import ClientOptions

server, port, _ = startKeyValueServer()

# -- the client ------------------------------------------------------------------------------
import asyncio  # noqa: E402

from framing.rpc import registerError  # noqa: E402
from protocols.asyncioclient import connect  # noqa: E402


class KeyNotFound(KeyError):
    """The server's kv.KeyNotFound, registered under its wire name: it arrives as itself."""


registerError(KeyNotFound, "kv.KeyNotFound")


async def main() -> None:
    async with await connect(
        f"127.0.0.1:{port}", options=ClientOptions(timeout=10, callLimits=CallLimits(callTimeout=10))
    ) as connection:
        root = connection.root
        # 100 calls in flight at once on the one connection, answered in any order.
        await asyncio.gather(*(root.callRemote("put", f"user/{n}", f"name {n}") for n in range(100)))
        names = await asyncio.gather(*(root.callRemote("get", f"user/{n}") for n in range(100)))
        print("got back:", len(names), names[42])
        try:
            await root.callRemote("get", "nobody")
        except KeyNotFound as error:
            print("missing:", error)
        # A call given up on (wait_for's timeout, task.cancel(), or callTimeout) sends the server a CANCEL.
        keys = await asyncio.wait_for(root.callRemote("list", prefix="user/"), timeout=10)
        print("listed:", len(keys))


try:
    asyncio.run(main())
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
