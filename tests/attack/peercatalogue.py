"""The hostile peer that visits every surface: a catalogue of hostile behaviours, run against every shipped server.

    PYTHONPATH=. python -m tests.attack.peercatalogue --duration 8 --full

Contract.  L{SERVERS} names every server the project ships, each started as
a user starts it (a script or C{twist}), as a process of its own on
loopback port 0, with the attack suite's guard options
(L{tests.attack.harness.SERVER_OPTIONS}) but the guard's own preamble
timeout (L{GUARD_OPTIONS}); the process says which port it bound.
L{discover} finds the callable methods of each server's root by itself,
from the served class's C{@remote} methods (their
L{framing.rpc._signatures.RemoteMethod}, whose C{arguments} and C{result}
are the constraints the server holds calls to), so that a method added
later is visited without anyone writing an attack for it, and derives
arguments from the constraints: the largest value each allows (the
longest string, the highest integer, the fullest container within a byte
budget), every built-in kind where a parameter takes anything (bytes, str,
bytearray, memoryview, array, numpy arrays, lists, dicts, a big int, deep
nesting) and, where a parameter is a stream, a stream of items of each of
those kinds.  The echo server, which answers objects rather than calls, is
visited as one method taking anything.

L{BEHAVIOURS} are the hostile clients, each applied to every method of a
server it fits (L{Behaviour.fits}): never read, read a trickle, grant
enormous credit to a stream result and never read, open the most streams
allowed and close mid-stream over and over, send every kind at the largest
size (reading the answers), call for no answer in a flood, and hold busy
connections from many loopback addresses up to the cap.  Each is plain
sockets writing wire bytes, bounded by its budget and stopped early once
the server's memory is clearly past its bound.

L{runCase} runs one behaviour against one server while an honest client
calls on a connection of its own, and judges outcomes only (no timing
ratios): the server's RSS (all its processes') stays within L{RSS_BOUND}
of its idle size, its fds within L{FD_BOUND} of idle at the peak and back
within L{FD_AFTER_ALLOWANCE} of idle once the attacker left (within L{SETTLE_SECONDS}), its RSS
after the attack growing by at most L{RSS_AFTER_MARGIN} from one round of
the behaviour to the next (the full campaign runs L{RSS_GROWTH_ROUNDS}
rounds: a leak grows each round, heap the allocator keeps does not; the
short form runs one, and a leak shows there as growth past the peak
bound), its disk (the store file or the
served directory) within L{DISK_BOUND} of idle; every honest call is
answered, one more on a fresh connection while the attacker still holds
its connections, and every server process is still the one started (a
worker restarted by its supervisor counts as a death).  Every wait is
bounded by a deadline only a hang misses.
"""

from __future__ import annotations

import argparse
import array
import importlib
import inspect
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zope.interface import implementer

from framing import Decoder, Encoder, Limits, Registry, dumps
from framing.rpc._limits import CallLimits
from framing.rpc._streams import (
    ANNOUNCE_OPEN_TYPE,
    CREDIT,
    DEFAULT_WINDOW,
    END,
    ITEM,
    FlowMessage,
    StreamOf,
    addFlowTypes,
)
from framing.rpc._wire import CALL, NO_ANSWER, Message, MessageSlicer
from framing.slicing._constraints import (
    ByteString,
    ChoiceOf,
    Constraint,
    DictOf,
    Float,
    Integer,
    IsNone,
    ListOf,
    OneOf,
    Optional,
    SetOf,
    Text,
    TupleOf,
)
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols._guard import GuardPolicy
from protocols.kv._threads import THREADS
from protocols.options import ClientOptions

from . import attacks  # noqa: F401 (first: attacks_rpc is loaded by it)
from .attacks_rpc import ForgedRef, _ForgedRefSlicer
from .harness import ENV, MAX_CONNECTIONS, MAX_OBJECT_BYTES, ROOT, SERVER_OPTIONS, awaitRunning

