"""What the streams snippet of the without-Twisted how-to calls: a Twisted service whose results are streams.

Imported by the snippet, this module only starts the service in a process
of its own (L{startStreamsServer}), so the snippet's process loads no
Twisted; run as a program, it is the service.
"""

from __future__ import annotations

import subprocess

from _serving import startService


def startStreamsServer() -> tuple[subprocess.Popen[str], int]:
    """Start this module as the service on a free loopback port: the process and its port."""
    return startService(__file__)


if __name__ == "__main__":
    # -- the service: a Twisted server, in a process of its own ------------------------------
    from collections.abc import AsyncIterator, Iterator
    from typing import Any

    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    from protocols import rpc

    class Prices(rpc.Referenceable):
        closed = 0

        @rpc.remote
        def ticks(self, count: int) -> Iterator[int]:
            """A generator: each item goes as the caller's credit allows; its finally runs if the caller stops."""
            try:
                yield from range(100, 100 + count)
            finally:
                Prices.closed += 1

        @rpc.remote
        async def quotes(self) -> AsyncIterator[Any]:
            """An async generator whose items are not all ints (a typed caller refuses the first that is not)."""
            yield 1
            yield "two"

        @rpc.remote
        async def average(self, prices: AsyncIterator[int]) -> float:
            """A stream the caller sends, read with async for."""
            seen = [price async for price in prices]
            return sum(seen) / len(seen)

        @rpc.remote
        def howManyClosed(self) -> int:
            return Prices.closed

    async def main(reactor: Any) -> None:
        port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Prices())
        print(f"listening port={port.getHost().port}", flush=True)
        await Deferred()  # (serves until the process is terminated)

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
