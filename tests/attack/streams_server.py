"""A service with object streams both ways, served as the example servers are, for the hostile peer to visit.

    PYTHONPATH=. python -m tests.attack.streams_server --listen tcp:0:interface=127.0.0.1

No shipped example serves an C{AsyncIterator} argument and an
C{AsyncIterator} result at once, so the catalogue (L{tests.attack.peercatalogue})
serves this one, written as the streams how-to writes its service
(C{docs/snippets/object_streams.py}), with the guard options of every
example server.  It prints C{"streams server listening on DESCRIPTION
(ADDRESS)"} once it listens, and logs to stdout (peers the guard drops,
failed calls).  Its methods take and give items of any kind, as a service
that relays objects does: what bounds them is the stream windows, the
limits and the guard, which is what the catalogue checks.
"""

from __future__ import annotations

import argparse
import array
import sys
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

from protocols import rpc
from protocols._guard import GuardedFactory, addGuardArguments, policyFromArguments

MAX_ITEM = 1 << 20
"""The largest item C{produce} makes, in bytes."""
MAX_COUNT = 1 << 40
"""The most items C{produce} makes: as good as endless."""

Kind = Literal["bytes", "str", "bytearray", "memoryview", "array", "list"]


def item(kind: str, size: int) -> Any:
    """One item of C{kind} holding C{size} bytes (an array: C{size} rounded down to whole doubles)."""
    if kind == "str":
        return "s" * size
    if kind == "bytearray":
        return bytearray(size)
    if kind == "memoryview":
        return memoryview(bytes(size))
    if kind == "array":
        return array.array("d", bytes(size - size % 8))
    if kind == "list":
        return list(range(size // 8))
    return b"b" * size


class Streams(rpc.Referenceable):
    """Object streams in, out, and both."""

    @rpc.remote
    def doubled(self, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Each item of C{items} twice, as the caller's credit allows (C{items} is read no faster)."""

        async def each() -> AsyncIterator[Any]:
            async for value in items:
                yield value
                yield value

        return each()

    @rpc.remote
    async def total(self, items: AsyncIterator[Any]) -> int:
        """How many items C{items} held, once it ends."""
        count = 0
        async for _ in items:
            count += 1
        return count

    @rpc.remote
    async def produce(
        self,
        kind: Kind,
        size: Annotated[int, rpc.Range(0, MAX_ITEM)],
        count: Annotated[int, rpc.Range(0, MAX_COUNT)],
    ) -> AsyncIterator[Any]:
        """C{count} items of C{kind}, C{size} bytes each, as the caller's credit allows."""
        value = item(kind, size)
        for _ in range(count):
            yield value

    @rpc.remote
    def ping(self, text: Annotated[str, rpc.MaxLength(64)]) -> str:
        """C{text}: the honest client's call."""
        return text


async def serve(reactor: Any, args: argparse.Namespace) -> None:
    factory = GuardedFactory(rpc.serverFactory(Streams(), clock=reactor), policyFromArguments(args), reactor)
    for description in args.listen or ["tcp:0:interface=127.0.0.1"]:
        port = await serverFromString(reactor, description).listen(factory)
        print(f"streams server listening on {description} ({port.getHost()})", flush=True)
    await Deferred()  # serve until terminated


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", action="append", metavar="ENDPOINT", help="a Twisted endpoint (repeatable)")
    addGuardArguments(parser)
    args = parser.parse_args(argv)
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout)], redirectStandardIO=False)
    react(lambda reactor: Deferred.fromCoroutine(serve(reactor, args)))


if __name__ == "__main__":
    main(sys.argv[1:])
