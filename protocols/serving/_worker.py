# -*- test-case-name: tests.protocols.serving.test_worker,tests.protocols.serving.test_workers -*-
"""A generic worker process for L{protocols.serving._workers.serveWorkers}.

    python -m protocols.serving._worker (--factory | --serve) package.module:function
        [--argument VALUE ...] [--grace SECONDS] --adopt FD:FAMILY[:haproxy][:chunkwire-tls:...] ...

Contract: imports C{function} (named by the operator on the supervisor's
command line, never by a peer).  With C{--factory}, calls
C{function(reactor, *arguments)} once for the factory to serve and listens
with it on every adopted socket through a
L{protocols.serving.DrainingService}; with C{--serve}, calls
C{function(reactor, endpoint, *arguments)} once per adopted socket's
endpoint, which listens (as C{rpc.serve} given that endpoint does) and
gives the L{protocols.rpc.ListeningPort} (or a C{Deferred} or coroutine of
it), drained on stop.  An adopted TLS socket's
endpoint does the TLS (L{protocols.serving.adoptedEndpoint}).  On SIGTERM,
or when its supervisor is gone (stdin closed), the worker drains (GOAWAY,
then C{--grace} seconds for the calls in flight), then exits.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.python.failure import Failure

from .._logs import NamedLogger
from ..rpc._drain import DEFAULT_GRACE
from ._service import DrainingService, adoptedEndpoint, watchParent


def loadFunction(path: str) -> Callable[..., Any]:
    """
    Import C{package.module:function} and give the function.

    @raise ValueError: C{path} is not of that form.
    """
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"a worker's function is package.module:function, not {path!r}")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function


def loadFactory(path: str, reactor: Any, *arguments: str) -> Any:
    """Import C{package.module:function} and call it with the reactor and C{arguments}: the factory to serve."""
    return loadFunction(path)(reactor, *arguments)


class _Served:
    """The ports a C{--serve} function listened on, drained on shutdown."""

    _log = NamedLogger(namespace="chunkwire.workers")

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.ports: list[Any] = []
        self.listening: list[Deferred[None]] = []

    def add(self, result: Any) -> None:
        """Keep the port C{result} is (or will be, if a C{Deferred} or coroutine); log a failure to listen."""
        if not isinstance(result, Deferred) and not inspect.iscoroutine(result):
            self.ports.append(result)
            return
        listening: Deferred[Any] = ensureDeferred(result)
        self.listening.append(listening.addCallbacks(self.ports.append, self._failed))

    def _failed(self, failure: Failure) -> None:
        self._log.failure("Could not listen", failure)

    def drain(self) -> Deferred[Any]:
        """Wait for the ports still being listened on, then drain every one."""
        listened: Deferred[Any] = gatherResults(self.listening)
        return listened.addCallback(lambda _: gatherResults([port.drain(self.grace) for port in self.ports]))


def main(argv: Sequence[str] | None = None) -> None:
    from twisted.internet import reactor as installed

    reactor: Any = installed
    parser = argparse.ArgumentParser(prog="python -m protocols.serving._worker")
    named = parser.add_mutually_exclusive_group(required=True)
    named.add_argument("--factory", help="package.module:function, called with the reactor: the factory to serve")
    named.add_argument("--serve", help="package.module:function, called with the reactor and each endpoint: listens")
    parser.add_argument("--argument", action="append", default=[], help="passed to the function, in order")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE)
    parser.add_argument(
        "--adopt", action="append", required=True, help="FD:FAMILY[:haproxy][:TLS description] (from the supervisor)"
    )
    args = parser.parse_args(argv)
    endpoints = [adoptedEndpoint(reactor, spec) for spec in args.adopt]
    if args.factory is not None:
        factory = loadFactory(args.factory, reactor, *args.argument)
        for endpoint in endpoints:
            service = DrainingService(endpoint, factory, args.grace)
            service.startService()
            reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    else:
        serve = loadFunction(args.serve)
        served = _Served(args.grace)
        for endpoint in endpoints:
            served.add(serve(reactor, endpoint, *args.argument))
        reactor.addSystemEventTrigger("before", "shutdown", served.drain)
    watchParent(reactor)
    reactor.run()


if __name__ == "__main__":
    main()