MiB = 1 << 20
RSS_BOUND = 96 * MiB
"""Most a server's RSS (the sum over its processes) may rise above idle
while one behaviour runs: the guard lets each connection hold one object
of 4 MiB (L{MAX_OBJECT_BYTES}) being read and a few MiB waiting to be
sent, each stream a 1 MiB window; a bounded server stays far below this
under every behaviour, an unbounded one passes it within a second."""
ABORT_ABOVE = RSS_BOUND + 64 * MiB
"""RSS above idle at which a behaviour is stopped and its connections closed at once: its bound is clearly exceeded."""
KILL_ABOVE = 768 * MiB
"""RSS above idle at which the server is killed (SIGKILL): one that grows on after its attacker left must not
take the machine (a shared one) with it; the next behaviour gets a fresh server."""
STUCK_SECONDS = 10.0
"""Seconds after its attacker was cut off that a server still past L{ABORT_ABOVE} is deemed stuck, and killed."""
RSS_AFTER_MARGIN = 24 * MiB
"""
How much more RSS a server may keep after the last round of a behaviour
than after any round before (the full campaign's L{RSS_GROWTH_ROUNDS}): a
leak keeps about as much again each round; what the allocator keeps does
not grow past the level it reached.
"""
RSS_GROWTH_ROUNDS = 3
"""
Rounds of each behaviour in the full campaign (each once the last one's
attacker left and the server settled); the RSS after the last is judged
against the most the rounds before left (L{rssGrowth}), not against idle.  Why: a server
back at rest keeps heap that no object uses, and how much depends on the
allocator, not on the server: CPython frees a pymalloc arena only once
every object in it is gone, and glibc keeps freed chunks below a live one.
Measured (rounds of --full rows, 8 s each, against one server; a census
of its objects after each round, through a diagnostic hook: no ledger, no
broker, no buffer of 64 KiB or more alive): echo x every-kind kept 4, 38,
40 MiB above the fresh server after rounds 1-3; streams x never-read 107,
188, 187, 187; interop x never-read 80, 88, 91 (its C{record} keeps the
last value by design).  Retention stops at a level the first rounds set;
a leak does not: streams x trickle-read kept 191, 213, 259 MiB while its
readers' consumers were held in reference cycles (fixed: each round left
its 4 MiB items alive until a full collection).  Judging against idle
after one round failed rows holding nothing.
"""
FD_BOUND = MAX_CONNECTIONS + 64
FD_AFTER_ALLOWANCE = 8
"""
How many more descriptors than at idle a server may keep once the attacker
left: a server opens a few once, lazily, at a method's first call, and keeps
them (the interop service's file directory and its private directory, the
thread pool's waker pipe: 3 after the first flood, the same after every
later one), where a leak per connection would keep tens (each behaviour
opens a connection per method, the interop service's 16).
"""
"""Most fds a server may hold above idle at the peak: its connection cap, and room for its files and logs."""
STORE_FDS = 2 * THREADS + 1
"""
What a SQLite store may keep open in one process once calls have used
its pool (L{protocols.kv._threads.THREADS} threads, each with its own
connection: the database file and its WAL, 2 descriptors, and the
shared memory file once): opened lazily as calls run side by side, kept
for the process's life, as a database client keeps its connection pool.
Measured: kv-workers x never-read kept 17 more than idle (two workers,
each up to four connections), failing the 8 of L{FD_AFTER_ALLOWANCE}.
"""
DISK_BOUND = 64 * MiB
"""Most a server's disk (store file with its journal, or served directory) may grow during one behaviour."""
SETTLE_SECONDS = 60.0
"""How long a server has to be back at idle fds once the attacker left (a deadline, not a sleep)."""
RSS_SETTLE_SECONDS = 10.0
"""Then, in the full campaign, how long its RSS has to come back within L{RSS_AFTER_MARGIN} of idle."""
HONEST_DEADLINE = 60.0
"""Seconds an honest round trip may take: only a server that stopped answering misses it."""
ADDRESSES = 50
"""Loopback source addresses of the many-addresses behaviour (127.0.0.2 and up)."""
ATTACKER_ADDRESS = "127.0.1.1"
"""
The loopback address every other behaviour's connections come from.  Not
the honest client's (127.0.0.1, which the kernel gives a connection to
127.0.0.1): the guard caps connections per address (C{--max-per-peer}),
and a behaviour holding many connections (the stream churn's closed ones,
until the server has let them go) would otherwise have the honest client
refused for the attacker's count, failing the row for the harness rather
than for the server.
"""
STREAMS_PER_CYCLE = 1000
"""Streams announced on each connection of the churn: the most a broker allows (StreamOptions.maxStreams)."""


# -- the servers -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerKind:
    """
    One shipped server: how a user starts it, what it prints once it
    listens, its root's class (C{"module:Class"}; C{None}: objects, not
    calls), the honest round trip, and what on disk it keeps.
    """

    name: str
    command: Callable[[Path], list[str]]
    ready: bytes
    root: str | None
    honest: tuple[str, tuple[Any, ...], Any]
    disk: str | None = None
    workers: int = 0
    storeFds: int = 0
    """Descriptors the store of each serving process may keep once used (L{STORE_FDS})."""

    def fdsKept(self) -> int:
        """How many more descriptors than at idle the server may keep once its attacker left."""
        return FD_AFTER_ALLOWANCE + max(1, self.workers) * self.storeFds


def _listen() -> list[str]:
    return ["--listen", "tcp:0:interface=127.0.0.1:backlog=1024"]


PY = sys.executable
GUARD_OPTIONS = [option for option in SERVER_OPTIONS if not option.startswith("--preamble-timeout=")]
GUARD_OPTIONS.append(f"--preamble-timeout={GuardPolicy().preambleTimeout:g}")
"""
The attack suite's guard options, but with the guard's default preamble
timeout (10 s) in place of the suite's 2 s: no behaviour here withholds a
preamble (C{attacks.py}'s no-preamble does, against the suite's own
servers), and the honest client, a thread of this process beside the
attacker's, must not fail for its own stall.  A fresh clone's run beside
four busy loops stalled it for more than 2 s between its connect and its
preamble, and the streams server dropped it ("preamble-timeout: no
preamble within 2.0 s (0 bytes)"): the row failed for the harness, not for
the server.
"""

