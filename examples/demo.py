"""The main demo: chunkwire's echo, key-value RPC and bulk-transfer services on loopback, in one process.

    python3 dev.py demo                 # sets up .venv on demand, then runs this
    python examples/demo.py [--size MiB] [--seconds S] [--window N] [--trace]

It starts the three services on ephemeral ports of 127.0.0.1 (the bulk
service serves a temporary directory), then, as a client of each:

  1. echoes objects of several types and checks that they come back equal;
  2. puts, gets and lists keys in the key-value store, then times calls to
     get(): one at a time, then with --window calls (100) in flight;
  3. generates a --size MiB file (256 by default) of deterministic
     pseudo-random bytes, streams it to the bulk service with a progress bar
     (bytes, rate and ETA on a terminal, a line a second otherwise), and
     checks its digest (BLAKE3 with chunkwire[fast], else SHA-256; the
     line names it): the bulk layer verifies it end to end, and the demo
     compares the stored file's digest with the one computed while writing
     the source;
  4. prints a summary: RPC calls per second, bulk MB/s (10^6 bytes a
     second), and for each client the bytes per write and the writes per
     message, counted as they leave it (a message is one call or one bulk
     control message or data frame; a write is one hand-over of bytes to
     the TCP connection).  Messages sent in one reactor turn while the
     client handles a read share a write, so with many calls in flight
     there are fewer writes than messages.  Its last line names the codec
     core in use (framing.implementation: compiled, or pure).

Temporary files are removed at the end, whatever happens.  The exit status
is 1 if a check failed.  The framing layer alone (no sockets) is shown by
examples/framing_demo.py.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

# The script's directory is on sys.path: the progress display is shared with bulk_client.py.
from _progress import ProgressDisplay, RunProgress, humanBytes, transferSummary
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import serverFromString
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

import framing
from protocols import CoalescingTransport, TokenProtocol, bulk, echo, rpc
from protocols.bulk import BulkService, FileResult, availableDigests, newHash, sendFile
from protocols.kv import KeyValueStore
from protocols.serving import connectionOf

MiB = 1024 * 1024
LOCAL = "tcp:0:interface=127.0.0.1"
SEED = 8

SAMPLES: list[Any] = [
    {"greeting": "hello", "numbers": [1, 2.5, 2**70], "ok": True, "none": None},
    "ünïcødé ✓ 🐍",
    bytes(range(256)) * 4096,  # 1 MiB
    (1, "two", b"three", 4.0),
    {1, 2, 3},
    list(range(1000)),
]
"""What the demo echoes: values of several built-in types, one of them 1 MiB."""


class DemoFailed(Exception):
    """A check of the demo failed (an object changed on the way, a digest differs)."""


# -- counting what reaches the socket -----------------------------------------------------------


class WireCounter:
    """
    Counts the messages some client connections send and the writes that
    leave them, to show "one write per message" on real sockets.

    A message is one object sent (a call, an answer, a bulk control
    message: the connection's C{TokenProtocol.objectsSent}), one PING or
    PONG (its C{pings.sent} and C{pings.pongsSent}: a PONG answering the
    server's PING may leave alone) or one bulk data frame (the connection's
    C{BulkChannel.framesSent}, since frames are written without
    C{sendObject}).  A write is one hand-over of bytes from the protocol's
    L{protocols.CoalescingTransport} to the TCP connection under it (its
    C{writeCount}).
    """

    def __init__(self) -> None:
        self._connections: list[tuple[TokenProtocol, int]] = []
        self._transports: list[tuple[CoalescingTransport, int, int]] = []
        self._channels: list[tuple[bulk.BulkChannel, int]] = []

    def attach(self, protocol: Any) -> None:
        """Count from now on what C{protocol} (a connected L{TokenProtocol}, or a broker: its connection) sends."""
        connection: TokenProtocol = connectionOf(protocol)
        coalescing = connection.transport
        self._transports.append((coalescing, coalescing.writeCount, coalescing.bytesWritten))
        self._connections.append((connection, _sent(connection)))
        channel = getattr(protocol, "bulk", None)
        if channel is not None:
            self._channels.append((channel, channel.framesSent))

    @property
    def writes(self) -> int:
        """Writes the attached connections handed to their sockets since attached."""
        return sum(transport.writeCount - before for transport, before, _ in self._transports)

    @property
    def written(self) -> int:
        """Bytes in those writes."""
        return sum(transport.bytesWritten - before for transport, _, before in self._transports)

    @property
    def objects(self) -> int:
        """Objects, PINGs and PONGs the attached connections sent since attached."""
        return sum(_sent(connection) - before for connection, before in self._connections)

    @property
    def messages(self) -> int:
        """Objects, PINGs and PONGs sent, plus bulk data frames sent."""
        return self.objects + sum(channel.framesSent - before for channel, before in self._channels)

    def snapshot(self) -> tuple[int, int, int]:
        """C{(messages, writes, bytes written)} so far."""
        return self.messages, self.writes, self.written


def _sent(connection: TokenProtocol) -> int:
    """The objects, PINGs and PONGs C{connection} sent so far."""
    return connection.objectsSent + connection.pings.sent + connection.pings.pongsSent


@dataclass
class WireFigures:
    """What a L{WireCounter} counted between two snapshots."""

    messages: int
    writes: int
    written: int

    @classmethod
    def between(cls, before: tuple[int, int, int], after: tuple[int, int, int]) -> WireFigures:
        return cls(*(b - a for a, b in zip(before, after, strict=True)))

    def line(self, label: str) -> str:
        perWrite = self.written / self.writes if self.writes else 0.0
        perMessage = self.writes / self.messages if self.messages else 0.0
        return (
            f"{label}: {perWrite:,.0f} bytes per write, {perMessage:.2f} writes per message"
            f" ({self.messages:,} messages, {self.writes:,} writes, {self.written:,} bytes)"
        )


# -- the three parts -------------------------------------------------------------------------------


async def echoSome(reactor: Any, address: str, out: TextIO) -> None:
    """Echo L{SAMPLES} one after another and check that each comes back equal."""
    client = await echo.connect(reactor, address)
    try:
        for sample in SAMPLES:
            answer = await client.echo(sample)
            if answer != sample or type(answer) is not type(sample):
                raise DemoFailed(f"echo changed a {type(sample).__name__}: {answer!r:.100}")
    finally:
        client.transport.loseConnection()
    kinds = ", ".join(type(sample).__name__ for sample in SAMPLES)
    print(f"echo: {len(SAMPLES)} objects came back equal ({kinds})", file=out, flush=True)


async def sequentialCalls(root: rpc.RemoteReference, seconds: float) -> tuple[int, float]:
    """Call C{get} one at a time for C{seconds}; give the calls answered and the time taken."""
    started = time.perf_counter()
    deadline = started + seconds
    calls = 0
    while True:
        await root.callRemote("get", "key-42")
        calls += 1
        now = time.perf_counter()
        if now >= deadline:
            return calls, now - started


def windowedCalls(root: rpc.RemoteReference, seconds: float, window: int) -> Deferred[tuple[int, float]]:
    """
    Keep C{window} calls to C{get} in flight for C{seconds} (each answer
    starts the next call), then wait for the last answers.

    @return: a L{Deferred} firing with the calls answered and the time taken.
    """
    done: Deferred[tuple[int, float]] = Deferred()
    started = time.perf_counter()
    deadline = started + seconds
    counts = {"sent": 0, "answered": 0}

    def call() -> None:
        counts["sent"] += 1
        root.callRemote("get", "key-42").addCallbacks(answered, failed)

    def answered(_: object) -> None:
        counts["answered"] += 1
        now = time.perf_counter()
        if now < deadline:
            call()
        elif counts["answered"] == counts["sent"] and not done.called:
            done.callback((counts["answered"], now - started))

    def failed(failure: Any) -> None:
        if not done.called:
            done.errback(failure)

    for _ in range(window):
        call()
    return done


@dataclass
class CallFigures:
    """Calls per second one at a time and with a window in flight, and what the client wrote meanwhile."""

    sequential: float
    windowed: float
    window: int
    sequentialWire: WireFigures
    windowedWire: WireFigures


async def keyValue(reactor: Any, address: str, seconds: float, window: int, out: TextIO) -> CallFigures:
    """Use the key-value store, then time calls to C{get}."""
    counter = WireCounter()
    root = await rpc.connect(reactor, address)
    try:
        counter.attach(root.broker)
        for i in range(100):
            await root.callRemote("put", f"key-{i}", f"value-{i}")
        value = await root.callRemote("get", "key-42")
        listed = await root.callRemote("list", "key-4")
        print(
            f"kv: put 100 keys; get('key-42') -> {value!r}; list('key-4') -> {len(listed)} keys", file=out, flush=True
        )
        before = counter.snapshot()
        calls, taken = await sequentialCalls(root, seconds)
        middle = counter.snapshot()
        sequential = calls / taken
        print(
            f"kv: {calls:,} calls to get() one at a time in {taken:.2f} s: {sequential:,.0f} calls/s",
            file=out,
            flush=True,
        )
        calls, taken = await windowedCalls(root, seconds, window)
        windowed = calls / taken
        print(
            f"kv: {calls:,} calls with {window} in flight in {taken:.2f} s: {windowed:,.0f} calls/s",
            file=out,
            flush=True,
        )
        after = counter.snapshot()
    finally:
        await root.broker.disconnect()
    return CallFigures(
        sequential, windowed, window, WireFigures.between(before, middle), WireFigures.between(middle, after)
    )


DIGEST = availableDigests()[0]
"""The digest the demo's client and service choose (both run here): BLAKE3 with chunkwire[fast], else SHA-256."""


def generate(path: Path, size: int, seed: int = SEED) -> str:
    """
    Write C{size} deterministic pseudo-random bytes to C{path}; return their L{DIGEST} (hex).

    One random MiB is drawn once and each MiB of the file is that block
    rotated by a different offset: as fast as copying memory, and no two
    MiB of the file alike (so a piece stored at the wrong offset changes
    the digest).
    """
    block = random.Random(seed).randbytes(MiB)
    digest = newHash(DIGEST)
    with open(path, "wb") as file:
        for index in range(-(-size // MiB)):
            # An odd step makes the offsets distinct for the first 2**20 MiB.
            shift = (index * 40503) % MiB
            piece = (block[shift:] + block[:shift])[: size - index * MiB]
            file.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def fileDigest(path: Path) -> str:
    """The L{DIGEST} (hex) of the file at C{path}, read a MiB at a time."""
    digest = newHash(DIGEST)
    with open(path, "rb") as file:
        while piece := file.read(MiB):
            digest.update(piece)
    return digest.hexdigest()


@dataclass
class BulkFigures:
    """A file transfer's result and what the client wrote for it."""

    result: FileResult
    wire: WireFigures


async def bulkTransfer(reactor: Any, address: str, work: Path, size: int, out: TextIO) -> BulkFigures:
    """Generate the file, stream it to the bulk service, and check the stored copy's digest."""
    source = work / "demo.bin"
    started = time.perf_counter()
    sourceDigest = generate(source, size)
    taken = time.perf_counter() - started
    line = f"generated {source.name}: {humanBytes(size)} in {taken:.2f} s, {DIGEST} {sourceDigest}"
    print(line, file=out, flush=True)
    counter = WireCounter()

    def connect() -> Deferred[rpc.RemoteReference]:
        def counted(root: rpc.RemoteReference) -> rpc.RemoteReference:
            counter.attach(root.broker)
            return root

        return rpc.connect(reactor, address, options=rpc.ClientOptions(bulk=bulk.BulkOptions())).addCallback(counted)

    progress = RunProgress()
    display = ProgressDisplay(progress, f"send {source.name}", out, reactor)
    display.start()
    try:
        result = await sendFile(connect, source, clock=reactor, progress=progress)
    finally:
        display.stop()
    print(transferSummary("sent", result), file=out, flush=True)
    stored = fileDigest(work / "served" / source.name)
    if result.algorithm != DIGEST or not (sourceDigest == result.hexdigest == stored):
        raise DemoFailed(
            f"digests differ: source {DIGEST} {sourceDigest}, bulk layer {result.algorithm} {result.hexdigest},"
            f" stored {stored}"
        )
    print(f"stored copy: {DIGEST} {stored}, the same as the source's", file=out, flush=True)
    return BulkFigures(result, WireFigures.between((0, 0, 0), counter.snapshot()))


# -- putting it together ----------------------------------------------------------------------------


def printSummary(calls: CallFigures, sent: BulkFigures, out: TextIO) -> None:
    result = sent.result
    rate = result.size / result.seconds / 1e6 if result.seconds > 0 else 0.0
    lines = [
        "summary:",
        f"  RPC calls/s, one at a time: {calls.sequential:,.0f}",
        f"  RPC calls/s, {calls.window} in flight: {calls.windowed:,.0f}",
        f"  bulk MB/s: {rate:,.1f} ({humanBytes(result.size)} in {result.seconds:.2f} s)",
        "  " + calls.sequentialWire.line("RPC client, one at a time"),
        "  " + calls.windowedWire.line(f"RPC client, {calls.window} in flight"),
        "  " + sent.wire.line("bulk client"),
        f"  digest: {result.algorithm} {result.hexdigest}: source, bulk layer and stored copy agree",
        f"  codec core: {framing.implementation}",
    ]
    print("\n".join(lines), file=out, flush=True)


async def listen(reactor: Any, factory: Any) -> Any:
    """Listen with C{factory} on an ephemeral port of 127.0.0.1."""
    return await serverFromString(reactor, LOCAL).listen(factory)  # type: ignore[no-untyped-call]


def address(port: Any) -> str:
    """The client endpoint description of a listening port."""
    return f"tcp:host=127.0.0.1:port={port.getHost().port}"


async def demo(reactor: Any, options: argparse.Namespace, work: Path, out: TextIO = sys.stdout) -> None:
    """
    Start the services, run the three parts and print the summary, using
    the directory C{work} for files; then close every connection and port.
    """
    ports: list[Any] = []
    kvFactory = rpc.serverFactory(KeyValueStore(), clock=reactor)
    streams = rpc.ServerOptions(bulk=bulk.BulkOptions(), guard=None)
    bulkFactory = rpc.serverFactory(BulkService(work / "served", reactor=reactor), options=streams, clock=reactor)
    try:
        for factory in (echo.serverFactory(), kvFactory, bulkFactory):
            ports.append(await listen(reactor, factory))
        echoPort, kvPort, bulkPort = ports
        numbers = [port.getHost().port for port in ports]
        print(
            "services on 127.0.0.1: echo port {}, kv port {}, bulk port {}".format(*numbers)
            + f" (serving {work / 'served'})",
            file=out,
            flush=True,
        )
        await echoSome(reactor, address(echoPort), out)
        calls = await keyValue(reactor, address(kvPort), options.seconds, options.window, out)
        sent = await bulkTransfer(reactor, address(bulkPort), work, int(options.size * MiB), out)
        printSummary(calls, sent, out)
    finally:
        # The echo server's connections close when its clients do.
        await kvFactory.disconnectAll()
        await bulkFactory.disconnectAll()
        for port in ports:
            await port.stopListening()


def positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text}")
        return value

    return parse


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=positive(float), default=256, metavar="MiB", help="file size (default 256)")
    parser.add_argument("--seconds", type=positive(float), default=1.0, help="seconds per RPC timing (default 1.0)")
    parser.add_argument("--window", type=positive(int), default=100, help="calls in flight (default 100)")
    parser.add_argument(
        "--trace", action="store_true", help="log every token to stderr (slow: try --size 1 --seconds 0.05)"
    )
    options = parser.parse_args(argv)
    if options.trace:
        TokenProtocol.trace = True
        observer: Any = textFileLogObserver(sys.stderr)
        globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)
    print("chunkwire demo: echo, key-value RPC and bulk transfer on loopback, in one process", flush=True)

    async def run(reactor: Any) -> None:
        work = Path(tempfile.mkdtemp(prefix="chunkwire-demo-"))
        # Removed as the reactor shuts down, which it does on Ctrl-C or SIGTERM
        # too (react() then ends the process with that signal: no finally
        # clause after it would run).
        reactor.addSystemEventTrigger("after", "shutdown", shutil.rmtree, work, True)
        try:
            await demo(reactor, options, work)
        except DemoFailed as error:
            print(f"FAILED: {error}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None

    react(lambda reactor: Deferred.fromCoroutine(run(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
