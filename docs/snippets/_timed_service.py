"""What the deadline snippet of the without-Twisted how-to calls: a Twisted service showing what each call carried.

Imported by the snippet, this module only starts the service in a process
of its own (L{startTimedServer}), so the snippet's process loads no Twisted;
run as a program, it is the service.
"""

from __future__ import annotations

import subprocess

from _serving import startService


def startTimedServer() -> tuple[subprocess.Popen[str], int]:
    """Start this module as the service on a free loopback port: the process and its port."""
    return startService(__file__)


if __name__ == "__main__":
    # -- the service: a Twisted server, in a process of its own ------------------------------
    from typing import Any

    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    from protocols import rpc

    class Timed(rpc.Referenceable):
        cancelled = 0

        @rpc.remote
        def peek(self) -> list[Any]:
            """The time this call has left, and its metadata, as the method sees them."""
            call = rpc.currentCall()
            return [call.timeRemaining(), dict(call.metadata)]

        @rpc.remote
        def slow(self) -> Deferred[None]:
            """Never answers by itself: counts its cancellation (the caller's CANCEL, or the deadline here)."""

            def cancelled(_: Deferred[None]) -> None:
                Timed.cancelled += 1

            return Deferred(cancelled)

        @rpc.remote
        def cancelledCount(self) -> int:
            return Timed.cancelled

    async def main(reactor: Any) -> None:
        port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Timed())
        print(f"listening port={port.getHost().port}", flush=True)
        await Deferred()  # (serves until the process is terminated)

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