KV_OPTIONS = ["--log", "--call-timeout=2", "--grace=1"]
SERVERS: dict[str, ServerKind] = {
    "echo": ServerKind(
        "echo",
        lambda d: [PY, "examples/echo_server.py", *_listen(), *GUARD_OPTIONS],
        rb"server listening on .* port=(\d+)\)",
        None,
        ("", (["honest", b"x" * 64],), ["honest", b"x" * 64]),
    ),
    "kv": ServerKind(
        "kv",
        lambda d: [PY, "examples/kv_server.py", *_listen(), *KV_OPTIONS, *GUARD_OPTIONS],
        rb"server listening on .* port=(\d+)\)",
        "protocols.kv:KeyValueStore",
        ("list", ("honest/",), []),
    ),
    "kv-store": ServerKind(
        "kv-store",
        lambda d: (
            [PY, "examples/kv_server.py", *_listen(), "--store", str(d / "kv.sqlite"), *KV_OPTIONS] + GUARD_OPTIONS
        ),
        rb"server listening on .* port=(\d+)\)",
        "protocols.kv:KeyValueStore",
        ("list", ("honest/",), []),
        disk="kv.sqlite",
        storeFds=STORE_FDS,
    ),
    "kv-workers": ServerKind(
        "kv-workers",
        lambda d: (
            [PY, "-m", "twisted", "--log-format", "text", "chunkwire-kv", "--listen", "tcp:0:interface=127.0.0.1"]
            + ["--workers", "2", "--store", str(d / "kv.sqlite"), "--grace", "1", *GUARD_OPTIONS]
        ),
        rb"worker 0 started: pid (\d+)[\s\S]*worker 1 started: pid (\d+)[\s\S]*starting on (\d+)[\s\S]*starting on",
        "protocols.kv:KeyValueStore",
        ("list", ("honest/",), []),
        disk="kv.sqlite",
        workers=2,
        storeFds=STORE_FDS,
    ),
    "bulk": ServerKind(
        "bulk",
        lambda d: [PY, "examples/bulk_server.py", *_listen(), "--dir", str(d / "files"), "--grace=1", *GUARD_OPTIONS],
        rb"server listening on .* port=(\d+)\)",
        "protocols.bulk._files:BulkService",
        ("list", (), []),
        disk="files",
    ),
    "interop": ServerKind(
        "interop",
        lambda d: (
            [PY, "examples/interop_server.py", *_listen(), "--login-listen", "tcp:0:interface=127.0.0.1"]
            + ["--certificate-listen", "ssl:0:interface=127.0.0.1", "--dir", str(d / "files"), "--log", *GUARD_OPTIONS]
        ),
        rb"interop server listening on .* port=(\d+)\)",
        "protocols.interop:InteropService",
        ("echo", ("honest",), "honest"),
        disk="files",
    ),
    "streams": ServerKind(
        "streams",
        lambda d: (
            [PY, "-m", "tests.attack.streams_server", "--listen", "tcp:0:interface=127.0.0.1:backlog=1024"]
            + GUARD_OPTIONS
        ),
        rb"streams server listening on .* port=(\d+)\)",
        "tests.attack.streams_server:Streams",
        ("ping", ("honest",), "honest"),
    ),
}
"""Every server the project ships (and the object-streams service no example has), as users start them."""


