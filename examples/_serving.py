"""What the example servers share: the repeatable --listen option, and listening on every endpoint until interrupted.

A failure to listen (a port in use, a description that is not an endpoint)
is raised as an L{EndpointFailed} naming the description, which L{_errors.runCommand}
prints as one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _errors import EndpointFailed
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString
from twisted.logger import globalLogBeginner, textFileLogObserver


def beginLogging(toStdout: bool) -> None:
    """
    Begin Twisted's logging, to stdout or to nothing.  Logging always
    begins: until it does, Twisted keeps the last 65,536 events, and each
    holds the connection it names, so a server that never began logging
    would keep closed connections alive.
    """
    observers: list[Any] = [textFileLogObserver(sys.stdout)] if toStdout else []
    globalLogBeginner.beginLoggingTo(observers, redirectStandardIO=False)


def addListenArgument(parser: argparse.ArgumentParser, default: str) -> None:
    """Add C{--listen ENDPOINT}, repeatable; the servers use C{default} when it is not given."""
    parser.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help=f"a Twisted server endpoint description (repeatable; default {default})",
    )


async def serveForever(reactor: Any, descriptions: list[str], factory: Any, banner: str, suffix: str = "") -> None:
    """
    Listen with C{factory} on each endpoint description and print, for each,
    C{"BANNER listening on DESCRIPTION (ADDRESS)SUFFIX"}; then serve until
    the process is interrupted.
    """
    for description in descriptions:
        try:
            port: Any = await serverFromString(reactor, description).listen(factory)  # type: ignore[no-untyped-call]
        except Exception as failure:
            raise EndpointFailed(description, failure, listening=True) from failure
        print(f"{banner} listening on {description} ({port.getHost()}){suffix}", flush=True)
    await Deferred()  # serve until interrupted
