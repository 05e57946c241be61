"""What the example servers share: the repeatable --listen option, and listening on every endpoint until interrupted."""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString


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
        port: Any = await serverFromString(reactor, description).listen(factory)  # type: ignore[no-untyped-call]
        print(f"{banner} listening on {description} ({port.getHost()}){suffix}", flush=True)
    await Deferred()  # serve until interrupted
