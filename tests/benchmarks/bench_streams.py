"""Object streams: items/s of a server stream of small ints against one C{callRemote} per item with 100 in flight.

One process, a client and a server broker joined in memory (no sockets:
the figure is the CPU cost of an item, both ends included, as in
C{bench_typed}).  The server's C{count(n)} is an async generator of the
ints below C{n}; the stream is read to its end with C{forEach} (the
default window, 256 items).  The calls are C{echo(i)}, 100 issued, then
delivered and answered, and again.  The two cells take turns, batch by
batch, so drift in the machine's speed touches both alike; each cell is the
median of its batches.

Other peers (a C{grpc.aio} server-streaming call, written elsewhere) join
through L{run}'s C{peers}: each is a L{Peer}, a label, a function giving
its items/s for a count of items, and the ratio the stream must reach
against it; they are measured in the same run, shown in the same table,
and each gets its criterion.

    python -m tests.benchmarks streams [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred

from protocols.rpc import Referenceable, remote
from protocols.testing import BrokerPair, brokerPair

from ._harness import BenchResult, Criterion, Options, markdown_table, print_result, write_results

NAME = "streams"
IN_FLIGHT = 100
TARGET = 5.0
"""Issue 33: a stream delivers at least 5x the items/s of one call per item with 100 in flight."""


@dataclass(frozen=True)
class Peer:
    """
    Another way of delivering items, measured beside chunkwire's.

    @ivar label: its name in the table.
    @ivar itemsPerSecond: given a count of items, deliver that many and
        return the items/s (it sets itself up and tears itself down).
    @ivar target: the ratio chunkwire's stream must reach against it.
    """

    label: str
    itemsPerSecond: Callable[[int], float]
    target: float


class Service(Referenceable):
    @remote
    async def count(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @remote
    def echo(self, value: int) -> int:
        return value


def streamBatch(pair: BrokerPair, items: int) -> float:
    """Seconds for a stream of C{items} ints, called and read to its end."""
    counted: list[int] = []

    async def read() -> int:
        stream = await pair.root.callRemote("count", items)
        result: int = await stream.forEach(lambda item: None)
        return result

    start = time.perf_counter()
    Deferred.fromCoroutine(read()).addCallback(counted.append)
    pair.flush()
    elapsed = time.perf_counter() - start
    assert counted == [items], counted
    return elapsed


def callsBatch(pair: BrokerPair, items: int) -> float:
    """Seconds for C{items} calls of C{echo}, C{IN_FLIGHT} at a time."""
    answers: list[Any] = []
    root = pair.root
    start = time.perf_counter()
    for first in range(0, items, IN_FLIGHT):
        for value in range(first, min(items, first + IN_FLIGHT)):
            root.callRemote("echo", value).addCallback(answers.append)
        pair.flush()
    elapsed = time.perf_counter() - start
    assert len(answers) == items, len(answers)
    return elapsed


def measure(quick: bool, peers: Sequence[Peer] = ()) -> dict[str, float]:
    """Items per second of the stream, the calls and each peer: the median over interleaved batches."""
    items = 2_000 if quick else 10_000
    rounds = 5 if quick else 15
    pair = brokerPair(Service())
    for _ in range(2):
        streamBatch(pair, items)  # warm up
        callsBatch(pair, items)
    times: dict[str, list[float]] = {"stream": [], "calls": []}
    rates: dict[str, list[float]] = {peer.label: [] for peer in peers}
    for _ in range(rounds):
        times["stream"].append(streamBatch(pair, items))
        times["calls"].append(callsBatch(pair, items))
        for peer in peers:
            rates[peer.label].append(peer.itemsPerSecond(items))
    result = {
        "stream": items / statistics.median(times["stream"]),
        f"callRemote, {IN_FLIGHT} in flight": items / statistics.median(times["calls"]),
    }
    result.update({label: statistics.median(values) for label, values in rates.items()})
    return result


def _report(rates: dict[str, float]) -> str:
    stream = rates["stream"]
    rows = [[label, f"{rate:,.0f}", f"{stream / rate:.2f}"] for label, rate in rates.items()]
    return "## Object streams: items/s (in memory, both ends)\n\n" + markdown_table(
        ["how", "items/s", "stream / this"], rows
    )


def run(opts: Options, peers: Sequence[Peer] = ()) -> BenchResult:
    """Measure, with C{peers} beside chunkwire's two cells (the hook for other protocols' streams)."""
    rates = measure(opts.quick, peers)
    calls = rates[f"callRemote, {IN_FLIGHT} in flight"]
    criteria = [
        Criterion(
            f"stream / callRemote ({IN_FLIGHT} in flight) items/s",
            rates["stream"] / calls,
            ">=",
            TARGET,
            "issue 33",
        )
    ]
    for peer in peers:
        criteria.append(
            Criterion(f"stream / {peer.label} items/s", rates["stream"] / rates[peer.label], ">=", peer.target)
        )
    path = write_results(NAME, opts, {"rates": rates, "criteria": criteria})
    return BenchResult(NAME, _report(rates), criteria, path)


if __name__ == "__main__":
    sys.exit(print_result(run(Options(quick="--quick" in sys.argv[1:]))))
