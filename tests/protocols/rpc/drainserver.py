"""A server that drains on SIGTERM, run as a process by L{tests.protocols.rpc.test_drain_process}.

python -m tests.protocols.rpc.drainserver rpc|bulk

Serves L{Slow} with C{rpc.serve}, without bulk or with, on port 0 of 127.0.0.1,
drains on shutdown as the tutorial's server does (C{port.drain} as a
"before shutdown" trigger), and prints its port, each call's start, and
"drained" once every connection is closed.
"""

from __future__ import annotations

import sys
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater, react

from protocols import bulk, rpc


class Slow(rpc.Referenceable):
    """One method that takes as long as it is told."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    @rpc.remote
    def slow(self, seconds: float) -> Deferred[str]:
        print("slow started", flush=True)
        return deferLater(self.reactor, seconds, lambda: "done")


async def main(reactor: Any, kind: str) -> None:
    streams = {"rpc": None, "bulk": bulk.BulkOptions()}[kind]
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Slow(reactor), options=rpc.ServerOptions(bulk=streams))

    async def drain() -> None:
        await port.drain(30)
        print("drained", flush=True)

    reactor.addSystemEventTrigger("before", "shutdown", lambda: Deferred.fromCoroutine(drain()))
    print(f"serving on port {port.getHost().port}", flush=True)
    await Deferred()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor, sys.argv[1])))