def _tree(pid: int) -> list[int]:
    """C{pid} and its descendants (Linux's /proc)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
                pending.extend(int(child) for child in children)
        except OSError:
            continue
    return found


class ServedProcess:
    """One server of L{SERVERS} running: its processes, port, log, and their resources from /proc."""

    def __init__(self, kind: ServerKind, scratch: Path) -> None:
        self.kind = kind
        self.scratch = scratch
        self.logPath = scratch / f"{kind.name}.log"
        self._log = open(self.logPath, "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            kind.command(scratch), cwd=ROOT, env=ENV, stdout=self._log, stderr=subprocess.STDOUT
        )
        match = self._waitFor(kind.ready, 90 if kind.workers else 30)
        if kind.workers:
            self.port = int(match.group(3))
        else:
            self.port = int(match.group(1))
        self.pids = self._pids(kind.workers)
        awaitRunning(self.port, f"the {kind.name} server")

    def _waitFor(self, pattern: bytes, timeout: float) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.logPath.read_bytes())
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the {self.kind.name} server did not start: {self.logPath.read_text(errors='replace')}")

    def _pids(self, workers: int) -> list[int]:
        """The pids that must stay alive: the process, and every worker, once all have started."""
        deadline = time.monotonic() + 30
        while True:
            pids = _tree(self.process.pid)
            # (a worker's own children, if any, come and go: only the direct ones are kept)
            if len(pids) >= 1 + workers or time.monotonic() > deadline:
                return pids[: 1 + workers] if workers else [self.process.pid]
            time.sleep(0.05)

    def dead(self) -> list[str]:
        """What died: each of the first processes that is gone or was replaced."""
        dead = []
        for pid in self.pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                dead.append(f"pid {pid} gone")
                continue
            if state in ("Z", "X"):
                dead.append(f"pid {pid} exited")
        return dead

    def resources(self) -> dict[str, int]:
        """RSS and open fds summed over the server's processes, and its disk in bytes."""
        rss = fds = 0
        for pid in _tree(self.process.pid):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                found = re.search(r"VmRSS:\s+(\d+)", status)
                rss += int(found.group(1)) * 1024 if found else 0
                fds += len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue
        return {"rss": rss, "fds": fds, "disk": self.disk()}

    def disk(self) -> int:
        if self.kind.disk is None:
            return 0
        base = self.scratch / self.kind.disk
        total = 0
        for path in [base, *base.parent.glob(base.name + "-*")] if base.suffix else base.rglob("*"):
            try:
                total += path.stat().st_size if path.is_file() else 0
            except OSError:
                continue
        return total

    def logSince(self, offset: int) -> str:
        with open(self.logPath, "rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL every process of the server at once."""
        for pid in reversed(_tree(self.process.pid)):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        for pid in self.pids[1:]:
            try:
                os.kill(pid, 9)  # a worker that outlived its supervisor: nothing may outlive the run
            except ProcessLookupError:
                pass
        self._log.close()


# -- method discovery and arguments ---------------------------------------------------------------------------


class Stream:
    """A stream in a derived argument list: the peer announces one and sends C{items} as its items."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __repr__(self) -> str:
        kinds = sorted({type(item).__name__ for item in self.items})
        return f"<stream of {len(self.items)} {'/'.join(kinds)}>"


@dataclass
class MethodPlan:
    """
    One method a server serves: its name, argument lists derived from its
    constraints, and whether its result is an object stream.
    """

    name: str
    argumentSets: list[tuple[Any, ...]]
    streamResult: bool = False
    streamArguments: bool = False


def anyKinds(budget: int) -> list[Any]:
    """A value of every built-in kind, each about C{budget} bytes (the largest the caller allows)."""
    values: list[Any] = [
        b"b" * budget,
        "s" * budget,
        bytearray(budget),
        memoryview(bytes(budget)),
        array.array("d", bytes(budget - budget % 8)),
        list(range(budget // 9)),
        {index: index for index in range(budget // 18)},
        (1 << (8 * 1024)) - 1,  # a big int at Limits.max_bigint_length
        _nested(60),
    ]
    try:
        import numpy

        values.append(numpy.zeros(budget // 8, dtype=numpy.float64))
    except ImportError:  # (numpy comes with the bench extra)
        pass
    return values


def _nested(depth: int) -> Any:
    value: Any = [b"deep"]
    for _ in range(depth - 1):
        value = [value]
    return value


def _distinct(constraint: Constraint | None, count: int) -> list[Any]:
    """C{count} distinct small values C{constraint} accepts (keys of a dict, members of a set)."""
    if isinstance(constraint, ByteString):
        return [str(index).encode() for index in range(count)]
    if isinstance(constraint, Text):
        return [str(index) for index in range(count)]
    return list(range(count))


def largest(constraint: Constraint | None, budget: int) -> list[Any]:
    """
    Values C{constraint} allows, the largest first: a string at its most
    characters, an integer at its maximum, a container filled to its most
    items within C{budget} bytes; every built-in kind where it allows
    anything; a L{Stream} of each kind where it is a stream.
    """
    if constraint is None or type(constraint) is Constraint:
        return anyKinds(budget)
    if isinstance(constraint, StreamOf):
        itemValues = largest(getattr(constraint, "item", None), budget)
        return [Stream([value] * DEFAULT_WINDOW) for value in itemValues]
    if isinstance(constraint, ByteString):
        return [b"b" * min(constraint.max_length, budget)]
    if isinstance(constraint, Text):
        return ["t" * min(constraint.max_length, budget)]
    if isinstance(constraint, Integer):
        magnitude = min(constraint.max_bytes, Limits().max_bigint_length)  # the decoder's own bound on big ints
        return [constraint.maximum if constraint.maximum is not None else (1 << (8 * magnitude - 1)) - 1]
    if isinstance(constraint, Float):
        return [constraint.maximum if constraint.maximum is not None else 1.7976931348623157e308]
    if isinstance(constraint, IsNone):
        return [None]
    if isinstance(constraint, OneOf):
        return list(constraint.values)
    if isinstance(constraint, Optional):
        return largest(constraint.inner, budget)
    if isinstance(constraint, ChoiceOf):
        return [value for alternative in constraint.alternatives for value in largest(alternative, budget)]
    if isinstance(constraint, TupleOf):
        return [tuple(largest(item, budget // max(1, len(constraint.items)))[0] for item in constraint.items)]
    if isinstance(constraint, SetOf):
        return [set(_distinct(constraint.item, min(constraint.max_items, budget // 16)))]
    if isinstance(constraint, ListOf):
        one = largest(constraint.item, budget)[0]
        count = max(1, min(constraint.max_items, budget // max(1, len(dumps(one)))))
        return [[one] * count]
    if isinstance(constraint, DictOf):
        one = largest(constraint.value, budget)[0]
        count = max(1, min(constraint.max_items, budget // max(1, len(dumps(one)) + 8)))
        return [dict.fromkeys(_distinct(constraint.key, count), one)]
    if "RefOf" in type(constraint).__name__:
        return [ForgedRef(7_777)]
    return anyKinds(budget)


def _parameters(function: Callable[..., Any]) -> list[str]:
    parameters = list(inspect.signature(function).parameters.values())[1:]
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def discover(root: str | None, budget: int) -> list[MethodPlan]:
    """
    The methods the class C{root} (C{"module:Class"}) serves, found from its
    C{@remote} methods alone, each with argument lists derived from its
    constraints (see L{largest}); C{None} (the echo server): one method
    taking any object.
    """
    if root is None:
        return [MethodPlan("", [(value,) for value in anyKinds(budget)])]
    module, name = root.split(":")
    cls = getattr(importlib.import_module(module), name)
    plans = []
    for method in sorted(cls.remoteMethods.values(), key=lambda m: m.name):
        constraints = method.arguments if isinstance(method.arguments, dict) else {}
        names = _parameters(method.function)
        if isinstance(method.arguments, TupleOf):
            choices = [largest(item, budget) for item in method.arguments.items]
        else:
            choices = [largest(constraints.get(parameter), budget) for parameter in names]
        count = max((len(values) for values in choices), default=1)
        sets = [tuple(values[index % len(values)] for values in choices) for index in range(count)]
        plans.append(
            MethodPlan(
                method.name,
                sets,
                streamResult=isinstance(method.result, StreamOf),
                streamArguments=any(isinstance(value, Stream) for values in choices for value in values),
            )
        )
    return plans


# -- the wire, as a hostile peer writes it ---------------------------------------------------------------------


class Announcement(tuple):  # type: ignore[type-arg]
    __slots__ = ()


@implementer(ISlicer)
class _AnnouncementSlicer:
    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(ANNOUNCE_OPEN_TYPE, obj, obj)


def registry() -> Registry:
    """What the hostile peer writes: RPC messages, invented references, stream announcements and flow messages."""
    made = Registry(DEFAULT_REGISTRY)
    made.add_slicer(Message, MessageSlicer())
    made.add_slicer(ForgedRef, _ForgedRefSlicer())
    made.add_slicer(Announcement, _AnnouncementSlicer())
    addFlowTypes(made)
    return made


class Peer:
    """One hostile connection: a socket (from C{source}), its encoder, and the ids it has used."""

    def __init__(self, port: int, source: str = ATTACKER_ADDRESS, echo: bool = False) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.echo = echo
        self.encoder = Encoder(registry())
        self.requestId = 0
        self.streamId = 0
        self.pending = memoryview(PREAMBLE)
        self.closed = False

    def call(self, name: str, arguments: tuple[Any, ...], answer: bool = True, items: int | None = None) -> bytes:
        """L{chunks} joined: for small calls."""
        return b"".join(self.chunks(name, arguments, answer, items))

    def chunks(
        self, name: str, arguments: tuple[Any, ...], answer: bool = True, items: int | None = None
    ) -> Iterator[bytes]:
        """
        One CALL (or, to the echo server, the object itself) as wire bytes,
        each L{Stream} argument announced and followed by its items (the
        first C{items} of them, then no END, if given; all, then END, if
        not), one message at a time: a stream's items are encoded only as
        they are sent.
        """
        if self.echo:
            yield self.encoder.encode(arguments[0])
            return
        sent, streams = [], []
        for value in arguments:
            if isinstance(value, Stream):
                self.streamId += 1
                streams.append((self.streamId, value))
                sent.append(Announcement((self.streamId,)))
            else:
                sent.append(value)
        self.requestId += 1
        yield self.encoder.encode(Message((CALL, self.requestId if answer else NO_ANSWER, 0, name, None, *sent)))
        for streamId, stream in streams:
            for value in stream.items[:items]:
                yield self.encoder.encode(FlowMessage((ITEM, streamId, value)))
            if items is None:
                yield self.encoder.encode(FlowMessage((END, streamId, len(stream.items))))

    def fileno(self) -> int:
        return self.sock.fileno()

    def credit(self, streamId: int, objects: int, windowBytes: int) -> bytes:
        return self.encoder.encode(FlowMessage((CREDIT, streamId, objects, windowBytes)))

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def pump(
    feeds: list[tuple[Peer, Iterator[bytes | None]]],
    budget: float,
    stop: threading.Event,
    read: str,
    untilSent: bool = False,
) -> dict[str, Any]:
    """
    Write each peer's feed into its socket as fast as the server takes it,
    until C{budget} seconds pass or C{stop} is set; a feed yields bytes, or
    C{None} for nothing yet.  C{read}: C{"never"}, C{"trickle"} (16 bytes a
    tenth of a second per peer) or C{"drain"} (everything); C{untilSent}:
    return as soon as every feed is written whole.  Counts what was sent
    and received and the connections the server ended.
    """
    sent = received = ended = 0
    nextRead: dict[Peer, float] = {}
    active = {peer: feed for peer, feed in feeds}
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline and not stop.is_set() and any(not p.closed for p in active):
        live = [peer for peer in active if not peer.closed]
        if untilSent and all(active[peer] is None and not peer.pending for peer in live):
            break
        readers = [] if read == "never" else live
        try:
            readable, writable, _ = select.select(readers, [p for p in live if active[p] is not None], [], 0.05)
        except (OSError, ValueError):
            break
        now = time.monotonic()
        for peer in readable:
            if read == "trickle" and nextRead.get(peer, 0) > now:
                continue
            nextRead[peer] = now + 0.1
            try:
                chunk = peer.sock.recv(16 if read == "trickle" else 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                peer.close()
                ended += 1
            received += len(chunk)
        for peer in writable:
            if peer.closed:
                continue
            if not peer.pending:
                feed = active[peer]
                try:
                    data = next(feed) if feed is not None else None
                except StopIteration:
                    active[peer] = None  # type: ignore[assignment]
                    continue
                if data is None:
                    continue
                peer.pending = memoryview(data)
            try:
                count = peer.sock.send(peer.pending)
            except BlockingIOError:
                continue
            except OSError:
                peer.close()
                ended += 1
                continue
            peer.pending = peer.pending[count:]
            sent += count
        if read == "trickle" or read == "never":
            time.sleep(0.001 if writable else 0)
    return {"sent": sent, "received": received, "ended_by_server": ended}


def filling(peer: Peer, plan: MethodPlan, answer: bool = True, items: int | None = None) -> Iterator[bytes]:
    """Calls of C{plan}, each of its argument lists in turn, for ever, one message at a time."""
    while True:
        for arguments in plan.argumentSets:
            yield from peer.chunks(plan.name, arguments, answer, items)


# -- the behaviours --------------------------------------------------------------------------------------------


@dataclass
class Target:
    """What a behaviour is given: the server's port, its methods, the honest call, and the run's scale."""

    port: int
    plans: list[MethodPlan]
    echo: bool
    honest: tuple[str, tuple[Any, ...], Any]
    full: bool
    peers: list[Peer] = field(default_factory=list)

    def peer(self, source: str = ATTACKER_ADDRESS) -> Peer:
        made = Peer(self.port, source, self.echo)
        self.peers.append(made)
        return made


def _perMethod(target: Target, plans: list[MethodPlan]) -> list[tuple[Peer, MethodPlan]]:
    """One connection per method; per argument list where it holds a stream (a refusal ends only its own)."""
    pairs = []
    for plan in plans:
        if plan.streamArguments:
            for arguments in plan.argumentSets:
                pairs.append((target.peer(), MethodPlan(plan.name, [arguments], plan.streamResult, True)))
        else:
            pairs.append((target.peer(), plan))
    return pairs


def neverRead(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """Call every method in a flood, its largest arguments in turn, and never read an answer (nor a stream)."""
    feeds = [(peer, filling(peer, plan)) for peer, plan in _perMethod(target, target.plans)]
    return pump(feeds, budget, stop, "never")  # type: ignore[arg-type]


def trickleRead(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """Call every method in a flood and read the answers 16 bytes a tenth of a second."""
    feeds = [(peer, filling(peer, plan)) for peer, plan in _perMethod(target, target.plans)]
    return pump(feeds, budget, stop, "trickle")  # type: ignore[arg-type]


def everyKind(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """Every argument list of every method (every kind at its largest, streams of each kind), reading the answers."""
    feeds = [(peer, filling(peer, plan)) for peer, plan in _perMethod(target, target.plans)]
    return pump(feeds, budget, stop, "drain")  # type: ignore[arg-type]


def noAnswerFlood(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """Calls for no answer, every method's largest arguments in turn, as fast as the server reads."""
    feeds = [(peer, filling(peer, plan, answer=False)) for peer, plan in _perMethod(target, target.plans)]
    return pump(feeds, budget, stop, "drain")  # type: ignore[arg-type]


ENORMOUS = 1 << 62


def enormousCredit(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """
    Call each method whose result is a stream (each argument list on a
    connection of its own, so the stream is that connection's first: id
    1), grant it 2**62 items and 2**62 bytes of credit, and never read.
    """
    feeds = []
    for plan in target.plans:
        if not plan.streamResult:
            continue
        for arguments in plan.argumentSets:
            peer = target.peer()
            feeds.append((peer, iter([peer.call(plan.name, arguments) + peer.credit(1, ENORMOUS, ENORMOUS)])))
    return pump(feeds, budget, stop, "never")  # type: ignore[arg-type]


def streamChurn(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """
    Over and over: connect, open the most streams a connection may
    (L{STREAMS_PER_CYCLE} calls, each with a stream argument holding one
    small item and no END, or a stream result given default credit), then
    close the connection mid-stream.
    """
    plans = [plan for plan in target.plans if plan.streamArguments or plan.streamResult]
    small = [_small(plan) for plan in plans]
    deadline = time.monotonic() + budget
    cycles = calls = 0
    while time.monotonic() < deadline and not stop.is_set():
        peer = Peer(target.port, echo=target.echo)
        data = []
        for index in range(STREAMS_PER_CYCLE):
            plan, arguments = small[index % len(small)]
            data.append(peer.call(plan.name, arguments, items=1))
        calls += STREAMS_PER_CYCLE
        peer.pending = memoryview(peer.pending.tobytes() + b"".join(data))
        pump([(peer, iter(()))], max(0.1, deadline - time.monotonic()), stop, "drain", untilSent=True)
        peer.close()
        cycles += 1
    return {"cycles": cycles, "calls": calls}


def _small(plan: MethodPlan) -> tuple[MethodPlan, tuple[Any, ...]]:
    """C{plan} with arguments of the same kinds but small (a stream of one 1 KiB item; a produce of small items)."""
    arguments = []
    for value in plan.argumentSets[0]:
        if isinstance(value, Stream):
            arguments.append(Stream([b"c" * 1024] * 4))
        elif isinstance(value, int) and not isinstance(value, bool):
            arguments.append(min(value, 1024))
        else:
            arguments.append(value)
    return plan, tuple(arguments)


def manyAddresses(target: Target, budget: float, stop: threading.Event) -> dict[str, Any]:
    """
    Fill the server's connection cap from L{ADDRESSES} loopback addresses,
    every connection busy: the honest call, every quarter second, its
    answers read.
    """
    perAddress = max(1, MAX_CONNECTIONS // ADDRESSES)
    name, arguments, _ = target.honest
    feeds = []
    refused = 0
    for address in range(ADDRESSES):
        for _ in range(perAddress):
            try:
                peer = target.peer(f"127.0.0.{address + 2}")
            except OSError:
                refused += 1
                continue
            feeds.append((peer, _every(0.25, lambda peer=peer: peer.call(name, arguments))))
    result = pump(feeds, budget, stop, "drain")  # type: ignore[arg-type]
    result["connections"] = len(feeds)
    result["connect_refused"] = refused
    return result


def _every(seconds: float, make: Callable[[], bytes]) -> Iterator[bytes | None]:
    due = 0.0
    while True:
        now = time.monotonic()
        if now >= due:
            due = now + seconds
            yield make()
        else:
            yield None


@dataclass(frozen=True)
class Behaviour:
    """A hostile client: its function and which methods it fits (C{None}: every server)."""

    run: Callable[[Target, float, threading.Event], dict[str, Any]]
    fits: Callable[[MethodPlan], bool] | None = None
    calls: bool = True  # needs RPC calls (not the echo server's objects)


BEHAVIOURS: dict[str, Behaviour] = {
    "never-read": Behaviour(neverRead, calls=False),
    "trickle-read": Behaviour(trickleRead, calls=False),
    "every-kind": Behaviour(everyKind, calls=False),
    "no-answer-flood": Behaviour(noAnswerFlood),
    "enormous-credit": Behaviour(enormousCredit, lambda plan: plan.streamResult),
    "stream-churn": Behaviour(streamChurn, lambda plan: plan.streamResult or plan.streamArguments),
    "many-addresses": Behaviour(manyAddresses, calls=False),
}
"""Every hostile behaviour of the catalogue, by name."""


def applies(behaviour: Behaviour, kind: ServerKind, plans: list[MethodPlan]) -> bool:
    if behaviour.calls and kind.root is None:
        return False
    return behaviour.fits is None or any(behaviour.fits(plan) for plan in plans)


# -- the honest client and the sampler -------------------------------------------------------------------------


def honestRoundTrip(kind: ServerKind, port: int, timeout: float = HONEST_DEADLINE) -> float:
    """One honest call on a fresh connection (an echo, for the echo server); its seconds; raises if not answered."""
    name, arguments, expected = kind.honest
    started = time.monotonic()
    if kind.root is None:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(PREAMBLE + dumps(arguments[0])[len(PREAMBLE) :])
            decoder = Decoder()
            while True:
                sock.settimeout(max(0.1, started + timeout - time.monotonic()))
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionError("the echo server closed the honest connection")
                got = decoder.feed(chunk)
                if got:
                    if got[0] != expected:
                        raise AssertionError(f"echo gave {got[0]!r}")
                    return time.monotonic() - started
    from protocols import blocking

    with blocking.connect(
        ("127.0.0.1", port), options=ClientOptions(timeout=timeout, callLimits=CallLimits(callTimeout=timeout))
    ) as connection:
        got = connection.root.callRemote(name, *arguments)
    if got != expected:
        raise AssertionError(f"{name} gave {got!r}")
    return time.monotonic() - started


class Honest:
    """An honest client calling in a thread while a behaviour runs: its latencies and errors."""

    def __init__(self, kind: ServerKind, port: int) -> None:
        self.kind, self.port = kind, port
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.answered = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.latencies.append(honestRoundTrip(self.kind, self.port))
                self.answered.set()
            except Exception as error:
                self.errors.append(f"{type(error).__name__}: {str(error)[:200]}")
                self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(HONEST_DEADLINE + 10)


class Sampler:
    """
    Samples a server's resources every 50 ms and keeps the peaks; past
    L{ABORT_ABOVE} sets C{abort} and closes the attacker's C{peers}, past
    L{KILL_ABOVE} kills the server.
    """

    def __init__(self, server: ServedProcess, idle: dict[str, int], peers: list[Peer]) -> None:
        self.server = server
        self.idle = idle
        self.peers = peers
        self.peak = dict(idle)
        self.killed = False
        self._abortedAt: float | None = None
        self.abort = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            now = self.server.resources()
            self.peak = {key: max(value, now[key]) for key, value in self.peak.items()}
            if now["rss"] - self.idle["rss"] > ABORT_ABOVE and not self.abort.is_set():
                self.abort.set()
                for peer in list(self.peers):
                    peer.close()
            if self.abort.is_set() and self._abortedAt is None:
                self._abortedAt = time.monotonic()
            stuck = self._abortedAt is not None and time.monotonic() - self._abortedAt > STUCK_SECONDS
            above = now["rss"] - self.idle["rss"]
            if (above > KILL_ABOVE or (stuck and above > ABORT_ABOVE)) and not self.killed:
                self.killed = True
                self.server.kill()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(5)
        return self.peak


# -- one case, and a campaign ----------------------------------------------------------------------------------


def settled(server: ServedProcess, idle: dict[str, int], seconds: float, rss: bool = True) -> dict[str, int]:
    """The server's resources once its fds (and, if C{rss}, its RSS) are back at idle, or after C{seconds}."""
    deadline = time.monotonic() + seconds
    while True:
        now = server.resources()
        fdsBack = now["fds"] <= idle["fds"] + server.kind.fdsKept()
        back = fdsBack and (not rss or now["rss"] <= idle["rss"] + RSS_AFTER_MARGIN)
        if back or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def rssGrowth(afters: list[int], idle: int) -> str | None:
    """
    The RSS-after rule (L{RSS_GROWTH_ROUNDS}): what is wrong with a server
    whose RSS was C{afters} after each round of a behaviour, or C{None}:
    the last round may leave at most L{RSS_AFTER_MARGIN} more than the
    most any earlier round left (the level the allocator keeps; a round
    that happened to leave less is no baseline), and one round is not
    judged.
    """
    if len(afters) < 2:
        return None
    growth = afters[-1] - max(afters[:-1])
    if growth <= RSS_AFTER_MARGIN:
        return None
    each = ", ".join(f"{(after - idle) / MiB:.0f}" for after in afters)
    return (
        f"RSS after the attack grew {growth / MiB:.0f} MiB in round {len(afters)} past the rounds before "
        f"({each} MiB above idle after each)"
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def runCase(
    server: ServedProcess, name: str, plans: list[MethodPlan], duration: float, full: bool, rounds: int = 1
) -> dict[str, Any]:
    """
    Run behaviour C{name} against C{server} for C{duration} seconds beside
    an honest client, C{rounds} times (each once the last one's attacker
    left and the server settled); one row of verdicts, the peaks over every
    round, the RSS-after rule on the last two (L{RSS_GROWTH_ROUNDS}).
    """
    behaviour = BEHAVIOURS[name]
    fitting = [plan for plan in plans if behaviour.fits is None or behaviour.fits(plan)]
    idle = settled(server, server.resources(), 5.0)
    honest = Honest(server.kind, server.port)
    failures: list[str] = []
    seen: dict[str, Any] = {}
    if not honest.answered.wait(HONEST_DEADLINE):
        failures.append("the honest client was not answered before the attack")
    peak = dict(idle)
    afters: list[int] = []
    killed = aborted = False
    for _ in range(rounds):
        target = Target(server.port, fitting, server.kind.root is None, server.kind.honest, full)
        sampler = Sampler(server, idle, target.peers)
        try:
            seen = behaviour.run(target, duration, sampler.abort)
        except Exception as error:  # the attacker's own failure: the case proves nothing, so it fails
            seen = {"attacker_error": f"{type(error).__name__}: {error}"}
            failures.append(f"the attacker failed: {seen['attacker_error'][:160]}")
        try:
            # Answered on a fresh connection while every attacking connection is still held.
            if not sampler.killed:
                honestRoundTrip(server.kind, server.port)
        except Exception as error:
            failures.append(f"honest call during the attack not answered: {type(error).__name__}: {str(error)[:160]}")
        for peer in target.peers:
            peer.close()
        roundPeak = sampler.stop()
        killed, aborted = killed or sampler.killed, aborted or sampler.abort.is_set()
        left = server.resources()
        if not sampler.killed:
            left = settled(server, idle, SETTLE_SECONDS, rss=False)
            if full:
                left = settled(server, idle, RSS_SETTLE_SECONDS)
        peak = {key: max(peak[key], roundPeak[key], left[key]) for key in peak}
        afters.append(left["rss"])
        if killed or aborted or failures or server.dead():
            break
    honest.stop()
    dead = [] if killed else server.dead()
    if dead:
        failures.append(f"server died: {', '.join(dead)}")
    if honest.errors:
        failures.append(f"{len(honest.errors)} honest calls failed: {honest.errors[0]}")
    if peak["rss"] - idle["rss"] > RSS_BOUND:
        failures.append(f"RSS rose {(peak['rss'] - idle['rss']) / MiB:.0f} MiB above idle")
    if aborted:
        failures.append(f"stopped early: RSS passed idle + {ABORT_ABOVE // MiB} MiB")
    if killed:
        failures.append(f"server killed: past idle + {KILL_ABOVE // MiB} MiB, or stuck above the bound once cut off")
    grown = rssGrowth(afters, idle["rss"])
    if grown and not dead:
        failures.append(grown)
    if peak["fds"] - idle["fds"] > FD_BOUND:
        failures.append(f"fds rose {peak['fds'] - idle['fds']} above idle")
    if not dead and left["fds"] > idle["fds"] + server.kind.fdsKept():
        failures.append(f"fds {idle['fds']} idle, {left['fds']} after")
    if peak["disk"] - idle["disk"] > DISK_BOUND:
        failures.append(f"disk grew {(peak['disk'] - idle['disk']) / MiB:.0f} MiB")
    return {
        "server": server.kind.name,
        "behaviour": name,
        "methods": [plan.name or "(object)" for plan in fitting],
        "rss_peak_above_idle_mib": round((peak["rss"] - idle["rss"]) / MiB, 1),
        "rss_after_above_idle_mib": round((left["rss"] - idle["rss"]) / MiB, 1),
        "rss_after_each_round_mib": [round((after - idle["rss"]) / MiB, 1) for after in afters],
        "fds": [idle["fds"], peak["fds"], left["fds"]],
        "disk_growth_mib": round((peak["disk"] - idle["disk"]) / MiB, 1),
        "honest_answered": len(honest.latencies),
        "honest_p99_ms": round(percentile(honest.latencies, 0.99) * 1e3, 1),
        "seen": seen,
        "failures": failures,
    }


def runServer(
    kindName: str, names: list[str], duration: float, scratch: Path, full: bool = False, rounds: int = 1
) -> list[dict[str, Any]]:
    """Every behaviour of C{names} that fits, one after the other, against a fresh server of C{kindName}."""
    kind = SERVERS[kindName]
    budget = MAX_OBJECT_BYTES - 4096 if full else MiB
    plans = discover(kind.root, budget)
    directory = scratch / kindName
    directory.mkdir(parents=True, exist_ok=True)
    server = ServedProcess(kind, directory)
    rows = []
    try:
        for name in names:
            if not applies(BEHAVIOURS[name], kind, plans):
                continue
            if server.dead():  # the last case killed it (or the sampler did): the next gets a fresh one
                server.stop()
                server = ServedProcess(kind, directory)
            rows.append(runCase(server, name, plans, duration, full, rounds))
    finally:
        server.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| server | behaviour | methods | peak RSS above idle (MiB) | RSS after each round (MiB) "
        "| fds idle / peak / after "
        "| disk growth (MiB) | honest answered | honest p99 (ms) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['server']} | {row['behaviour']} | {len(row['methods'])} | {row['rss_peak_above_idle_mib']} "
            f"| {' / '.join(map(str, row['rss_after_each_round_mib']))} | {' / '.join(map(str, row['fds']))} "
            f"| {row['disk_growth_mib']} "
            f"| {row['honest_answered']} | {row['honest_p99_ms']} "
            f"| {'pass' if not row['failures'] else '; '.join(row['failures'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated: " + ", ".join(SERVERS))
    parser.add_argument("--behaviours", default=",".join(BEHAVIOURS), help="comma-separated behaviour names")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds each behaviour runs")
    parser.add_argument("--full", action="store_true", help="values at the guard's full object size (4 MiB)")
    parser.add_argument(
        "--rounds",
        type=int,
        help=f"rounds of each behaviour (default {RSS_GROWTH_ROUNDS} with --full, else 1): see RSS_GROWTH_ROUNDS",
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="chunkwire-catalogue-") as scratch:
        for kindName in args.servers.split(","):
            rounds = args.rounds or (RSS_GROWTH_ROUNDS if args.full else 1)
            rows += runServer(kindName, args.behaviours.split(","), args.duration, Path(scratch), args.full, rounds)
            print(table(rows[-len(BEHAVIOURS) :]), flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    failed = [row for row in rows if row["failures"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} catalogue cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
