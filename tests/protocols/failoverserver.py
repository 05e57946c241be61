"""A server of the failover tests, run as a process: python -m tests.protocols.failoverserver NAME.

It listens on a port of 127.0.0.1 the kernel picks and prints C{port=N};
it prints C{record TOKEN} for each call it receives (so a test sees which
server got a call, and that none got it twice), C{draining} once SIGTERM
made it send GOAWAY to every client (it exits once they have closed, or
after 30 s), and serves:

 - C{whoami()}: its name;
 - C{record(token)}: its name;
 - C{hang(token)}: never answers;
 - C{held(token)}: its name, once the process gets SIGUSR1;
 - C{seen()}: the tokens it received, in order.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from twisted.internet.defer import Deferred

from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from protocols.rpc._drain import drainBrokers
from protocols.rpc._endpoints import listenWith, serverFactory
from protocols.rpc._options import ServerOptions


class Root(Referenceable):
    """The service: it answers with its name and keeps the tokens it was sent."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tokens: list[str] = []
        self.holding: list[Deferred[str]] = []

    def _receive(self, token: str) -> None:
        self.tokens.append(token)
        print(f"record {token}", flush=True)

    @remote
    def whoami(self) -> str:
        return self.name

    @remote
    def record(self, token: str) -> str:
        self._receive(token)
        return self.name

    @remote
    def hang(self, token: str) -> Deferred[str]:
        self._receive(token)
        return Deferred()

    @remote
    def held(self, token: str) -> Deferred[str]:
        self._receive(token)
        waiting: Deferred[str] = Deferred()
        self.holding.append(waiting)
        return waiting

    def release(self) -> None:
        """Answer every call to L{held} so far."""
        holding, self.holding = self.holding, []
        for waiting in holding:
            waiting.callback(self.name)

    @remote
    def seen(self) -> list[str]:
        return list(self.tokens)


async def main(reactor: Any, name: str) -> None:
    root = Root(name)
    factory = serverFactory(root, clock=reactor, options=ServerOptions(guard=None))
    port = await listenWith(reactor, "tcp:0:interface=127.0.0.1", factory)
    print(f"port={port.getHost().port}", flush=True)
    stopping: Deferred[None] = Deferred()
    signal.signal(signal.SIGTERM, lambda *_: reactor.callFromThread(stopping.callback, None))
    signal.signal(signal.SIGUSR1, lambda *_: reactor.callFromThread(root.release))
    await stopping
    await port.stopListening()
    drained = drainBrokers(factory.brokers, 30.0)
    print("draining", flush=True)
    await drained
    reactor.stop()


def run(name: str) -> None:
    """Install the reactor (here, not at import: tests/zygote.py imports this module, then forks servers) and serve."""
    from twisted.internet import reactor as installed

    reactor: Any = installed
    reactor.callWhenRunning(
        lambda: Deferred.fromCoroutine(main(reactor, name)).addErrback(lambda f: f.printTraceback())
    )
    reactor.run(installSignalHandlers=False)


if __name__ == "__main__":
    run(sys.argv[1])
