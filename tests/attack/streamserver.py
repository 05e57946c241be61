"""A small RPC server with object streams, for the stream attacks (L{tests.attack.attacks_streams}).

    PYTHONPATH=. python -m tests.attack.streamserver

It listens on a port of the loopback interface that the system picks and
prints C{"stream server listening on port=N"}; it then answers, on a line
each, C{census} (sent on its standard input) with a garbage collection's
count of the live L{StreamReader}s and L{Broker}s, C{ledger} with what its
connections' ledgers hold together and how often one went over its budget
(L{framing._ledger.TOTALS}), and C{quit} by stopping.

Its root's methods: C{firehose()}, a stream of 16 KiB byte strings whose
generator yields without ever awaiting (a producer bounded by nothing but
its consumer's credit and the connection); C{swallow(streams)}, which reads
the first of the streams it is given and never ends while that one does
not; C{hold(data)}, a call that never ends, its coroutine keeping its
argument; C{ping(x)}, an honest call that answers C{x}.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import Any

from twisted.internet import stdio
from twisted.internet.defer import Deferred
from twisted.internet.task import react
from twisted.protocols.basic import LineReceiver

from framing._ledger import TOTALS
from protocols import rpc
from protocols.rpc import Referenceable, remote
from protocols.rpc._broker import Broker
from protocols.rpc._streams import StreamReader

ITEM_BYTES = 16 * 1024


class StreamService(Referenceable):
    """The methods the attacks call."""

    @remote
    async def firehose(self) -> AsyncIterator[bytes]:
        item = b"x" * ITEM_BYTES
        while True:
            yield item

    @remote
    async def swallow(self, streams: list[Any]) -> int:
        count = 0
        async for _ in streams[0]:
            count += 1
        return count

    @remote
    async def hold(self, data: bytes) -> int:
        await Deferred()
        return len(data)

    @remote
    def ping(self, value: int) -> int:
        return value


def census() -> tuple[int, int]:
    """A garbage collection, then the live L{StreamReader}s and L{Broker}s."""
    gc.collect()
    readers = brokers = 0
    for obj in gc.get_objects():
        if isinstance(obj, StreamReader):
            readers += 1
        elif isinstance(obj, Broker):
            brokers += 1
    return readers, brokers


class Commands(LineReceiver):
    delimiter = b"\n"

    def __init__(self, done: Deferred[None]) -> None:
        self.done = done

    def lineReceived(self, line: bytes) -> None:
        if line.strip() == b"census":
            readers, brokers = census()
            print(f"census readers={readers} brokers={brokers}", flush=True)
        elif line.strip() == b"ledger":
            print(f"ledger held={TOTALS.held} full={TOTALS.full_events}", flush=True)
        elif line.strip() == b"quit" and not self.done.called:
            self.done.callback(None)

    def connectionLost(self, reason: Any = None) -> None:
        if not self.done.called:
            self.done.callback(None)


async def main(reactor: Any) -> None:
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", StreamService())
    print(f"stream server listening on port={port.getHost().port}", flush=True)
    done: Deferred[None] = Deferred()
    stdio.StandardIO(Commands(done))
    await done


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
