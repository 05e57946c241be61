"""A service of a user's own, as L{protocols.serving._workers.serveWorkers} runs it: imported by each worker.

Nothing here is a worker program: the workers are L{protocols.serving._worker},
told to call L{serveGreeter} (C{serve=}) or L{greeterFactory} (C{factory=}).
"""

from __future__ import annotations

import os
from typing import Any

from protocols import bulk, rpc


class Greeter(rpc.Referenceable):
    """Greets with the word it was started with, and says which process answers."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    @rpc.remote
    def greet(self, name: str) -> str:
        return f"{self.greeting}, {name}"

    @rpc.remote
    def pid(self) -> int:
        return os.getpid()


def serveGreeter(reactor: Any, endpoint: Any, greeting: str) -> Any:
    """What C{serve=} calls in each worker: streams too (C{ServerOptions.bulk}), on the endpoint it is given."""
    return rpc.serve(reactor, endpoint, Greeter(greeting), options=rpc.ServerOptions(bulk=bulk.BulkOptions()))


def greeterFactory(reactor: Any, greeting: str) -> Any:
    """What C{factory=} calls in each worker: the factory to listen with."""
    return rpc.serverFactory(Greeter(greeting), clock=reactor)
