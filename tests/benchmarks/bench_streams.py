"""Object streams: items/s of a server stream of small ints against one C{callRemote} per item with 100 in flight.

Two settings, each side by side in one run:

  - B{in memory}: one process, a client and a server broker joined in
    memory (no sockets: the figure is the CPU cost of an item, both ends
    included, as in C{bench_typed}).  The calls are C{echo(i)}, 100
    issued, then delivered and answered, and again.
  - B{loopback TCP}: a server process and a client process (as
    C{bench_rpc}'s peers are), on 127.0.0.1: the figure a C{grpc.aio}
    server-streaming call measured the same way is comparable with.  The
    calls keep 100 in flight (each answer sends the next call).

The server's C{count(n)} is an async generator of the ints below C{n}; the
stream is read to its end with C{forEach} (the default window, 256
items).  The cells take turns, batch by batch, so drift in the machine's
speed touches them alike; each cell is the median of its batches.

Other peers (a C{grpc.aio} server-streaming call, written elsewhere) join
through L{run}'s C{peers}: each is a L{Peer}, a label, a function giving
its items/s for a count of items, and the ratio chunkwire's TCP stream must
reach against it; they are measured in the same run, shown in the same
table, and each gets its criterion.  C{--grpc} loads the one of
C{tests.benchmarks._grpc_streams} (L{grpcPeers}), if it is there.

    python -m tests.benchmarks streams [--quick]
    python -m tests.benchmarks.bench_streams [--quick] [--grpc]
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred

from protocols.rpc import Referenceable, remote
from protocols.testing import BrokerPair, brokerPair

from ._harness import REPO_ROOT, BenchResult, Criterion, Options, markdown_table, print_result, write_results
from ._rpc_peers import _childEnv, _Lines, endProcess

NAME = "streams"
IN_FLIGHT = 100
TARGET = 5.0
"""Issue 33: a stream delivers at least 5x the items/s of one call per item with 100 in flight."""
GRPC_TARGET = 10.0
"""Issue 33: a stream delivers at least 10x the items/s of a C{grpc.aio} server-streaming call."""
CALLS = f"callRemote, {IN_FLIGHT} in flight"
PROCESS_TIMEOUT = 120.0
"""Seconds the TCP client process may take for all its batches (a hang, not a slow machine, misses it)."""


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


def sizes(quick: bool) -> tuple[int, int]:
    """Items per batch and batches per cell."""
    return (2_000, 5) if quick else (10_000, 15)


def measure(quick: bool) -> dict[str, float]:
    """Items per second of the stream and the calls in memory: the median over interleaved batches."""
    items, rounds = sizes(quick)
    pair = brokerPair(Service())
    for _ in range(2):
        streamBatch(pair, items)  # warm up
        callsBatch(pair, items)
    times: dict[str, list[float]] = {"stream": [], "calls": []}
    for _ in range(rounds):
        times["stream"].append(streamBatch(pair, items))
        times["calls"].append(callsBatch(pair, items))
    return {
        "stream": items / statistics.median(times["stream"]),
        CALLS: items / statistics.median(times["calls"]),
    }


# -- over loopback TCP: a server process and a client process ---------------------------------------------


def _spawn(args: list[str], log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.benchmarks.bench_streams", *args],
        cwd=REPO_ROOT,
        env=_childEnv(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
    )


def measureTcp(quick: bool, peers: Sequence[Peer] = ()) -> dict[str, float]:
    """
    Items per second of the stream and the calls between a server process
    and a client process over 127.0.0.1, then of each peer (measured here,
    as it sets itself up): the median over batches.
    """
    items, rounds = sizes(quick)
    with tempfile.TemporaryFile() as log:
        server = _spawn(["serve"], log)
        client = None
        try:
            port = _Lines(server, "streams server").read(30.0)["port"]
            client = _spawn(["client", str(port), str(items), str(rounds)], log)
            result = _Lines(client, "streams client").read(PROCESS_TIMEOUT)
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read()[-4000:].decode("utf-8", "replace"))
            raise
        finally:
            for process in (client, server):
                if process is not None:
                    endProcess(process)
    rates = {"stream": float(result["stream"]), CALLS: float(result["calls"])}
    for peer in peers:
        rates[peer.label] = statistics.median(peer.itemsPerSecond(items) for _ in range(rounds))
    return rates


async def _streamOnce(root: Any, items: int) -> float:
    start = time.perf_counter()
    stream = await root.callRemote("count", items)
    count = await stream.forEach(lambda item: None)
    elapsed = time.perf_counter() - start
    assert count == items, count
    return elapsed


async def _callsOnce(root: Any, items: int) -> float:
    """Seconds for C{items} calls of C{echo}, C{IN_FLIGHT} in flight all along (each answer sends the next call)."""
    done: Deferred[None] = Deferred()
    sent = answered = 0

    def send() -> None:
        nonlocal sent
        value, sent = sent, sent + 1
        root.callRemote("echo", value).addCallbacks(answer, done.errback)

    def answer(result: Any) -> None:
        nonlocal answered
        answered += 1
        if sent < items:
            send()
        elif answered == items:
            done.callback(None)

    start = time.perf_counter()
    for _ in range(min(IN_FLIGHT, items)):
        send()
    await done
    return time.perf_counter() - start


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serveMain() -> None:
    """The server process: serve L{Service} on 127.0.0.1, print its port, serve until ended."""
    from twisted.internet.task import react

    from protocols import rpc

    async def main(reactor: Any) -> None:
        port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Service())
        _emit({"port": port.getHost().port, "pid": os.getpid()})
        await Deferred()  # until ended

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))


def clientMain(port: int, items: int, rounds: int) -> None:
    """The client process: warm up, then the stream and the calls by turns; print the two medians in items/s."""
    from twisted.internet.task import react

    from protocols import rpc

    async def main(reactor: Any) -> None:
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
        for _ in range(2):
            await _streamOnce(root, items)
            await _callsOnce(root, items)
        streams, calls = [], []
        for _ in range(rounds):
            streams.append(await _streamOnce(root, items))
            calls.append(await _callsOnce(root, items))
        _emit({"stream": items / statistics.median(streams), "calls": items / statistics.median(calls)})
        await root.broker.disconnect()

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))


# -- the report ---------------------------------------------------------------------------------------------


def grpcPeers() -> list[Peer]:
    """
    The C{grpc.aio} server-streaming peer of C{tests.benchmarks._grpc_streams}
    (its C{grpcStreamItemsPerSecond(n)}), or none, with a word on stderr, if
    that module (or grpcio) is not there.
    """
    try:
        module = importlib.import_module("tests.benchmarks._grpc_streams")
        itemsPerSecond = module.grpcStreamItemsPerSecond
    except (ImportError, AttributeError) as error:
        sys.stderr.write(f"streams: no grpc.aio peer ({error}); measuring chunkwire alone\n")
        return []
    return [Peer("grpc.aio server stream (TCP)", itemsPerSecond, GRPC_TARGET)]


def _table(title: str, rates: dict[str, float]) -> str:
    stream = rates["stream"]
    rows = [[label, f"{rate:,.0f}", f"{stream / rate:.2f}"] for label, rate in rates.items()]
    return f"## Object streams: items/s ({title})\n\n" + markdown_table(["how", "items/s", "stream / this"], rows)


def run(opts: Options, peers: Sequence[Peer] = ()) -> BenchResult:
    """Measure in memory and over loopback TCP, with C{peers} beside the TCP cells (the hook for other protocols)."""
    memory = measure(opts.quick)
    tcp = measureTcp(opts.quick, peers)
    criteria = [
        Criterion(f"in memory: stream / {CALLS} items/s", memory["stream"] / memory[CALLS], ">=", TARGET, "issue 33"),
        Criterion(f"loopback TCP: stream / {CALLS} items/s", tcp["stream"] / tcp[CALLS], ">=", TARGET, "issue 33"),
    ]
    for peer in peers:
        criteria.append(
            Criterion(
                f"loopback TCP: stream / {peer.label} items/s", tcp["stream"] / tcp[peer.label], ">=", peer.target
            )
        )
    path = write_results(NAME, opts, {"memory": memory, "tcp": tcp, "criteria": criteria})
    report = _table("in memory, both ends in one process", memory) + "\n\n"
    report += _table("loopback TCP, a server process and a client process", tcp)
    return BenchResult(NAME, report, criteria, path)


def main(argv: list[str]) -> int:
    """C{serve}, C{client PORT ITEMS ROUNDS} (the TCP processes), or a whole run: C{[--quick] [--grpc]}."""
    if argv[:1] == ["serve"]:
        serveMain()
        return 0
    if argv[:1] == ["client"]:
        clientMain(int(argv[1]), int(argv[2]), int(argv[3]))
        return 0
    peers = grpcPeers() if "--grpc" in argv else []
    return print_result(run(Options(quick="--quick" in argv), peers))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
