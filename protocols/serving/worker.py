"""A generic worker process for L{protocols.serving.workers.serveWorkers}.

    python -m protocols.serving.worker --factory package.module:function [--grace SECONDS] --adopt FD:FAMILY ...

Contract: calls C{function(reactor)} (named by the operator on the
supervisor's command line, never by a peer) for the factory to serve,
listens with it on every adopted socket through a
L{protocols.serving.DrainingService}, and on SIGTERM, or when its
supervisor is gone (stdin closed), drains, then exits.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from ..rpc.drain import DEFAULT_GRACE
from .service import DrainingService, adoptedEndpoint, watchParent


def loadFactory(path: str, reactor: Any) -> Any:
    """Import C{package.module:function} and call it with the reactor: the factory to serve."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"--factory takes package.module:function, not {path!r}")
    return getattr(importlib.import_module(module), name)(reactor)


def main(argv: Sequence[str] | None = None) -> None:
    from twisted.internet import reactor as installed

    reactor: Any = installed
    parser = argparse.ArgumentParser(prog="python -m protocols.serving.worker")
    parser.add_argument("--factory", required=True, help="package.module:function, called with the reactor")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE)
    parser.add_argument("--adopt", action="append", required=True, help="FD:FAMILY[:haproxy] (from the supervisor)")
    args = parser.parse_args(argv)
    factory = loadFactory(args.factory, reactor)
    for spec in args.adopt:
        service = DrainingService(adoptedEndpoint(reactor, spec), factory, args.grace)
        service.startService()
        reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    watchParent(reactor)
    reactor.run()


if __name__ == "__main__":
    main()
