"""Bulk transfer over loopback TCP: chunkwire beside a raw Twisted producer, Int32StringReceiver and Foolscap.

    python -m tests.benchmarks.bench_bulk [--quick] [--size 1G|4G] [--runs 3] [--cases raw,chunkwire,cli] [--criterion]
        [--twisted-floor] [--keep-host-memory]

Every case moves C{--size} bytes (1 GiB by default) from a client process to
a server process on 127.0.0.1, each process fresh, and is timed in the
client from the first byte written until the server acknowledges the last
one.  The cases of one run go side by side (round-robin), and the ratios to
the raw Twisted producer are taken within each run, then the median of the
runs, so load drifting between runs cancels out.  Peak RSS is each process's
VmHWM, against its VmRSS once connected and idle.

  - C{raw}: a Twisted C{Protocol} with an C{IPushProducer} writing one 64 KiB
    buffer over and over; the server discards in C{dataReceived}.  A reference line: it reads and writes no file.
  - C{raw-tuned}: the same, with the socket settings chunkwire's bulk
    connections use (512 KiB reads, 1 MiB per send): what the tuning alone buys.
  - C{chunkwire}: C{callRemote("sink", Stream(source))} on a bulk connection;
    the server receives into a discarding callback and verifies the SHA-256
    the client computed while sending (the default).
  - C{chunkwire-sha256}: the same with SHA-256 forced (C{digest="sha256"}).
  - C{chunkwire-nodigest}: the same with C{digest=None}.
  - C{int32}: C{Int32StringReceiver}, 1 MiB messages from a push producer.
  - C{foolscap}: foolscap 24.9 (TLS, as a Tub always is), C{callRemote("sink",
    data)} with 1 MiB byte strings, 4 calls outstanding.
  - C{cli}: what a user runs: C{examples/bulk_server.py} and
    C{examples/bulk_client.py send}, a file in tmpfs (C{/dev/shm}) to a
    directory in tmpfs, with the default options (the digest both ends
    negotiate: BLAKE3 with chunkwire[fast]); timed as a user times it, from
    the command's start to its exit (its start-up and imports included; the
    client's own last line, C{openUpload} to the verified C{finishUpload},
    is kept as C{transfer_seconds}), against the floor timed the same way.
  - C{cli-sha256}: the same with SHA-256 forced (C{--digest sha256} on the
    client).
  - C{cli-thread}, C{cli-inline}: the same as C{cli} with C{--hashing
    thread} (every piece hashed in a worker thread) or C{--hashing inline}
    (in the reactor thread) at both ends, where C{cli} uses the default
    C{auto} (inline on two cores): the measurement behind it.

With C{chunkwire-sha256}, each run also measures C{cpu_floor}'s limit for
SHA-256 (the loopback copy's CPU plus SHA-256 at both ends, divided over the
cores: CPU time, so load moves it little) and, beside it, the same copy with
blocking loops in two processes hashing at both ends (C{cpu_floor.pipeRate}:
no framing, one thread per end, what the limit's perfect division of the
work turns into in practice); the SHA-256 case's rate is set against both.

  - C{library}: the library alone, no CLI, no file service, no progress
    display: C{rpc.connect} to a root C{rpc.serve}d, both with bulk
    options (C{ClientOptions.bulk}, C{ServerOptions.bulk}), whose C{put} receives
    a C{Stream(path)} of the tmpfs file into a fresh tmpfs file and whose
    C{get} sends it back into a fresh tmpfs file at the client.
  - C{upload}: the blocking client (L{protocols.blockingbulk}, no
    Twisted) against C{examples/bulk_server.py}: C{connection.upload(path)}
    of the tmpfs file (resumable: C{openUpload}, C{upload},
    C{finishUpload}), then C{connection.download(name, path)} into a fresh
    tmpfs file, each timed in the client from the call to its return.
  - C{floor}: the framing-free copy (C{_floorcopy}): the same work as a
    file case with nothing else, two processes with one blocking loop
    each; the sender C{readinto}s 1 MiB of the file into one buffer,
    hashes it in place and C{sendall}s it over loopback TCP, the receiver
    C{recv_into}s a 1 MiB buffer, hashes what came and C{write}s it to a
    fresh tmpfs file.  Timed from the first loop's start to the last
    one's end; for the CLI cases, from the launch of the process that
    connects (the sender for C{send}, the receiver for C{fetch}: the one
    in the CLI client's place, started as a fresh process too) to its
    exit, or to the other end's last loop if that ends later.  With
    C{--twisted-floor}, also the same copy with its listening end in
    Twisted's reactor, set up as chunkwire's bulk servers are, still with
    no framing (C{floor on Twisted}, L{TWISTED_FLOOR}): what the reactor
    under every file case's server costs.

The file cases (the CLI cases, C{library} and C{upload}) move the file both ways:
C{send} (the client uploads; the CLI's C{send}) and C{fetch} (it
downloads; the CLI's C{fetch} of the file it just sent, from the same
server).  Just before each of them, each run measures the C{floor} in both
directions with the digest that case uses (the negotiated one; SHA-256 for
C{cli-sha256}), and each file case's rate is set against that floor, of the
same direction and digest (a pair a few seconds apart, so that what
drifts during a run on a shared VM, the memory it hands back to its host
among it, moves both alike; one floor at a run's start came up to 40 s
before the run's last case): the bulk criterion (at least 0.9x for
the CLI with BLAKE3, 0.8x with SHA-256 forced, 0.95x for the library
and for the blocking client's C{upload()}).
Each end's time during each transfer is split into user, system and
waiting (not running: for the peer, the socket or a CPU).  The raw
producer touches no file: it stays as a reference line only.
C{--criterion} runs exactly the cases behind the criterion::

    python -m tests.benchmarks.bench_bulk --criterion --size 1G --runs 3

On a VM that hands free memory back to its host, add C{--keep-host-memory}
(root): the host's reclaim otherwise halves the rate of the transfers it
lands in, at random (L{hostMemoryKept}).

Every case also reports the CPU seconds each process spent per GiB moved
(user + system, all threads; the server's start-up and idle wait excluded,
and the client's start-up: measured around the transfer in the client,
or for the CLI less a listing's), since the machine is shared: rates move with the load, CPU
per GiB much less.

Then each chunkwire case runs again with small calls (C{ping()}) made one
after another on the same connection during the transfer; their p99 round
trip is set against the p99 of the same calls on the same connection, idle,
just before.  Results go to C{bench-results/bulk.json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._harness import median_of

ROOT = Path(__file__).resolve().parents[2]
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

CASES = (
    "raw",
    "raw-tuned",
    "chunkwire",
    "chunkwire-sha256",
    "chunkwire-nodigest",
    "int32",
    "foolscap",
    "cli",
    "cli-sha256",
    "cli-thread",
    "cli-inline",
    "library",
    "upload",
    "floor",
)
PING_CASES = ("chunkwire", "chunkwire-sha256", "chunkwire-nodigest")
LABELS = {
    "raw": "raw Twisted producer, 64 KiB writes (reference; reads and writes no file)",
    "raw-tuned": "raw Twisted producer, chunkwire's socket settings",
    "chunkwire": "chunkwire Stream, digest checked (default: negotiated)",
    "chunkwire-sha256": "chunkwire Stream, SHA-256 forced",
    "chunkwire-nodigest": "chunkwire Stream, digest=None",
    "int32": "Int32StringReceiver, 1 MiB messages",
    "foolscap": "Foolscap 24.9 (TLS), 1 MiB strings, 4 outstanding",
    "cli": "examples/bulk_client.py send, tmpfs to tmpfs (default digest)",
    "cli-sha256": "examples/bulk_client.py send, tmpfs to tmpfs, SHA-256 forced",
    "cli-thread": "examples/bulk_client.py send, tmpfs to tmpfs, --hashing thread",
    "cli-inline": "examples/bulk_client.py send, tmpfs to tmpfs, --hashing inline",
    "library": "rpc.connect to rpc.serve with bulk options, Stream(path) to receive(path), tmpfs to tmpfs",
    "upload": "blocking client upload() / download() to examples/bulk_server.py, tmpfs to tmpfs",
    "floor": "framing-free two-process copy, tmpfs to tmpfs (the bulk criterion's floor)",
}
CLI_CASES = ("cli", "cli-sha256", "cli-thread", "cli-inline")
FILE_CASES = (*CLI_CASES, "library", "upload")
"""The cases that move a file from tmpfs into a fresh tmpfs file, in both directions, each set against the floor."""
DIRECTIONS = ("send", "fetch")
CRITERION_CASES = ("raw", "chunkwire", "cli", "cli-sha256", "library", "upload")
"""
What C{--criterion} runs: exactly the figures of the bulk criterion (issue
31), the raw producer as a reference (each file case brings the floor it is
set against: measured just before it).
"""
FLOOR_TARGETS: dict[str, float | dict[str, float]] = {
    "cli": 0.9,
    "cli-sha256": 0.8,
    "library": 0.95,
    "upload": {"send": 0.95},
}
"""
Each file case's least rate against the framing-free copy of the same run,
in each direction (or in the directions named: the blocking client's
C{upload()}; its C{download()} is shown beside it).
"""
TWISTED_FLOOR = "floor on Twisted"
"""
The floor rows' name for the framing-free copy with its listening end on
Twisted (C{_floorcopy --twisted}, measured with C{--twisted-floor}): the
server's end runs in Twisted's reactor, set up as chunkwire's bulk servers
are (the steady allocator, 1 MiB reads, up to 1 MiB per send), and does
the floor's work with no framing.  Every file case's server is on
Twisted: this copy shows what the reactor costs, and so what of a case's
gap to the floor is chunkwire's own.  On the two-core VM these figures
come from (three sets of 5 runs at 1 GiB, each copy on Twisted against
the blocking copy measured just before it) it ran at 1.01x the blocking
copy where its end sends (BLAKE3, median of 45 pairs) and at 1.01-1.02x
with SHA-256 in both directions, but at 0.95x where its end receives
with BLAKE3 (median of 45 pairs, quartiles 0.90-1.01): a receiver on
Twisted pays some 5 % there before any framing, the margin the library's
send and C{upload()} are allowed against the blocking copy.
"""
TMPFS = Path("/dev/shm")
"""
Where the file cases and the floor keep their files: memory.  On a VM
whose free memory goes back to the host (free page reporting, as on the
Firecracker VMs these figures come from), writing to memory the guest has
not touched lately costs seconds of system time per GiB (one GiB written
into tmpfs here: 0.33 s with no other file, 1.42 s beside one other GiB,
2.92 s beside two), so each transfer holds as many copies of the file as
the floor's: the source and the one being written, and each starts right
after L{freshMemory} (the memory it writes into was just touched, whatever
ran before: without it a transfer after a pause, as the floor's after the
cases that write no file, may write into memory the host took back, which
cost 1.08 s of system time per GiB here against 0.50 right after a GiB was
freed).
"""
HOST_REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")
"""KiB of free memory this VM has reported to its host so far (Firecracker's page reporting), where it does."""


def freshMemory(size: int) -> None:
    """
    Write C{size} bytes (and 64 MiB more) to a tmpfs file and free it, so
    that the transfer started next writes into memory the guest touched
    just now, as every file case and the floor do alike.  On a VM that
    reports free memory to its host, memory freed long ago is faulted in
    again from the host when written (the first GiB written into tmpfs
    after a pause: 1.08 s of system time, 0.50 s right after a GiB was
    freed), and the host takes back memory about 2 s after it is freed: so
    the transfer must start at once.  Costs about 0.5 s per GiB.
    """
    import tempfile

    block = bytes(MiB)
    with tempfile.NamedTemporaryFile(dir=TMPFS, prefix="chunkwire-bench-fresh-", buffering=0) as scratch:
        for _ in range(-(-size // MiB) + 64):
            scratch.write(block)


PAGE_REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
"""The smallest block (as a power of two of pages) this VM reports to its host when it is free, where it reports."""
BUDDYINFO = Path("/proc/buddyinfo")
"""The kernel's free blocks per zone, one column per order: how many orders a block can have here."""


@contextlib.contextmanager
def hostMemoryKept(parameter: Path = PAGE_REPORTING_ORDER, buddyinfo: Path = BUDDYINFO) -> Iterator[tuple[str, str]]:
    """
    While in it, this VM reports no free memory to its host (its page
    reporting order set above the largest order a free block can have),
    so memory a run frees stays the guest's and the next transfer writes
    into it at the usual cost; the order it had is put back on the way out,
    an error or Ctrl-C included (not if the process is killed).  Yields
    C{(the order before, the order set)}.

    Why (C{--keep-host-memory}): on a VM with free page reporting, such as
    the Firecracker VMs of the reference machine, the host takes back
    memory soon after it is freed, and a transfer writing into it
    then faults it back in.  L{freshMemory} touches that memory first, but
    in a set of C{--criterion --size 1G --runs 5} the host still took
    memory back during 51 of the 80 measured directions, and each such
    transfer ran at about half the rate (the library's send: 517-650 MB/s
    in the three runs where it did, 1,270-1,316 in the two where it did
    not); with reporting held off, in two sets, nothing went back and no
    BLAKE3 file case ran below 902 MB/s (docs/benchmarks.rst).  It changes
    a setting of the whole machine for the run, so it is asked for, and
    needs root.

    @raise SystemExit: the machine has no page reporting, or the setting
        cannot be changed (not root), said plainly.
    """
    try:
        before = parameter.read_text().strip()
    except OSError:
        raise SystemExit(f"--keep-host-memory: this machine reports no free memory to a host ({parameter} is missing)")
    # Each line is "Node N, zone NAME" (four words) and then one count per order.
    orders = max(len(line.split()) - 4 for line in buddyinfo.read_text().splitlines() if line.strip())
    above = str(orders)  # (orders run from 0 to orders - 1: no free block is this large)
    try:
        parameter.write_text(above + "\n")
    except OSError as error:
        raise SystemExit(f"--keep-host-memory: cannot set {parameter} ({error.strerror}; it needs root)")
    try:
        yield before, above
    finally:
        parameter.write_text(before + "\n")


def hostReportedMiB() -> float | None:
    """The MiB of free memory this VM handed back to its host so far (L{HOST_REPORTED}), or C{None} if it does not."""
    try:
        return int(HOST_REPORTED.read_text()) / 1024
    except (OSError, ValueError):
        return None


def reportedSince(before: float | None) -> float | None:
    """The MiB the VM handed back to its host since C{before} (L{hostReportedMiB}), or C{None}."""
    now = hostReportedMiB()
    return None if before is None or now is None else now - before


RAW_WRITE = 64 * KiB
MESSAGE = 1 * MiB
FOOLSCAP_WINDOW = 4
IDLE_PINGS = 2000


def parseSize(text: str) -> int:
    """C{"1G"} -> 1 GiB, C{"256M"} -> 256 MiB, or a plain number of bytes."""
    units = {"K": KiB, "M": MiB, "G": GiB}
    if text[-1:].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(text)


def memoryKiB(pid: int | str = "self") -> tuple[int, int]:
    """C{(VmRSS, VmHWM)} of process C{pid}, in KiB."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1])
    return values["VmRSS"], values["VmHWM"]


def schedSeconds(pid: int | str = "self") -> tuple[float, float]:
    """
    C{(on a CPU, runnable but waiting for one)} seconds of process C{pid}
    so far, its live threads summed (Linux's schedstat; zeros elsewhere).
    The wait is what other load on the machine cost it.
    """
    running = waiting = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                fields = stat.read().split()
            running += int(fields[0])
            waiting += int(fields[1])
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0
    return running / 1e9, waiting / 1e9


def _schedSince(before: tuple[float, float], seconds: float) -> dict[str, float]:
    """Where the C{seconds} since C{before} went: on a CPU, waiting for one (other load), and idle (waiting for I/O)."""
    running, waiting = (now - then for now, then in zip(schedSeconds(), before, strict=True))
    return {"run_s": running, "wait_s": waiting, "idle_s": max(0.0, seconds - running - waiting)}


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


# -- servers (run in their own process) ------------------------------------------------------------


def serve(case: str, size: int, directory: str | None = None) -> None:
    """Listen on an ephemeral loopback port, print one JSON line, serve until killed."""
    from twisted.internet import reactor

    if case == "foolscap":
        address = _serveFoolscap()
    elif case == "library":
        assert directory is not None
        address = _serveLibrary(reactor, directory)
    elif case.startswith("chunkwire"):
        address = _serveChunkwire(reactor)
    else:
        address = _serveTwisted(reactor, case, size)
    print(json.dumps({"address": address, "pid": os.getpid()}), flush=True)
    reactor.run()


def _serveTwisted(reactor: Any, case: str, size: int) -> str:
    from twisted.internet.protocol import Factory, Protocol
    from twisted.protocols.basic import Int32StringReceiver

    class Discard(Protocol):
        def connectionMade(self) -> None:
            self.count = 0
            if case == "raw-tuned":
                self.transport.bufferSize = 512 * KiB

        def dataReceived(self, data: bytes) -> None:
            self.count += len(data)
            if self.count >= size:
                self.transport.write(b"k")

    class Messages(Int32StringReceiver):
        MAX_LENGTH = 2 * MESSAGE

        def connectionMade(self) -> None:
            self.count = 0

        def stringReceived(self, string: bytes) -> None:
            self.count += len(string)
            if self.count >= size:
                self.sendString(b"k")

    factory = Factory.forProtocol(Messages if case == "int32" else Discard)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    return str(port.getHost().port)


def _serveChunkwire(reactor: Any) -> str:
    from protocols import bulk, rpc

    class Root(rpc.Referenceable):
        @rpc.remote
        # Any (what IncomingStream's hint is): a hint naming this function's
        # local import could not be resolved when the method is decorated.
        async def sink(self, stream: Any) -> list[Any]:
            # The receiver's own account of the transfer's time (see _schedSince).
            sched, started = schedSeconds(), time.perf_counter()
            result = await stream.receive(_discard)
            spent = _schedSince(sched, time.perf_counter() - started)
            return [result.hexdigest, spent["run_s"], spent["wait_s"], spent["idle_s"]]

        @rpc.remote
        def ping(self) -> int:
            return 1

    factory = rpc.serverFactory(Root(), options=rpc.ServerOptions(bulk=bulk.BulkOptions(), guard=None), clock=reactor)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    return str(port.getHost().port)


def _discard(data: bytes) -> None:
    pass


def cpuSplit() -> tuple[float, float, float]:
    """C{(user, system, runnable but waiting for a CPU)} seconds of this process so far, all its threads."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime, schedSeconds()[1]


def _since(before: tuple[float, float, float]) -> list[float]:
    return [now - then for now, then in zip(cpuSplit(), before, strict=True)]


def _serveLibrary(reactor: Any, directory: str) -> str:
    """The library case's server: C{put} receives a stream into a fresh file, C{get} sends one; each times itself."""
    from protocols import bulk, rpc

    class Files(rpc.Referenceable):
        def __init__(self) -> None:
            self.lastSent: list[float] = []
            self.received = ""

        @rpc.remote
        async def put(self, name: str, stream: Any) -> list[Any]:
            before = cpuSplit()
            target = os.path.join(directory, os.path.basename(name))
            result = await stream.receive(target)
            spent = _since(before)
            self.received = target
            return [result.hexdigest, result.algorithm, *spent]

        @rpc.remote
        def drop(self) -> None:
            # tmpfs is memory: the fetch that follows holds two copies of the file, as the floor does (see TMPFS).
            # Not in put: the floor's time does not include freeing the file it wrote either.
            os.unlink(self.received)

        @rpc.remote
        def get(self, path: str) -> Any:
            before = cpuSplit()
            stream = bulk.Stream(path)
            stream.whenDone().addCallback(lambda _: self.lastSent.__setitem__(slice(None), _since(before)))
            return stream

        @rpc.remote
        def sent(self) -> list[float]:
            return self.lastSent

    # As a user of the library serves: rpc.serve with the default bulk options (the steady allocator among them).
    listening: list[Any] = []
    serving = rpc.ServerOptions(bulk=bulk.BulkOptions())
    rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Files(), options=serving).addCallback(listening.append)
    if not listening:
        raise RuntimeError("rpc.serve did not listen at once on a TCP port")
    return str(listening[0].getHost().port)


_KEEP: list[Any] = []


def _serveFoolscap() -> str:
    import socket

    from foolscap.api import Referenceable, Tub  # type: ignore[import-untyped]

    class Sink(Referenceable):  # type: ignore[misc]
        def remote_sink(self, data: bytes) -> int:
            return len(data)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tub = Tub()
    tub.listenOn(f"tcp:{port}:interface=127.0.0.1")
    tub.setLocation(f"127.0.0.1:{port}")
    tub.startService()
    _KEEP.append(tub)
    furl: str = tub.registerReference(Sink(), "sink")
    return furl


# -- clients (run in their own process) --------------------------------------------------------------


def client(case: str, address: str, size: int, pings: bool) -> None:
    """Connect, move C{size} bytes, print one JSON line of results."""
    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    async def main(reactor: Any) -> None:
        if case == "foolscap":
            result = await _foolscap(address, size)
        elif case == "library":
            result = await _library(reactor, int(address), size)
        elif case.startswith("chunkwire"):
            result = await _chunkwire(reactor, case, int(address), size, pings)
        else:
            result = await _twistedClient(reactor, case, int(address), size)
        rss, hwm = memoryKiB()
        result.update(client_hwm_kib=hwm, client_end_rss_kib=rss)
        print(json.dumps(result), flush=True)

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))


async def _twistedClient(reactor: Any, case: str, port: int, size: int) -> dict[str, Any]:
    from twisted.internet.defer import Deferred
    from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
    from twisted.internet.interfaces import IPushProducer
    from twisted.internet.protocol import Protocol
    from twisted.protocols.basic import Int32StringReceiver
    from zope.interface import implementer

    done: Deferred[float] = Deferred()
    piece = os.urandom(MESSAGE if case == "int32" else RAW_WRITE)

    @implementer(IPushProducer)
    class Pusher:
        def __init__(self, protocol: Any, write: Any) -> None:
            self.protocol, self.write, self.left, self.paused = protocol, write, size, False

        def pauseProducing(self) -> None:
            self.paused = True

        def resumeProducing(self) -> None:
            self.paused = False
            while not self.paused and self.left > 0:
                self.write(piece)
                self.left -= len(piece)
            if self.left <= 0:
                self.protocol.transport.unregisterProducer()

        def stopProducing(self) -> None:
            self.left = 0

    class Raw(Protocol):
        def start(self) -> None:
            if case == "raw-tuned":
                self.transport.bufferSize, self.transport.SEND_LIMIT = 512 * KiB, 1 * MiB
            self.cpu = time.process_time()
            self.started = time.perf_counter()
            producer = Pusher(self, self.transport.write)
            self.transport.registerProducer(producer, True)
            producer.resumeProducing()

        def dataReceived(self, data: bytes) -> None:
            done.callback(time.perf_counter() - self.started)

    class Messages(Int32StringReceiver):
        MAX_LENGTH = 2 * MESSAGE

        def start(self) -> None:
            self.cpu = time.process_time()
            self.started = time.perf_counter()
            producer = Pusher(self, self.sendString)
            self.transport.registerProducer(producer, True)
            producer.resumeProducing()

        def stringReceived(self, string: bytes) -> None:
            done.callback(time.perf_counter() - self.started)

    protocol: Any = await connectProtocol(
        TCP4ClientEndpoint(reactor, "127.0.0.1", port), Messages() if case == "int32" else Raw()
    )
    idle, _ = memoryKiB()
    protocol.start()
    seconds = await done
    cpu = time.process_time() - protocol.cpu
    protocol.transport.loseConnection()
    return {"seconds": seconds, "client_idle_rss_kib": idle, "client_cpu_s": cpu}


async def _chunkwire(reactor: Any, case: str, port: int, size: int, pings: bool) -> dict[str, Any]:
    from protocols import bulk, rpc

    class Pattern(bulk.SeekableSource):
        """C{size} bytes made of one random megabyte repeated (as the raw case repeats its buffer)."""

        def __init__(self) -> None:
            self.size = size
            self.block = os.urandom(MiB)

        def read(self, offset: int, length: int) -> bytes:
            return self.block if length == len(self.block) else self.block[:length]

    root = await rpc.connect(
        reactor, f"tcp:host=127.0.0.1:port={port}", options=rpc.ClientOptions(bulk=bulk.BulkOptions())
    )
    idleRtts = [await _rtt(root) for _ in range(IDLE_PINGS if pings else 50)][200 if pings else 0 :]
    idle, _ = memoryKiB()
    digests = {"chunkwire-nodigest": None, "chunkwire-sha256": "sha256"}
    stream = bulk.Stream(Pattern(), digest=digests.get(case, bulk.NEGOTIATED))
    cpu = time.process_time()
    sched = schedSeconds()
    started = time.perf_counter()
    answer = root.callRemote("sink", stream)
    busy = []
    while pings and not answer.called:
        busy.append(await _rtt(root))
    digest, *server = await answer
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    client = _schedSince(sched, seconds)
    algorithm = stream.digestName
    await root.broker.disconnect()
    result: dict[str, Any] = {
        "seconds": seconds,
        "client_idle_rss_kib": idle,
        "digest": digest,
        "algorithm": algorithm,
        "client_cpu_s": cpu,
        **{f"client_{name}": value for name, value in client.items()},
        **{f"server_{name}": value for name, value in zip(("run_s", "wait_s", "idle_s"), server, strict=True)},
    }
    if pings:
        result.update(idle_p99_us=p99(idleRtts) * 1e6, busy_p99_us=p99(busy) * 1e6, busy_calls=len(busy))
    return result


async def _library(reactor: Any, port: int, size: int) -> dict[str, Any]:
    """
    The library case's client: send the tmpfs file as a L{Stream} to a fresh
    file at the server, then fetch it back into a fresh file here; each
    direction timed from the call to the verified end, each end's CPU split.
    """
    import tempfile

    from protocols import bulk, rpc

    source = str(cliSource(size))
    root = await rpc.connect(
        reactor, f"tcp:host=127.0.0.1:port={port}", options=rpc.ClientOptions(bulk=bulk.BulkOptions())
    )
    idle, _ = memoryKiB()
    ends: dict[str, Any] = {}
    freshMemory(size)
    reported, before, started = hostReportedMiB(), cpuSplit(), time.perf_counter()
    digest, algorithm, *server = await root.callRemote("put", "library.bin", bulk.Stream(source))
    seconds = time.perf_counter() - started
    ends["send"] = _ends(seconds, server, _since(before), size) | {"digest": digest}
    ends["send"]["host_reported_mib"] = reportedSince(reported)
    await root.callRemote("drop")
    handle, target = tempfile.mkstemp(dir=TMPFS, prefix="chunkwire-bench-fetched-")
    os.close(handle)
    os.unlink(target)
    try:
        freshMemory(size)
        reported, before, started = hostReportedMiB(), cpuSplit(), time.perf_counter()
        incoming = await root.callRemote("get", source)
        result = await incoming.receive(target)
        seconds = time.perf_counter() - started
        handedBack = reportedSince(reported)
        client = _since(before)
        server = await root.callRemote("sent")
    finally:
        if os.path.exists(target):
            os.unlink(target)
    ends["fetch"] = _ends(seconds, server, client, size) | {"digest": result.hexdigest, "host_reported_mib": handedBack}
    await root.broker.disconnect()
    if ends["send"]["digest"] != ends["fetch"]["digest"]:
        raise RuntimeError("the library case fetched back another digest than it sent")
    send = ends["send"]
    return {
        "seconds": send["seconds"],
        "algorithm": algorithm,
        "client_idle_rss_kib": idle,
        "client_cpu_s": send["client"]["user_s"] + send["client"]["system_s"],
        "server_cpu_s": send["server"]["user_s"] + send["server"]["system_s"],
        "fetch": ends["fetch"],
        "send": send,
    }


def _ends(seconds: float, server: list[float], client: list[float], size: int) -> dict[str, Any]:
    """
    One transfer's figures: its time and rate, and where each end's time
    went (user, system, runnable but waiting for a CPU; and C{wait_s}: all
    the time it was not running, waiting for its peer, the socket or a CPU).
    """

    def end(user: float, system: float, runqueue: float) -> dict[str, float]:
        return {
            "user_s": user,
            "system_s": system,
            "runqueue_s": runqueue,
            "wait_s": max(0.0, seconds - user - system),
        }

    return {"seconds": seconds, "mb_s": size / seconds / 1e6, "server": end(*server), "client": end(*client)}


async def _rtt(root: Any) -> float:
    started = time.perf_counter()
    await root.callRemote("ping")
    return time.perf_counter() - started


async def _foolscap(furl: str, size: int) -> dict[str, Any]:
    from foolscap.api import Tub
    from twisted.internet.defer import Deferred

    tub = Tub()
    tub.startService()
    reference = await tub.getReference(furl)
    idle, _ = memoryKiB()
    piece = os.urandom(MESSAGE)
    done: Deferred[float] = Deferred()
    state = {"sent": 0, "answered": 0, "total": -(-size // MESSAGE)}
    cpu = time.process_time()
    started = time.perf_counter()

    def send() -> None:
        state["sent"] += 1
        reference.callRemote("sink", piece).addCallbacks(answered, done.errback)

    def answered(_: object) -> None:
        state["answered"] += 1
        if state["answered"] == state["total"]:
            done.callback(time.perf_counter() - started)
        elif state["sent"] < state["total"]:
            send()

    for _ in range(min(FOOLSCAP_WINDOW, state["total"])):
        send()
    seconds = await done
    cpu = time.process_time() - cpu
    await tub.stopService()
    return {"seconds": seconds, "client_idle_rss_kib": idle, "client_cpu_s": cpu}


def blockingClient(port: int, direction: str, path: str) -> None:
    """
    The C{upload} case's client, without Twisted: the blocking client's
    C{upload(path)} (C{send}) or C{download(name, path)} (C{fetch}) of the
    file service, timed from the call to its return, its CPU split; one JSON line.
    """
    from protocols.blockingbulk import connect

    with connect(("127.0.0.1", port)) as connection:
        idle, _ = memoryKiB()
        before, started = cpuSplit(), time.perf_counter()
        if direction == "send":
            result = connection.upload(path)
        else:
            result = connection.download(os.path.basename(path), path)
        seconds = time.perf_counter() - started
        cpu = _since(before)
    print(
        json.dumps(
            {"seconds": seconds, "cpu": cpu, "algorithm": result.algorithm, "digest": result.hexdigest}
            | {"idle_rss_kib": idle}
        ),
        flush=True,
    )


# -- the orchestrator --------------------------------------------------------------------------------


BENCH = [sys.executable, "-m", "tests.benchmarks.bench_bulk"]


PYCACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "chunkwire-bench-pycache"
"""
Where the processes of the benchmark keep their bytecode: outside the tree,
written by the first process that imports a module (the CLI's C{list} and
the first case warm it), as an installed package has its C{.pyc} files.
With C{PYTHONDONTWRITEBYTECODE} (set in some development shells) every
process would compile the project's modules again: a second and more per
command under load, which no user of an installed chunkwire pays.
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def cpuSeconds(pid: int) -> float:
    """User + system CPU seconds of process C{pid} so far, all its threads."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpuOf(pid: int) -> tuple[float, float, float]:
    """C{(user, system, runnable but waiting for a CPU)} seconds of process C{pid} so far (its live threads)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick, schedSeconds(pid)[1]


def _runClient(command: list[str], timeout: float) -> tuple[str, tuple[float, float], int]:
    """Run a client process to its end: stdout, its (user, system) CPU seconds and peak RSS (KiB), from wait4."""
    process = subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    deadline = time.monotonic() + timeout
    with process.stdout, process.stderr:
        out = process.stdout.read()
        err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or time.monotonic() > deadline:
        raise RuntimeError(f"client {command[2:4]} failed ({process.returncode}): {err.strip()[-500:]}")
    return out, (usage.ru_utime, usage.ru_stime), usage.ru_maxrss


def runCase(case: str, size: int, pings: bool, timeout: float) -> dict[str, Any]:
    """One transfer: a fresh server process, a fresh client process; their results, memory and CPU."""
    import shutil
    import tempfile

    if case in CLI_CASES or case == "upload":
        return runCli(case, size, timeout)
    if case == "floor":
        raise ValueError("the floor is measured by runFloor")
    module = [sys.executable, "-m", "tests.benchmarks.bench_bulk"]
    served = Path(tempfile.mkdtemp(prefix="chunkwire-bench-served-", dir=TMPFS)) if case == "library" else None
    serving = ["--dir", str(served)] if served is not None else []
    serving = [*module, "--serve", case, "--size", str(size), *serving]
    server = subprocess.Popen(serving, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        ready = json.loads(server.stdout.readline())
        time.sleep(0.2)
        serverIdle, _ = memoryKiB(server.pid)
        serverCpu = cpuSeconds(server.pid)
        command = module + ["--client", case, "--address", ready["address"], "--size", str(size)]
        out, clientCpu, _ = _runClient(command + (["--pings"] if pings else []), timeout)
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        _, serverPeak = memoryKiB(server.pid)
        serverCpu = cpuSeconds(server.pid) - serverCpu
    finally:
        server.terminate()
        server.wait(timeout=10)
        if served is not None:
            shutil.rmtree(served, ignore_errors=True)
    result.update(case=case, size=size, mb_s=size / result["seconds"] / 1e6)
    result.update(server_idle_rss_kib=serverIdle, server_hwm_kib=serverPeak)
    # The client's own figure covers the transfer alone (its start-up and connecting excluded), as the server's does.
    result.setdefault("client_cpu_s", sum(clientCpu))
    result.setdefault("server_cpu_s", serverCpu)
    return result


def _listeningPort(out: Any) -> str:
    """
    The port the example server says it listens on, read from its output
    (its log lines come first), whose rest is then drained in a thread so
    that a full pipe never stops the server.
    """
    import re
    import threading

    seen = []
    for line in out:
        seen.append(line)
        found = re.search(r"listening on .*port=(\d+)\)", line)
        if found is not None:
            threading.Thread(target=out.read, daemon=True).start()
            return found.group(1)
    raise RuntimeError(f"the example server did not say where it listens: {''.join(seen)[-500:]}")


def cliSource(size: int) -> Path:
    """The file the CLI cases send, in tmpfs: made once (L{randomFile})."""
    path = TMPFS / f"chunkwire-bench-{size}.bin"
    if not path.exists() or path.stat().st_size != size:
        randomFile(path, size)
    return path


def randomFile(path: Path, size: int) -> Path:
    """Write C{size} bytes that do not compress to C{path}: one random MiB, rotated per MiB (as the demo does)."""
    block = os.urandom(MiB)
    with open(path, "wb") as file:
        for index in range(-(-size // MiB)):
            shift = (index * 40503) % MiB
            file.write((block[shift:] + block[:shift])[: size - index * MiB])
    return path


def runCli(case: str, size: int, timeout: float) -> dict[str, Any]:
    """
    The example server and client as a user runs them: a file from tmpfs
    sent into a served directory in tmpfs, then fetched back into a fresh
    tmpfs file, with the same server.  The send's figures at the top level
    (as the other cases), both directions' under C{"send"} and C{"fetch"}.
    """
    import re
    import shutil
    import tempfile

    source = cliSource(size)
    served = Path(tempfile.mkdtemp(prefix="chunkwire-bench-served-", dir=TMPFS))
    fetched = Path(tempfile.mkdtemp(prefix="chunkwire-bench-fetched-", dir=TMPFS))
    hashing = {"cli-thread": ["--hashing", "thread"], "cli-inline": ["--hashing", "inline"]}.get(case, [])
    listen = ["--listen", "tcp:0:interface=127.0.0.1", "--dir", str(served), *hashing]
    server = subprocess.Popen(
        [sys.executable, "examples/bulk_server.py", *listen], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True
    )
    directions: dict[str, Any] = {}
    try:
        assert server.stdout is not None
        port = _listeningPort(server.stdout)
        time.sleep(0.2)
        serverIdle, _ = memoryKiB(server.pid)
        if case == "upload":
            client = [*BENCH, "--client", "upload", "--address", port, "--size", str(size)]
            commands = {
                "send": ["--direction", "send", "--dir", str(source)],
                "fetch": ["--direction", "fetch", "--dir", str(fetched / source.name)],
            }
            clientIdle = 0
        else:
            client = [sys.executable, "examples/bulk_client.py", "--connect", f"tcp:host=127.0.0.1:port={port}"]
            # A listing costs the client's start-up and a connection: subtracted from each transfer's CPU.
            _, startup, clientIdle = _runClient(client + ["list"], timeout)
            forced = ["--digest", "sha256"] if case == "cli-sha256" else []
            commands = {
                "send": [*hashing, *forced, "send", str(source)],
                "fetch": [*hashing, *forced, "fetch", source.name, "--output", str(fetched / source.name)],
            }
        for direction, command in commands.items():
            freshMemory(size)
            before, reported = cpuOf(server.pid), hostReportedMiB()
            launched = time.monotonic()
            out, clientCpu, clientPeak = _runClient(client + command, timeout)
            # As a user times a command: from its start to its exit.
            commandSeconds = time.monotonic() - launched
            handedBack = reportedSince(reported)
            serverCpu = [now - then for now, then in zip(cpuOf(server.pid), before, strict=True)]
            last = out.strip().splitlines()[-1]
            if case == "upload":
                own = json.loads(last)
                ends = _ends(own["seconds"], serverCpu, own["cpu"], size)
                clientIdle = max(clientIdle, own["idle_rss_kib"])
                directions[direction] = ends | {"algorithm": own["algorithm"], "digest": own["digest"]}
                directions[direction] |= {"peak": clientPeak, "command_seconds": commandSeconds}
                directions[direction]["host_reported_mib"] = handedBack
                continue
            timed = re.search(r" in ([\d.]+) s, .*, (\S+) ([0-9a-f]{64}) verified", last)
            assert timed is not None, last
            user, system = (max(0.0, spent - start) for spent, start in zip(clientCpu, startup, strict=True))
            ends = _ends(commandSeconds, serverCpu, [user, system, 0.0], size)
            directions[direction] = ends | {"algorithm": timed.group(2), "digest": timed.group(3), "peak": clientPeak}
            directions[direction]["transfer_seconds"] = float(timed.group(1))
            directions[direction]["host_reported_mib"] = handedBack
            if direction == "send":
                # The served copy is the source byte for byte (verified): the source becomes another name of
                # it, so that the fetch holds two copies of the file in tmpfs, as the floor does (see TMPFS).
                link = source.with_name(source.name + ".link")
                os.link(served / source.name, link)
                os.replace(link, source)
        _, serverPeak = memoryKiB(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(served, ignore_errors=True)
        shutil.rmtree(fetched, ignore_errors=True)
    send = directions["send"]
    if send["digest"] != directions["fetch"]["digest"]:
        raise RuntimeError(f"{case}: the file fetched back has another digest than the one sent")
    return {
        "case": case,
        "size": size,
        "seconds": send["seconds"],
        "mb_s": send["mb_s"],
        "algorithm": send["algorithm"],
        "client_idle_rss_kib": clientIdle,
        "client_hwm_kib": max(d["peak"] for d in directions.values()),
        "server_idle_rss_kib": serverIdle,
        "server_hwm_kib": serverPeak,
        "client_cpu_s": send["client"]["user_s"] + send["client"]["system_s"],
        "server_cpu_s": send["server"]["user_s"] + send["server"]["system_s"],
        **directions,
    }


def runFloor(size: int, digest: str, timeout: float, twisted: bool = False) -> dict[str, Any]:
    """
    The floor under the file cases, measured beside them: the framing-free
    two-process copy (C{tests/benchmarks/_floorcopy.py}) of the same tmpfs
    file into a fresh tmpfs file, hashed with C{digest} at both ends, in both
    directions: C{send} (the connecting end sends, as the client uploads)
    and C{fetch} (the listening end sends); then, if C{twisted}, the same
    copy with its listening end in a Twisted reactor (C{"twisted"}: see
    L{TWISTED_FLOOR}).
    """
    result: dict[str, Any] = {"digest": digest}
    for direction in DIRECTIONS:
        result[direction] = _floorCopy(size, digest, direction, False, timeout)
    if twisted:
        result["twisted"] = {direction: _floorCopy(size, digest, direction, True, timeout) for direction in DIRECTIONS}
    return result


def _floorCopy(size: int, digest: str, direction: str, twisted: bool, timeout: float) -> dict[str, Any]:
    """One floor copy of the CLI's source file in C{direction}, its listening end on Twisted if C{twisted}."""
    import tempfile

    source = str(cliSource(size))
    module = [sys.executable, "-m", "tests.benchmarks._floorcopy"]
    handle, target = tempfile.mkstemp(dir=TMPFS, prefix="chunkwire-floor-")
    os.close(handle)
    os.unlink(target)  # the receiver makes it afresh
    sender = "connect" if direction == "send" else "listen"
    roles = {"listen": "receive", "connect": "receive", sender: "send"}
    files = {"send": source, "receive": target}
    listener = [*module, "listen", roles["listen"], "--file", files[roles["listen"]], "--digest", digest]
    listener += ["--twisted"] if twisted else []
    freshMemory(size)
    reported = hostReportedMiB()
    server = subprocess.Popen(listener, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = json.loads(server.stdout.readline())["port"]
        connecting = [*module, "connect", roles["connect"], "--file", files[roles["connect"]], "--digest", digest]
        launched = time.monotonic()  # the same clock as the ends' (CLOCK_MONOTONIC)
        out, _, _ = _runClient([*connecting, "--port", str(port)], timeout)
        exited = time.monotonic()
        serverOut, _ = server.communicate(timeout=timeout)
        handedBack = reportedSince(reported)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if os.path.exists(target):
            os.unlink(target)
    lines = {"server": serverOut, "client": out}
    ends = {side: json.loads(text.strip().splitlines()[-1]) for side, text in lines.items()}
    if {end["digest"] for end in ends.values()} != {ends["server"]["digest"]} or ends["client"]["bytes"] != size:
        raise RuntimeError(f"the floor's copy ({direction}) lost bytes or changed them: {ends}")
    seconds = max(e["ended"] for e in ends.values()) - min(e["started"] for e in ends.values())
    cpu = {side: [e["user_s"], e["system_s"], e["runqueue_s"]] for side, e in ends.items()}
    copy = _ends(seconds, cpu["server"], cpu["client"], size) | {"digest": ends["client"]["digest"]}
    # The copy as a CLI command is timed as one is: from the connecting process's launch to its exit (its
    # start-up and its exit included), or to the listening end's last loop if that ends later.
    commandSeconds = max(exited, *(e["ended"] for e in ends.values())) - launched
    copy |= {"command_seconds": commandSeconds, "command_mb_s": size / commandSeconds / 1e6}
    copy["host_reported_mib"] = handedBack
    return copy


def floorDigests(cases: list[str]) -> list[str]:
    """The digests the floor is measured with: the one the file cases negotiate, and SHA-256 if one forces it."""
    from .cpu_floor import digests

    wanted = [digests()[-1]]
    if "cli-sha256" in cases and "sha256" not in wanted:
        wanted.append("sha256")
    return wanted


def floorRates(floor: dict[str, Any]) -> str:
    """A run's line for one floor (L{runFloor}): each direction's MB/s, on Twisted too if measured, what went back."""
    rates = ", ".join(f"{d} {floor[d]['mb_s']:.0f} MB/s" for d in DIRECTIONS)
    if "twisted" in floor:
        rates += ", on Twisted " + ", ".join(f"{d} {floor['twisted'][d]['mb_s']:.0f}" for d in DIRECTIONS)
    return rates + handedBack(floor)


def handedBack(result: dict[str, Any]) -> str:
    """What a run's line says of the memory the VM handed back to its host during each direction, if it does."""
    amounts = [result[d].get("host_reported_mib") for d in DIRECTIONS if isinstance(result.get(d), dict)]
    if not any(amount is not None for amount in amounts):
        return ""
    return " (memory handed back to the host meanwhile: " + ", ".join(f"{a or 0:.0f}" for a in amounts) + " MiB)"


def runAll(args: argparse.Namespace) -> dict[str, Any]:
    size = parseSize(args.size)
    timeout = 60 + size / (50 * MiB)
    cases = list(args.cases)
    raw: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    pinged: dict[str, list[dict[str, Any]]] = {case: [] for case in PING_CASES if case in cases}
    shaFloors: list[dict[str, Any]] = []
    for run in range(args.runs):
        for case in cases:
            if case == "floor":
                byDigest = {d: runFloor(size, d, timeout, args.twisted_floor) for d in floorDigests(cases)}
                raw[case].append(byDigest)
                for digest, floor in byDigest.items():
                    print(f"run {run + 1}: floor ({digest}) {floorRates(floor)}", file=sys.stderr, flush=True)
                continue
            paired = runFloor(size, caseDigest(case), timeout, args.twisted_floor) if case in FILE_CASES else None
            if paired is not None:
                line = f"run {run + 1}: floor ({paired['digest']}) before {case}: {floorRates(paired)}"
                print(line, file=sys.stderr, flush=True)
            last = runCase(case, size, False, timeout) | ({"floor": paired} if paired is not None else {})
            raw[case].append(last)
            fetch = f", fetch {last['fetch']['mb_s']:.0f} MB/s" if "fetch" in last else ""
            line = f"run {run + 1}: {case} {last['mb_s']:.0f} MB/s{fetch}{handedBack(last)}"
            print(line, file=sys.stderr, flush=True)
        if "chunkwire-sha256" in cases:
            shaFloors.append(sha256Floor(size))
            print(
                f"run {run + 1}: SHA-256 limit {shaFloors[-1]['mb_s']:.0f} MB/s,"
                f" blocking loops {shaFloors[-1]['pipe']['mb_s']:.0f} MB/s",
                file=sys.stderr,
                flush=True,
            )
    for run in range(args.runs):
        for case in pinged:
            pinged[case].append(runCase(case, size, True, timeout))
            last = pinged[case][-1]
            print(
                f"run {run + 1}: {case} with calls: p99 {last['idle_p99_us']:.0f} us idle,"
                f" {last['busy_p99_us']:.0f} us busy",
                file=sys.stderr,
                flush=True,
            )
    if set(cases) & {*FILE_CASES, "floor"}:
        cliSource(size).unlink()  # a GiB of tmpfs is memory: not kept between runs of the benchmark
    floors = raw.pop("floor", [])
    summary = summarise(raw, pinged, size, args)
    summary["config"]["sha256_mb_s_one_core"] = sha256Rate()
    if shaFloors:
        forced = raw["chunkwire-sha256"]
        summary["sha256_floor"] = {
            "mb_s": statistics.median(f["mb_s"] for f in shaFloors),
            "cpu_s_per_gib": statistics.median(f["floor"] for f in shaFloors),
            # Each run's chunkwire-sha256 rate against the limit measured in the same run, then the median.
            "chunkwire_vs_floor": statistics.median(
                r["mb_s"] / f["mb_s"] for r, f in zip(forced, shaFloors, strict=True)
            ),
            "pipe_mb_s": statistics.median(f["pipe"]["mb_s"] for f in shaFloors),
            "pipe_vs_floor": statistics.median(f["pipe"]["mb_s"] / f["mb_s"] for f in shaFloors),
            "chunkwire_vs_pipe": statistics.median(
                r["mb_s"] / f["pipe"]["mb_s"] for r, f in zip(forced, shaFloors, strict=True)
            ),
            "runs": shaFloors,
        }
    if floors or any(run.get("floor") for case in FILE_CASES for run in raw.get(case, [])):
        summary["floor"] = againstFloor(raw, floors, size)
    return summary


def _perGiB(transfers: list[dict[str, Any]], size: int) -> dict[str, float]:
    """Each end's user, system and waiting seconds per GiB (medians over the runs), and the median MB/s."""
    figures = {"mb_s": statistics.median(t["mb_s"] for t in transfers)}
    for side in ("server", "client"):
        for kind in ("user_s", "system_s", "wait_s", "runqueue_s"):
            figures[f"{side}_{kind}"] = statistics.median(t[side][kind] for t in transfers) * GiB / size
    return figures


def caseDigest(case: str) -> str:
    """The digest file case C{case} moves its file with (the one both ends negotiate, or SHA-256 when forced)."""
    return "sha256" if case == "cli-sha256" else floorDigests([])[0]


def againstFloor(raw: dict[str, list[dict[str, Any]]], floors: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """
    The bulk criterion: each file case's rate in each direction against the
    framing-free copy with the same digest measured just before it (its
    run's C{"floor"}: see the module docstring), else against the floor of
    its run (C{floors}: one per run, when C{floor} is a case of its own);
    each run's ratio, then the median (C{"ratio"}); and, where the floors
    carry the copy on Twisted (L{runFloor}), against that too
    (C{"ratio_twisted"}).  Beside it, not checked, the median of the
    case's rates over the median of every floor of the set with its digest
    (C{"ratio_pooled"}): one floor beside each run moves by 10-20 % from
    the next, which the median of five such ratios carries; this reads
    the same figure against all of them (fifteen at C{--criterion}).  Where
    each end's time went, the floors' rows (every floor measured, by
    digest; the copy on Twisted as L{TWISTED_FLOOR}, its ratio the median
    of its own to the blocking copy measured with it) beside them.
    """
    pooled: dict[str, list[dict[str, Any]]] = {}
    for perRun in floors:
        for digest, floor in perRun.items():
            pooled.setdefault(digest, []).append(floor)
    for case in FILE_CASES:
        for run in raw.get(case, []):
            if run.get("floor"):
                pooled.setdefault(run["floor"]["digest"], []).append(run["floor"])
    rows: list[dict[str, Any]] = []
    for digest, measured in pooled.items():
        onTwisted = [floor for floor in measured if floor.get("twisted")]
        for direction in DIRECTIONS:
            row = {"case": "floor", "direction": direction, "digest": digest, "ratio": 1.0, "floors": len(measured)}
            rows.append(row | _perGiB([f[direction] for f in measured], size))
            if onTwisted:
                copies = [floor["twisted"][direction] for floor in onTwisted]
                ratio = _medianRatio(copies, [floor[direction] for floor in onTwisted], "mb_s")
                row = {"case": TWISTED_FLOOR, "direction": direction, "digest": digest, "ratio": ratio}
                rows.append(row | {"floors": len(onTwisted)} | _perGiB(copies, size))
    for case in FILE_CASES:
        runs = raw.get(case)
        if not runs:
            continue
        digest = runs[-1]["algorithm"]
        if digest not in pooled:
            continue  # negotiated a digest the floor was not measured with
        # A CLI command is timed from its start to its exit, against the floor timed from its connecting
        # process's launch; the library's calls from the call to its end, against the floor's loops.
        rate = "command_mb_s" if case in CLI_CASES else "mb_s"
        against = [run.get("floor") or floors[index][digest] for index, run in enumerate(runs)]
        for direction in DIRECTIONS:
            transfers = [run[direction] for run in runs]
            ratio = _medianRatio(transfers, [floor[direction] for floor in against], rate)
            row = {"case": case, "direction": direction, "digest": digest, "ratio": ratio}
            every = [floor[direction] for floor in pooled[digest]]
            row["ratio_pooled"] = statistics.median(t["mb_s"] for t in transfers) / statistics.median(
                floor.get(rate, floor["mb_s"]) for floor in every
            )
            if all(floor.get("twisted") for floor in against):
                copies = [floor["twisted"][direction] for floor in against]
                row["ratio_twisted"] = _medianRatio(transfers, copies, rate)
            rows.append(row | _perGiB(transfers, size))
    return {"rows": rows, "runs": floors}


def _medianRatio(transfers: list[dict[str, Any]], floors: list[dict[str, Any]], rate: str) -> float:
    """The median of each transfer's MB/s over its own floor's C{rate} (C{"mb_s"} where a floor has no C{rate})."""
    return statistics.median(
        transfer["mb_s"] / floor.get(rate, floor["mb_s"]) for transfer, floor in zip(transfers, floors, strict=True)
    )


def sha256Floor(size: int) -> dict[str, Any]:
    """
    C{cpu_floor}'s limit for a SHA-256-checked transfer of C{size} bytes
    (CPU-s per GiB and MB/s on this machine's cores), and the blocking-loop
    copy in two processes beside it (C{pipe}), measured now.
    """
    from .cpu_floor import digestFloor, pipeRate

    floor: dict[str, Any] = dict(digestFloor(size, "sha256"))
    floor["pipe"] = pipeRate(size, "sha256")
    return floor


def sha256Rate() -> float:
    """hashlib's SHA-256 speed on one core here, in MB/s: what the default integrity check costs."""
    import hashlib

    block = os.urandom(MiB)
    digest = hashlib.sha256()
    started = time.perf_counter()
    for _ in range(256):
        digest.update(block)
    return 256 * MiB / (time.perf_counter() - started) / 1e6


def summarise(
    raw: dict[str, list[dict[str, Any]]], pinged: dict[str, list[dict[str, Any]]], size: int, args: argparse.Namespace
) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    ceiling = raw["raw"]
    for case, runs in raw.items():
        rates = [r["mb_s"] for r in runs]
        cases[case] = {
            "label": LABELS[case],
            "mb_s": statistics.median(rates),
            "mb_s_min": min(rates),
            "mb_s_max": max(rates),
            # Each run's ratio to the raw producer of the same run, then the median.
            "vs_raw": statistics.median(r["mb_s"] / c["mb_s"] for r, c in zip(runs, ceiling, strict=True)),
            "server_peak_mib": max(r["server_hwm_kib"] for r in runs) / KiB,
            "client_peak_mib": max(r["client_hwm_kib"] for r in runs) / KiB,
            "server_above_idle_mib": max(r["server_hwm_kib"] - r["server_idle_rss_kib"] for r in runs) / KiB,
            "client_above_idle_mib": max(r["client_hwm_kib"] - r["client_idle_rss_kib"] for r in runs) / KiB,
            "server_cpu_s_per_gib": statistics.median(r["server_cpu_s"] for r in runs) * GiB / size,
            "client_cpu_s_per_gib": statistics.median(r["client_cpu_s"] for r in runs) * GiB / size,
            "algorithm": runs[-1].get("algorithm"),
        }
        if "server_wait_s" in runs[0]:
            cases[case]["time_s_per_gib"] = {
                f"{side}_{kind}": statistics.median(r[f"{side}_{kind}_s"] for r in runs) * GiB / size
                for side in ("server", "client")
                for kind in ("run", "wait", "idle")
            }
    calls: dict[str, Any] = {}
    for case, runs in pinged.items():
        calls[case] = {
            "idle_p99_us": statistics.median(r["idle_p99_us"] for r in runs),
            "busy_p99_us": statistics.median(r["busy_p99_us"] for r in runs),
            "ratio": statistics.median(r["busy_p99_us"] / r["idle_p99_us"] for r in runs),
            "calls_during": statistics.median(r["busy_calls"] for r in runs),
            "mb_s": statistics.median(r["mb_s"] for r in runs),
        }
    return {
        "benchmark": "bulk transfer over loopback TCP",
        "config": {
            "size": size,
            "runs": args.runs,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "criterion": bool(getattr(args, "criterion", False)),
        },
        "cases": cases,
        "calls": calls,
        "runs": {"transfer": raw, "with_calls": pinged},
    }


def criteria(summary: dict[str, Any]) -> list[tuple[str, float, str, float]]:
    """
    The acceptance checks: (label, value, op, threshold).  With
    C{--criterion}, exactly issue 31's: each file case against the floor in
    each direction, the small-call p99 during a transfer against idle, and
    each server's peak RSS above idle (the raw producer is a reference line,
    not a check, and the clients' RSS is shown in the table only).
    """
    cases, calls = summary["cases"], summary["calls"]
    size = summary["config"]["size"]
    only = bool(summary["config"].get("criterion"))
    tag = f"{size / GiB:g} GiB" if size >= GiB else f"{size / MiB:g} MiB"
    checks = []
    for case, label in (("chunkwire", "negotiated digest"), ("chunkwire-nodigest", "digest=None")):
        if case in cases and not only:
            checks.append((f"bulk: chunkwire ({label}) MB/s / raw Twisted producer", cases[case]["vs_raw"], ">=", 0.85))
    # The file cases are set against the framing-free copy of their own run (the raw producer reads no file).
    for row in summary.get("floor", {}).get("rows", []):
        target = FLOOR_TARGETS.get(row["case"])
        if isinstance(target, dict):
            target = target.get(row["direction"])
        if target is not None:
            label = f"bulk: {row['case']} {row['direction']} ({row['digest']}) MB/s / framing-free copy MB/s ({tag})"
            checks.append((label, row["ratio"], ">=", target))
    for case in ("chunkwire", "chunkwire-nodigest", "cli", "cli-sha256", "library", "upload"):
        if case not in cases:
            continue
        for side in ("server",) if only else ("server", "client"):
            value = cases[case][f"{side}_above_idle_mib"]
            checks.append((f"bulk: {case} {side} peak RSS above idle, MiB ({tag})", value, "<=", 64.0))
    for case in calls:
        if case == "chunkwire-sha256":
            continue  # measured to be shown (the p99 line is about the default check)
        checks.append((f"bulk: {case} small-call p99 during transfer / idle p99", calls[case]["ratio"], "<=", 10.0))
    floor = summary.get("sha256_floor")
    if floor is not None:
        label = "bulk: chunkwire (SHA-256 forced) MB/s / cpu_floor's SHA-256 limit"
        checks.append((label, floor["chunkwire_vs_floor"], ">=", 0.9))
    return checks


def keptLine(config: dict[str, Any]) -> str:
    """What the first line says of the host's memory: held off for the run (C{--keep-host-memory}), or nothing."""
    kept = config.get("host_memory_kept")
    if not kept:
        return ""
    return (
        "  This VM's free page reporting was held off for the run (order"
        f" {kept['order_before']} set to {kept['order_held']}, put back after: `--keep-host-memory`)."
    )


def table(summary: dict[str, Any]) -> str:
    """The results as Markdown tables, with the acceptance verdicts under them."""
    config = summary["config"]
    lines = [
        f"Bulk transfer of {config['size']:,} bytes over loopback TCP, client and server in separate fresh"
        f" processes; {median_of(config['runs'])} (ratio: median of each run's ratio to the raw producer);"
        f" load average at the end {config['load_average'][0]:.1f} on {config['cpus']} CPUs.  MB = 10^6 bytes."
        + keptLine(config),
        "",
        f"hashlib SHA-256 here: {config.get('sha256_mb_s_one_core', 0):,.0f} MB/s on one core; with the default"
        " check both ends hash every byte, so at the raw producer's rate the two digests alone would need"
        f" {2 * summary['cases']['raw']['mb_s'] / max(config.get('sha256_mb_s_one_core', 1), 1):.1f} cores.",
        "",
        "| case | MB/s median [min–max] | vs raw | CPU-s/GiB server + client | server peak MiB (above idle)"
        " | client peak MiB (above idle) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in summary["cases"].values():
        label = row["label"] + (f" [{row['algorithm']}]" if row.get("algorithm") else "")
        cpu = f"{row['server_cpu_s_per_gib']:.2f} + {row['client_cpu_s_per_gib']:.2f}"
        lines.append(
            f"| {label} | {row['mb_s']:,.0f} [{row['mb_s_min']:,.0f}–{row['mb_s_max']:,.0f}]"
            f" | {row['vs_raw']:.2f}x | {cpu} | {row['server_peak_mib']:.1f} ({row['server_above_idle_mib']:+.1f})"
            f" | {row['client_peak_mib']:.1f} ({row['client_above_idle_mib']:+.1f}) |"
        )
    floor = summary.get("floor")
    if floor is not None:
        onTwisted = any(row["case"] == TWISTED_FLOOR for row in floor["rows"])
        lines += [
            "",
            "The bulk criterion: each file case against the framing-free copy (`floor`: two processes, one blocking"
            " loop each; the sender `readinto`s 1 MiB, hashes it in place and `sendall`s it, the receiver"
            " `recv_into`s 1 MiB, hashes it and `write`s it to a fresh tmpfs file) measured just before each case"
            " with the same digest (the floor rows: all of them); send: the client uploads, fetch: it downloads."
            "  Ratio: median of each run's (the check); `/ all floors`: the case's median MB/s over the median of"
            " every floor with its digest (not a check: the same figure read against all the floors, where one"
            " floor moves by 10-20 % from the next).  Each end's time in seconds per GiB: user / system / waiting"
            " (not running: for its peer, the socket, or a CPU; of which runnable but without a CPU, where"
            " schedstat tells, in brackets)."
            + (
                "  `floor on Twisted`: the same copy with its listening end in Twisted's reactor, set up as"
                " chunkwire's servers are, with no framing (its ratio is to the blocking copy measured with it);"
                " `/ on Twisted`: each case against it (not a check)."
                if onTwisted
                else ""
            ),
            "",
            "| case | direction | digest | MB/s | / floor | / all floors"
            + (" | / on Twisted" if onTwisted else "")
            + " | server user / sys / waiting | client user / sys / waiting |",
            "|---|---|---|---:|---:|---:|" + ("---:|" if onTwisted else "") + "---:|---:|",
        ]
        for row in floor["rows"]:
            sides = [
                f"{row[f'{side}_user_s']:.2f} / {row[f'{side}_system_s']:.2f} / {row[f'{side}_wait_s']:.2f}"
                + (f" ({row[f'{side}_runqueue_s']:.2f})" if row[f"{side}_runqueue_s"] else "")
                for side in ("server", "client")
            ]
            if onTwisted:
                sides.insert(0, f"{row['ratio_twisted']:.2f}x" if "ratio_twisted" in row else "—")
            pooledRatio = f"{row['ratio_pooled']:.2f}x" if "ratio_pooled" in row else "—"
            lines.append(
                f"| {row['case']} | {row['direction']} | {row['digest']} | {row['mb_s']:,.0f} | {row['ratio']:.2f}x"
                f" | {pooledRatio} | " + " | ".join(sides) + " |"
            )
    timed = {case: row["time_s_per_gib"] for case, row in summary["cases"].items() if "time_s_per_gib" in row}
    if timed:
        lines += [
            "",
            "Where each end's time went during the transfer, seconds per GiB (schedstat): on a CPU, runnable but"
            " waiting for one (other load on the machine), idle (waiting for the peer or the socket).",
            "",
            "| case | server run / wait / idle | client run / wait / idle |",
            "|---|---:|---:|",
        ]
        for case, spent in timed.items():
            sides = [
                " / ".join(f"{spent[f'{side}_{kind}']:.2f}" for kind in ("run", "wait", "idle"))
                for side in ("server", "client")
            ]
            lines.append(f"| {LABELS[case]} | {sides[0]} | {sides[1]} |")
    sha = summary.get("sha256_floor")
    if sha is not None:
        lines += [
            "",
            f"SHA-256 forced against `cpu_floor`'s limit for SHA-256 ({sha['cpu_s_per_gib']:.2f} CPU-s/GiB both ends,"
            f" so at most {sha['mb_s']:,.0f} MB/s on {config['cpus']} cores): chunkwire reaches"
            f" {sha['chunkwire_vs_floor']:.2f} of it; blocking loops in two processes hashing at both ends (no"
            f" framing) {sha['pipe_mb_s']:,.0f} MB/s, {sha['pipe_vs_floor']:.2f} of it, and chunkwire"
            f" {sha['chunkwire_vs_pipe']:.2f} of those.",
        ]
    lines += [
        "",
        "Small calls (`ping()`, one at a time) on the same connection: idle, then during a transfer.",
        "",
        "| case | idle p99 µs | during transfer p99 µs | ratio | calls during | MB/s with calls |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case, row in summary["calls"].items():
        lines.append(
            f"| {LABELS[case]} | {row['idle_p99_us']:,.0f} | {row['busy_p99_us']:,.0f} | {row['ratio']:.1f}x"
            f" | {row['calls_during']:,.0f} | {row['mb_s']:,.0f} |"
        )
    lines.append("")
    from ._harness import targetLine

    for label, value, op, threshold in criteria(summary):
        lines.append(targetLine(label, value, op, threshold))
    return "\n".join(lines)


def run(opts: Any) -> Any:
    """
    The entry point for C{python -m tests.benchmarks}: run this benchmark in a
    fresh process and hand back its report and criteria.

    @param opts: the harness's C{Options} (C{quick}: 256 MiB, one run).
    @return: the harness's C{BenchResult}.
    """
    from ._harness import BenchResult, Criterion

    path = Path(opts.out_dir) / "bulk.json"
    command = [sys.executable, "-m", "tests.benchmarks.bench_bulk", "--json", str(path)]
    if opts.quick:
        command.append("--quick")
    subprocess.run(command, cwd=ROOT, env=_env(), check=True, stdout=subprocess.DEVNULL, timeout=3600)
    summary = json.loads(path.read_text())
    checks = [Criterion(label, value, op, threshold) for label, value, op, threshold in criteria(summary)]
    return BenchResult("bulk", table(summary), checks, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default=None, help="bytes per transfer: 1G (default), 4G, 256M, ...")
    parser.add_argument("--runs", type=int, default=None, help="runs, cases round-robin within each (default 3)")
    parser.add_argument("--quick", action="store_true", help="256 MiB and one run: a sanity check")
    parser.add_argument("--json", default=str(ROOT / "bench-results" / "bulk.json"), help="where to write results")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated cases to run, raw first (default: {','.join(CASES)})"
    )
    parser.add_argument("--serve", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument(
        "--criterion",
        action="store_true",
        help=f"run exactly the bulk criterion's cases ({','.join(CRITERION_CASES)}); overrides --cases",
    )
    parser.add_argument(
        "--twisted-floor",
        action="store_true",
        help="also measure each floor with its listening end on Twisted, no framing: what the reactor costs",
    )
    parser.add_argument(
        "--keep-host-memory",
        action="store_true",
        help="hold off this VM's free page reporting for the run (root; put back after): see hostMemoryKept",
    )
    parser.add_argument("--pings", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--direction", choices=DIRECTIONS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.size = args.size or ("256M" if args.quick else "1G")
    args.runs = args.runs or (1 if args.quick else 3)
    args.cases = list(CRITERION_CASES) if args.criterion else [case for case in args.cases.split(",") if case]
    if args.cases[:1] != ["raw"] or set(args.cases) - set(CASES):
        parser.error(f"--cases: a comma-separated list starting with raw, of {', '.join(CASES)}")
    if args.serve:
        serve(args.serve, parseSize(args.size), args.dir)
        return
    if args.client == "upload":
        blockingClient(int(args.address), args.direction, args.dir)
        return
    if args.client:
        client(args.client, args.address, parseSize(args.size), args.pings)
        return
    if args.keep_host_memory:
        with hostMemoryKept() as (before, held):
            print(f"page reporting held off: order {before} -> {held}, put back after", file=sys.stderr, flush=True)
            summary = runAll(args)
        summary["config"]["host_memory_kept"] = {"order_before": int(before), "order_held": int(held)}
    else:
        summary = runAll(args)
    print(table(summary))
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
