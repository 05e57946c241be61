"""Honest clients for the attack suite: sequential calls for a while, then their latencies as JSON.

    PYTHONPATH=. python -m tests.attack.honest --kind kv --port 8760 --duration 3 --clients 2

Each client makes one call at a time (kv: a put then a get; echo: a small
list) on its own connection and times each one; every call must succeed.
Prints C{{"calls": n, "errors": [...], "p50": s, "p99": s, "max": s}}.
With C{--ready FILE}, creates FILE once every client has connected and
made its first call (what a test waits for before it attacks, rather than
a fixed pause).  With C{--pause SECONDS}, each client waits that long
between its calls (the default run's untimed cases: calls all through the
attack at a fraction of the CPU; the timed campaign calls flat out, its
p99 measured under full load).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import deferLater, react


def percentile(values: list[float], fraction: float) -> float:
    """The C{fraction} quantile of C{values} (nearest rank); 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


MIN_CALLS = 3
"""Calls each client makes however late it started: on a loaded machine starting
the process and connecting can take longer than the whole duration, and a
client that made no call would prove nothing about the server."""


async def paused(reactor: Any, pause: float) -> None:
    """Wait C{pause} seconds on the reactor between two calls (none for 0: flat out)."""
    if pause > 0:
        await deferLater(reactor, pause, lambda: None)


async def kvClient(
    reactor: Any, port: int, until: float, index: int, latencies: list[float], pause: float = 0.0
) -> None:
    from protocols import rpc

    ref = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
    value, count = "v" * 64, 0
    while count < MIN_CALLS or (time.monotonic() < until and count < 200_000):
        key = f"honest-{index}-{count % 100}"
        start = time.perf_counter()
        await ref.callRemote("put", key, value)
        got = await ref.callRemote("get", key)
        latencies.append((time.perf_counter() - start) / 2)
        if got != value:
            raise AssertionError(f"get({key!r}) gave {got!r}")
        count += 1
        await paused(reactor, pause)
    await ref.broker.disconnect()


async def echoClient(
    reactor: Any, port: int, until: float, index: int, latencies: list[float], pause: float = 0.0
) -> None:
    from protocols import echo

    client = await echo.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
    sample, count = [index, "honest", b"x" * 64], 0
    while count < MIN_CALLS or (time.monotonic() < until and count < 400_000):
        start = time.perf_counter()
        got = await client.echo(sample)
        latencies.append(time.perf_counter() - start)
        if got != sample:
            raise AssertionError(f"echo gave {got!r}")
        count += 1
        await paused(reactor, pause)
    client.transport.loseConnection()


async def bulkClient(
    reactor: Any, port: int, until: float, index: int, latencies: list[float], pause: float = 0.0
) -> None:
    from protocols import bulk, rpc

    streams = rpc.ClientOptions(bulk=bulk.BulkOptions())
    ref = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}", options=streams)
    count = 0
    while count < MIN_CALLS or (time.monotonic() < until and count < 200_000):
        start = time.perf_counter()
        listed = await ref.callRemote("list")
        latencies.append(time.perf_counter() - start)
        if not isinstance(listed, list):
            raise AssertionError(f"list() gave {listed!r}")
        count += 1
        await paused(reactor, pause)
    await ref.broker.disconnect()


CLIENTS = {"kv": kvClient, "echo": echoClient, "bulk": bulkClient}


class Timings(list[float]):
    """One client's latencies; C{first} is called when the first is added (its first call is done)."""

    def __init__(self, first: Callable[[], None]) -> None:
        super().__init__()
        self.first = first

    def append(self, value: float) -> None:
        super().append(value)
        if len(self) == 1:
            self.first()


async def run(
    reactor: Any,
    kind: str,
    port: int,
    duration: float,
    clients: int,
    ready: Callable[[], None] = lambda: None,
    pause: float = 0.0,
) -> dict[str, Any]:
    """
    Run C{clients} clients of C{kind}, each waiting C{pause} seconds between
    its calls; C{ready} is called once each has made its first call.
    """
    client = CLIENTS[kind]
    errors: list[str] = []
    until = time.monotonic() + duration
    started: list[int] = []

    def first() -> None:
        started.append(1)
        if len(started) == clients:
            ready()

    timings = [Timings(first) for _ in range(clients)]

    async def one(index: int) -> None:
        try:
            await client(reactor, port, until, index, timings[index], pause)
        except Exception as error:
            errors.append(f"client {index}: {type(error).__name__}: {error}")

    await gatherResults([Deferred.fromCoroutine(one(index)) for index in range(clients)])
    latencies = [latency for mine in timings for latency in mine]
    return {
        "calls": len(latencies),
        "errors": errors,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies, default=0.0),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=sorted(CLIENTS), default="kv")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--ready", help="a file to create once every client has made its first call")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each client waits between its calls")
    args = parser.parse_args(argv)

    def ready() -> None:
        if args.ready:
            with open(args.ready, "w"):
                pass

    async def body(reactor: Any) -> None:
        result = await run(reactor, args.kind, args.port, args.duration, args.clients, ready, args.pause)
        print(json.dumps(result), flush=True)

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
