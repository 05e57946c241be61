"""A bulk push through a delay proxy that also limits the rate: how close it comes to size/rate + 1 RTT.

    PYTHONPATH=. python -m tests.latency.push [--size-mib 64] [--delay 0.05] [--rate-mib 32] [--window-mib 13]

The receiver (a L{PushTarget} behind a factory of C{rpc.serverFactory} with bulk options) and the
proxy (C{python -m tests.delayproxy}) each run in their own process, the
sender in this one, all on loopback.  Timed: from C{callRemote("push",
Stream(data))} on a connection already warmed by one call, to its answer
(the receiver's verified SHA-256).  The ideal is C{size / rate + RTT}: the
last byte crosses the link C{size / rate} after the first and arrives
C{delay} later, and the answer takes C{delay} back.  A bulk stream adds one
more RTT before any data moves (the sender sends nothing until the
receiver's first credit grant arrives), and the link is only kept full if
the receiver's window covers what is in flight over an RTT: C{rate * RTT}.
The receiver runs with the default L{BulkOptions}: its window starts small
and grows by itself (autotuning, L{BulkOptions.maxWindow}), so the ramp
costs a few RTTs.  C{--window-mib} fixes the window instead (autotuning off;
L{windowNeeded} is what a fixed window must be).

Contract: every process started is ended by its id; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import bulk, rpc
from protocols.bulk import BulkOptions, IncomingStream, Stream
from protocols.bulk._integrity import availableDigests, newHash
from tests.processes import readUntil, stop

from ..faults.support import ENV, ROOT

MiB = 1024 * 1024


class PushTarget(rpc.Referenceable):
    """Receives pushed streams, verifies them and keeps nothing."""

    @rpc.remote
    def ping(self) -> str:
        return "pong"

    @rpc.remote
    async def push(self, stream: IncomingStream) -> list[Any]:
        """Receive C{stream} (its digest verified); answer C{[size, digest hex]}."""
        result = await stream.receive(lambda piece: None)
        return [result.size, result.hexdigest]


def options(window: int | None) -> BulkOptions:
    """The default options, or with C{window}: a fixed receive window of that many bytes (no autotuning)."""
    return BulkOptions() if window is None else BulkOptions(window=window, maxWindow=0)


def windowNeeded(rate: float, rtt: float) -> int:
    """
    The receive window that keeps a C{rate} link with round trip C{rtt}
    full: what is in flight over two RTTs (credit takes one RTT to come
    back, and a receiver hashing in the reactor thread counts half its
    window), rounded up to a MiB.
    """
    return int(-(-4 * rate * rtt // MiB)) * MiB


class _Child:
    """A child process printing C{{"port": N}} first; ended by its id."""

    def __init__(self, command: list[str]) -> None:
        import subprocess

        self.process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        try:
            self.port = int(readUntil(self.process, rb'"port": (\d+)').group(1))
        except BaseException:
            stop(self.process)
            raise

    def stop(self) -> None:
        stop(self.process)


def receiverProcess(window: int | None) -> _Child:
    """C{python -m tests.latency.push serve WINDOW|default}: a push target on an ephemeral loopback port."""
    return _Child([sys.executable, "-m", "tests.latency.push", "serve", "default" if window is None else str(window)])


def proxyProcess(target: int, delay: float, rate: float | None) -> _Child:
    """C{python -m tests.delayproxy}: the delay proxy on the select reactor, in its own process."""
    command = [sys.executable, "-m", "tests.delayproxy", str(target), str(delay)]
    if rate is not None:
        command.append(str(rate))
    return _Child(command)


def payload(size: int) -> bytes:
    """C{size} bytes that differ along the stream (a misplaced piece would fail the digest)."""
    block = bytes(range(256)) * 4096 + b"\x01"
    return (block * (size // len(block) + 1))[:size]


async def measurePush(reactor: Any, size: int, delay: float, rate: float, window: int | None = None) -> dict[str, Any]:
    """
    One push of C{size} bytes through a fresh receiver and proxy; return the
    figures.  C{window}: a fixed receive window, or C{None} for the default
    options (autotuned).
    """
    data = payload(size)
    expected = newHash(availableDigests()[0])
    expected.update(data)
    receiver = receiverProcess(window)
    proxy = None
    root = None
    try:
        proxy = proxyProcess(receiver.port, delay, rate)
        streams = rpc.ClientOptions(bulk=bulk.BulkOptions())
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={proxy.port}", options=streams)
        assert await root.callRemote("ping") == "pong"  # the whole path is up
        started = time.perf_counter()
        answer = await root.callRemote("push", Stream(data))
        seconds = time.perf_counter() - started
    finally:
        if root is not None:
            await root.broker.disconnect()
        if proxy is not None:
            proxy.stop()
        receiver.stop()
    assert answer == [size, expected.hexdigest()], answer
    rtt = 2 * delay
    ideal = size / rate + rtt
    return {
        "size": size,
        "delay_s": delay,
        "rtt_s": rtt,
        "rate": rate,
        "window": window,
        "seconds": seconds,
        "ideal_s": ideal,
        "ratio": seconds / ideal,
        "rtts_over_ideal": (seconds - ideal) / rtt,
        "throughput": size / seconds,
    }


def line(result: dict[str, Any]) -> str:
    """One result as a sentence with its figures."""
    window = "default (autotuned)" if result["window"] is None else f"fixed {result['window'] / MiB:.2f} MiB"
    return (
        f"push {result['size'] / MiB:.0f} MiB, {result['rtt_s'] * 1e3:.0f} ms RTT, {result['rate'] / MiB:.0f} MiB/s,"
        f" window {window}: {result['seconds']:.3f} s; ideal size/rate + RTT"
        f" {result['ideal_s']:.3f} s; ratio {result['ratio']:.3f}"
        f" ({result['rtts_over_ideal']:+.2f} RTT); {result['throughput'] / MiB:.1f} MiB/s"
    )


def serve(window: int | None) -> None:
    """The receiver process: print the port as JSON, serve until killed."""

    async def body(reactor: Any) -> None:
        serving = rpc.ServerOptions(bulk=options(window), guard=None)
        factory = rpc.serverFactory(PushTarget(), options=serving, clock=reactor)
        from twisted.internet.endpoints import TCP4ServerEndpoint

        port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
        print(json.dumps({"port": port.getHost().port}), flush=True)
        await Deferred()

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"]:
        serve(None if argv[1] == "default" else int(argv[1]))
        return
    parser = argparse.ArgumentParser(prog="python -m tests.latency.push", description=__doc__)
    parser.add_argument("--size-mib", type=float, default=64)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds each way")
    parser.add_argument("--rate-mib", type=float, default=32, help="MiB/s each way")
    parser.add_argument(
        "--window-mib", type=float, help="a fixed receive window (default: the default options, autotuned)"
    )
    parser.add_argument("--json", help="write the result here")
    parser.add_argument(
        "--bound", type=float, default=1.1, help="exit 1 if seconds / (size/rate + RTT) exceeds this (0: report only)"
    )
    args = parser.parse_args(argv)
    rate = args.rate_mib * MiB
    window = int(args.window_mib * MiB) if args.window_mib else None

    async def body(reactor: Any) -> None:
        result = await measurePush(reactor, int(args.size_mib * MiB), args.delay, rate, window)
        print(line(result), flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump(result, out, indent=1)
        if args.bound and result["ratio"] > args.bound:
            print(f"FAIL: ratio {result['ratio']:.3f} > {args.bound}", flush=True)
            raise SystemExit(1)

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
