"""A backend for the HAProxy tests: numbers calls, says who it is and whom it sees, drains on SIGTERM.

    python -m tests.protocols.serving.backend --listen DESCRIPTION --record FILE [--grace SECONDS]

Prints C{backend PID serving} once listening.  On SIGTERM it drains
(L{protocols.serving.DrainingService}), then appends the number of every
call it ran to C{FILE}, one per line, and exits.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from protocols import rpc
from protocols._proxyheader import serverEndpoint
from protocols.serving import DrainingService


class Backend(rpc.Referenceable):
    """Records the numbers it is called with."""

    def __init__(self) -> None:
        self.numbers: list[int] = []

    @rpc.remote
    def number(self, value: int) -> int:
        self.numbers.append(value)
        return value

    @rpc.remote
    def pid(self) -> int:
        return os.getpid()

    @rpc.remote
    def peer(self) -> str:
        """The caller's address as this server's connection sees it."""
        address = rpc.currentBroker().transport.getPeer()
        return f"{address.host}:{address.port}"


def main() -> None:
    from twisted.internet import reactor

    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--grace", type=float, default=5.0)
    args = parser.parse_args()
    backend = Backend()
    factory = rpc.serverFactory(backend, clock=reactor)
    service = DrainingService(serverEndpoint(reactor, args.listen), factory, args.grace)
    service.startService()

    def record(_: Any) -> None:
        with open(args.record, "a") as out:
            out.writelines(f"{number}\n" for number in backend.numbers)

    reactor.addSystemEventTrigger("before", "shutdown", lambda: service.stopService().addCallback(record))
    print(f"backend {os.getpid()} serving", flush=True)
    reactor.run()


if __name__ == "__main__":
    main()
