"""A worker process for the supervisor tests: serves L{PidService} on the sockets it adopts, drains on SIGTERM.

python -m tests.protocols.serving.workerprocess --adopt FD:FAMILY [--adopt ...] [--grace SECONDS]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from twisted.internet.task import deferLater

from protocols import rpc
from protocols.serving import DrainingService, adoptedEndpoint, watchParent


class PidService(rpc.Referenceable):
    """Says which process answers, optionally after a wait."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    @rpc.remote
    def pid(self) -> int:
        return os.getpid()

    @rpc.remote
    async def slowPid(self, seconds: float) -> int:
        await deferLater(self.reactor, seconds)
        return os.getpid()


def makeFactory(reactor: Any) -> Any:
    """The factory L{protocols.serving._workers.serveWorkers} workers build in the tests."""
    return rpc.serverFactory(PidService(reactor), clock=reactor)


def main() -> None:
    from twisted.internet import reactor

    parser = argparse.ArgumentParser()
    parser.add_argument("--adopt", action="append", required=True)
    parser.add_argument("--grace", type=float, default=5.0)
    args = parser.parse_args()
    factory = rpc.serverFactory(PidService(reactor), clock=reactor)
    for spec in args.adopt:
        service = DrainingService(adoptedEndpoint(reactor, spec), factory, args.grace)
        service.startService()
        reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    watchParent(reactor)
    reactor.run()


if __name__ == "__main__":
    main()
