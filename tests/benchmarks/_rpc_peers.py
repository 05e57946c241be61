"""The RPC peers the RPC benchmarks compare, their server and client processes, and the load engine.

Five peers answer the same C{echo(value)} call over loopback TCP:

  - C{chunkwire}: C{protocols.rpc.serve} / C{connect}, a L{Referenceable} root;
  - C{amp}: C{twisted.protocols.amp}, one command per payload type
    (C{Integer}, C{String});
  - C{pb}: C{twisted.spread.pb}, C{remote_echo} on the root object;
  - C{foolscap}: foolscap 24.9, C{remote_echo} on a registered
    C{Referenceable} (a Tub always speaks TLS);
  - C{handrolled}: C{Int32StringReceiver} + msgpack, C{[id, name, args]}
    answered by C{[id, result]}: the floor a library is measured against.

Beside them, C{chunkwire-blocking} (L{BLOCKING}): the chunkwire server, called
by the blocking client, whose process runs no reactor (L{blockingClientMain});
and C{chunkwire-asyncio} (L{ASYNCIO}): the same server called by the asyncio
client, on a plain asyncio event loop (L{asyncioClientMain}).  Two bounds, measured only when asked for:
C{chunkwire-floor} (L{FLOOR}: chunkwire's server, called by pre-encoded CALLs with no decoding) and
C{twisted-floor} (L{TWISTED_FLOOR}: the same client against a bare Twisted protocol).  And two peers
that use neither Twisted nor chunkwire, whose users call a service without a
reactor (issue 32): C{thriftpy2} (L{THRIFT}: a blocking client, a threaded
server) and C{grpc-aio} (L{GRPC}: C{grpc.aio} on both sides), each with its
own server and client process mains; both need the C{bench} extra.

The set-ups follow C{research/anchors-rpc.md}: no peer is tuned beyond
raising a size limit where one would get in the way.

Processes (run by the benchmarks, never by tests)::

    python -m tests.benchmarks._rpc_peers serve PEER
        prints one JSON line {"address": ..., "pid": ...}, then serves until killed
    python -m tests.benchmarks._rpc_peers client PEER ADDRESS SERVER_PID
        connects, prints {"ready": ...}, then runs one JSON command per stdin
        line and answers each with one JSON line on stdout (see L{Commands})

Contract: the client process writes to stdout only between measurements, so a
tracer counting its socket sends (any fd but 0-2) sees only the RPC traffic.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import functools
import gc
import itertools
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols import amp
from twisted.protocols.basic import Int32StringReceiver, LineReceiver

from protocols.options import ClientOptions

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS = ("chunkwire", "amp", "pb", "foolscap", "handrolled")
LABELS = {
    "chunkwire": "chunkwire",
    "amp": "twisted AMP",
    "pb": "twisted PB",
    "foolscap": "foolscap 24.9 (TLS)",
    "handrolled": "hand-rolled Int32+msgpack",
}
LOGIN = "chunkwire-login"
"""chunkwire with a SCRAM-SHA-256 login before the calls (issue 16: a logged-in call costs what an open one does).
Not in L{PEERS}: measure it with C{--peers chunkwire chunkwire-login}."""
LABELS[LOGIN] = "chunkwire, logged in"
LOGIN_USER, LOGIN_PASSWORD = "bench", b"a bench password"
BLOCKING = "chunkwire-blocking"
"""chunkwire's Twisted server called by the blocking client of C{protocols.blocking}: no reactor in the client
process (issue 32).  With N calls in flight it runs N threads on its one connection.  Measured by bench_rpc
beside C{chunkwire} (its default peers), not by the other RPC benchmarks."""
LABELS[BLOCKING] = "chunkwire, blocking client"
ASYNCIO = "chunkwire-asyncio"
"""chunkwire's Twisted server called by the asyncio client of C{protocols.asyncioclient}: no reactor in the client
process, the standard asyncio loop (issue 32).  N in flight is N coroutines making sequential calls on its one
connection.  Measured by bench_rpc beside C{chunkwire}, not by the other RPC benchmarks."""
LABELS[ASYNCIO] = "chunkwire, asyncio client"
FLOOR = "chunkwire-floor"
"""
Not a client: the least any client of chunkwire's Twisted server can cost (issue 32's bound).  Its process
encodes one C{echo(value)} CALL once, then for each call sends those same bytes with one C{sendall} and reads
the answer's bytes with C{recv}, compared whole with the first answer's (the request id never changes: the
server answers each CALL as it comes), with no decoding, no locks, no bookkeeping.  Its calls/s against the
Twisted client's bound what any client can reach against that server, the blocking client's among them; what
it costs is two system calls per call.  Sequential only (L{SEQUENTIAL_ONLY}).  Not measured by default:
C{--peers chunkwire chunkwire-blocking chunkwire-floor}.
"""
LABELS[FLOOR] = "floor: same CALL bytes, sendall + recv"
TWISTED_FLOOR = "twisted-floor"
"""
Not chunkwire's server: the least any Twisted server can cost per call, called by the L{FLOOR} client.  Its
server is a bare C{Protocol} on the reactor chunkwire's server runs on (Twisted's default, epoll on Linux) that
sends the preamble, then answers each CALL the floor client sends with that call's ANSWER, encoded once at start
(L{floorMessages}): no decoding, no broker, no method.  It knows the CALLs byte for byte, so a whole CALL in a
read is found with one dict lookup (L{TwistedFloorServer}), and its ANSWER leaves with one C{send} straight to
the socket, as chunkwire's L{protocols._outlet.Outlet} does.  What it costs per call is what any Twisted server
pays (a reactor turn, C{epoll_wait}, C{recv}, C{send}); its round trip against thriftpy2's says whether a client
of a Twisted server can match thriftpy2 at all (issue 32).  Sequential only; not measured by default:
C{--peers chunkwire chunkwire-blocking chunkwire-floor twisted-floor thriftpy2}.
"""
LABELS[TWISTED_FLOOR] = "floor client, bare Twisted server"
CODEC_FLOOR = "twisted-codec"
"""
Not chunkwire's server either: the least a Twisted server that reads and writes chunkwire's RPC messages can cost,
called by the blocking client of L{BLOCKING}.  Its server is a bare C{Protocol}, as L{TWISTED_FLOOR}'s, that
decodes each read with chunkwire's own L{framing.Decoder} (the compiled reader on the compiled core), calls
C{echo} for each CALL and encodes its ANSWER with chunkwire's own L{framing.Encoder}, sent with one C{send} as
L{TWISTED_FLOOR}'s are: no broker, no exports, no constraints, no guard, no coalescing transport
(L{CodecFloorServer}).  So its round trip against L{TWISTED_FLOOR}'s is what decoding and encoding the two
messages cost on both sides, and against thriftpy2's whether any Twisted server doing that much can match
thriftpy2 (issue 32).  Sequential only; not measured by default:
C{--peers chunkwire-blocking twisted-codec twisted-floor chunkwire-floor thriftpy2}.
"""
LABELS[CODEC_FLOOR] = "blocking client, bare Twisted server with chunkwire's codec"
WITHOUT_TWISTED = (BLOCKING, ASYNCIO, FLOOR, TWISTED_FLOOR, CODEC_FLOOR)
"""The peers whose client process runs no reactor; their server is chunkwire's (the twisted-floor's a bare one)."""
SEQUENTIAL_ONLY = (FLOOR, TWISTED_FLOOR, CODEC_FLOOR)
"""The peers measured with one call in flight only (their client process refuses a window above 1)."""
THRIFT = "thriftpy2"
"""
thriftpy2 (the C{bench} extra): its Cython binary protocol and buffered transport (its defaults on CPython), the
blocking C{make_client} against its C{TThreadedServer} (a thread per connection), the service of C{echo.thrift}
beside this module.  Thrift has no "any" type, so, as AMP has a command per payload type, it has a method per
payload (C{echoInt}, C{echoBytes}).  A thriftpy2 client is one connection making one call at a time (no request
ids to match answers by), so N calls in flight are N threads, each with a connection of its own, against N
server threads.  The one change from thriftpy2's defaults: the server keeps an idle connection open (its
C{client_timeout} of 3 s would close it while other peers are measured).  No reactor runs in either process.
"""
LABELS[THRIFT] = "thriftpy2 (Cython binary, threaded server)"
GRPC = "grpc-aio"
"""
grpcio's C{grpc.aio} (the C{bench} extra): a C{grpc.aio} server and a C{grpc.aio} channel, C{echo} a unary call,
N in flight N coroutines on the one channel.  No protoc, no generated classes: the service is a generic handler
(C{grpc.method_handlers_generic_handler}) whose request and response serializers are C{msgpack.packb} and
C{msgpack.unpackb}, so a message is one msgpack value (the int, or the bytes) where protobuf would have a message
of one field; msgpack's C encoder costs about what protobuf's does for one field.  The server also has a
server-streaming method, C{Count(n)}, streaming the ints 0..n-1 one message each (the C{stream} command, for
issue 33's comparison: L{tests.benchmarks._grpc_streams}).  No reactor runs in either process.
"""
LABELS[GRPC] = "grpc.aio (msgpack messages)"
FOREIGN = (THRIFT, GRPC)
"""The peers with neither a Twisted server nor a Twisted client (nor chunkwire at all)."""
GRPC_SERVICE = "bench.Echo"
"""The grpc-aio peer's service name: its methods are C{/bench.Echo/Echo} (unary) and C{/bench.Echo/Count} (stream)."""
ALL_PEERS = (*PEERS, LOGIN, BLOCKING, ASYNCIO, FLOOR, TWISTED_FLOOR, CODEC_FLOOR, *FOREIGN)
THRIFT_IDL = Path(__file__).with_name("echo.thrift")
"""The L{THRIFT} peer's service."""
RAW = "raw"
"""Not an RPC peer: bare bytes echoed by a plain Protocol, to measure the link itself."""
LABELS[RAW] = "raw TCP echo (the link itself)"
PAYLOADS: dict[str, Any] = {"int": 42, "kib": bytes(range(256)) * 4}
"""The echoed values: a small int, and 1 KiB of bytes."""

Call = Callable[[Any], Deferred[Any]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (foolscap wants its port up front)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def rss_kib(pid: int | str = "self") -> int | None:
    """The resident set size of process C{pid} in KiB, from /proc."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def malloc_trim() -> None:
    """Hand free heap pages back to the OS (glibc), as a long-running server's allocator eventually does."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


# -- AMP ---------------------------------------------------------------------------------


class EchoInt(amp.Command):
    arguments = [(b"value", amp.Integer())]
    response = [(b"value", amp.Integer())]


class EchoBytes(amp.Command):
    arguments = [(b"value", amp.String())]
    response = [(b"value", amp.String())]


class AMPEcho(amp.AMP):
    @EchoInt.responder
    def echoInt(self, value: int) -> dict[str, int]:
        return {"value": value}

    @EchoBytes.responder
    def echoBytes(self, value: bytes) -> dict[str, bytes]:
        return {"value": value}


def _value(box: dict[str, Any]) -> Any:
    return box["value"]


# -- hand-rolled Int32StringReceiver + msgpack ------------------------------------------------


class HandrolledServer(Int32StringReceiver):
    """C{[id, name, args]} in, C{[id, result]} out; methods looked up in a dict."""

    MAX_LENGTH = 16 * 1024 * 1024

    def __init__(self) -> None:
        import msgpack  # type: ignore[import-untyped]

        self._pack, self._unpack = msgpack.packb, msgpack.unpackb
        self._methods: dict[str, Callable[..., Any]] = {"echo": lambda value: value}

    def stringReceived(self, string: bytes) -> None:
        request_id, name, args = self._unpack(string)
        self.sendString(self._pack([request_id, self._methods[name](*args)]))


class HandrolledClient(Int32StringReceiver):
    """Sends C{[id, name, args]}; a dict of pending Deferreds by id."""

    MAX_LENGTH = 16 * 1024 * 1024

    def __init__(self) -> None:
        import msgpack

        self._pack, self._unpack = msgpack.packb, msgpack.unpackb
        self._ids = itertools.count(1)
        self._pending: dict[int, Deferred[Any]] = {}

    def callRemote(self, name: str, *args: Any) -> Deferred[Any]:
        request_id = next(self._ids)
        d: Deferred[Any] = Deferred()
        self._pending[request_id] = d
        self.sendString(self._pack([request_id, name, args]))
        return d

    def stringReceived(self, string: bytes) -> None:
        request_id, result = self._unpack(string)
        self._pending.pop(request_id).callback(result)


# -- the raw link: 8 bytes echoed, no framing beyond a fixed size ----------------------------


class RawEcho(Protocol):
    def dataReceived(self, data: bytes) -> None:
        self.transport.write(data)


class RawClient(Protocol):
    """Sends each int as 8 bytes; the echo of each 8 bytes answers the oldest call."""

    def __init__(self) -> None:
        self._pending: deque[Deferred[Any]] = deque()
        self._buffer = b""

    def call(self, value: int) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self._pending.append(d)
        self.transport.write(value.to_bytes(8, "big"))
        return d

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= 8:
            value, self._buffer = int.from_bytes(self._buffer[:8], "big"), self._buffer[8:]
            self._pending.popleft().callback(value)


# -- the twisted-floor: pre-encoded answers from a bare Twisted protocol ---------------------------


def floorMessages() -> dict[str, tuple[bytes, bytes]]:
    """
    Per payload kind, the CALL bytes the L{FLOOR} client sends (a fresh client session's first calls, one per
    payload in L{PAYLOADS}' order, as L{floorClientMain} makes them) and the ANSWER bytes that echo it.
    """
    from framing import Encoder, Registry
    from framing.rpc._session import ClientSession
    from framing.rpc._wire import ANSWER, ROOT_ID, Message, addMessageTypes
    from framing.slicing._registry import DEFAULT_REGISTRY

    session: ClientSession[None] = ClientSession("floor")
    registry = Registry(DEFAULT_REGISTRY)
    addMessageTypes(registry)
    encoder = Encoder(registry)
    messages = {}
    for payload, value in PAYLOADS.items():
        requestId, call = session.call(None, ROOT_ID, "echo", (value,), {})
        messages[payload] = (call, encoder.encode(Message((ANSWER, requestId, value))))
    return messages


class StraightSender(Protocol):
    """A floor's server protocol: its answers leave as chunkwire's do (L{_send})."""

    def _send(self, data: bytes) -> None:
        """One C{send} straight to the socket when nothing waits in Twisted's buffer, as chunkwire's Outlet does."""
        from protocols._sockets import sendNow

        rest = sendNow(self.transport, [data], len(data))
        if rest:
            self.transport.write(rest[0])


class TwistedFloorServer(StraightSender):
    """
    The L{TWISTED_FLOOR} peer's server: the preamble, then each known message answered with its bytes.

    A read that is exactly one known message (a sequential client's every read) costs one dict lookup; anything
    else is buffered and split by the known messages' prefixes.  Bytes that begin no known message drop the
    connection (this is a benchmark's peer, not a server: it knows nothing else).
    """

    def __init__(self, answers: dict[bytes, bytes]) -> None:
        """@param answers: each message the client may send, to the bytes that answer it (C{b""}: none)."""
        self._answers = answers
        self._pending = b""

    def connectionMade(self) -> None:
        from framing.wire import PREAMBLE
        from protocols._sockets import setNoDelay

        setNoDelay(self.transport)
        self._send(PREAMBLE)

    def dataReceived(self, data: bytes) -> None:
        if not self._pending:
            answer = self._answers.get(data)
            if answer is not None:
                if answer:
                    self._send(answer)
                return
        pending = self._pending + data
        while pending:
            for message, answer in self._answers.items():
                if pending.startswith(message):
                    if answer:
                        self._send(answer)
                    pending = pending[len(message) :]
                    break
            else:
                if not any(message.startswith(pending) for message in self._answers):
                    self.transport.loseConnection()
                    pending = b""
                break
        self._pending = pending


class CodecFloorServer(StraightSender):
    """
    The L{CODEC_FLOOR} peer's server: the preamble, then each CALL's ANSWER, decoded and encoded by chunkwire's
    codec and nothing else (see L{CODEC_FLOOR}).  Anything but a CALL (the client's preamble is the decoder's)
    is ignored: this is a benchmark's peer, not a server.
    """

    def __init__(self) -> None:
        from framing import Decoder, Encoder, Limits, Registry
        from framing.rpc._wire import addMessageTypes
        from framing.slicing._registry import DEFAULT_REGISTRY

        registry = Registry(DEFAULT_REGISTRY)
        addMessageTypes(registry)
        self._decoder = Decoder(Limits(), registry)
        self._encoder = Encoder(registry)

    def connectionMade(self) -> None:
        from framing.wire import PREAMBLE
        from protocols._sockets import setNoDelay

        setNoDelay(self.transport)
        self._send(PREAMBLE)

    def echo(self, value: Any) -> Any:
        return value

    def dataReceived(self, data: bytes) -> None:
        from framing.rpc._wire import ANSWER, CALL, Message

        encoder, answers = self._encoder, []
        for message in self._decoder.feed(data):
            if type(message) is Message and message[0] == CALL:
                answer = Message((ANSWER, message[1], self.echo(*message[4])))
                # (written whole by the compiled core, as chunkwire's server writes it; the pure core's slicers else)
                tokens = encoder.tokens(answer)
                answers.append(encoder.encode(answer) if tokens is None else tokens)
        if answers:
            self._send(answers[0] if len(answers) == 1 else b"".join(answers))


def twistedFloorFactory() -> Factory:
    """The L{TWISTED_FLOOR} server's factory: the client's preamble unanswered, each floor CALL its ANSWER."""
    from framing.wire import PREAMBLE

    answers = {PREAMBLE: b"", **dict(floorMessages().values())}
    factory = Factory()
    factory.protocol = lambda: TwistedFloorServer(answers)
    return factory


# -- servers ---------------------------------------------------------------------------------


async def listen(reactor: Any, peer: str) -> str:
    """
    Start C{peer}'s echo server on 127.0.0.1 in this process.

    @return: its address: a port number, or foolscap's FURL.
    """
    if peer == TWISTED_FLOOR:
        port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(twistedFloorFactory())
        return str(port.getHost().port)
    if peer == CODEC_FLOOR:
        port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory.forProtocol(CodecFloorServer))
        return str(port.getHost().port)
    if peer in ("chunkwire", *WITHOUT_TWISTED):
        from protocols import rpc

        class EchoRoot(rpc.Referenceable):
            @rpc.remote
            def echo(self, value: Any) -> Any:
                return value

        port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", EchoRoot())
        return str(port.getHost().port)
    if peer == LOGIN:
        return await _listenLogin(reactor)
    if peer == "foolscap":
        return _listenFoolscap()
    factory = _twistedFactory(peer)
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
    return str(port.getHost().port)


async def _listenLogin(reactor: Any) -> str:
    """chunkwire's echo root behind a SCRAM-SHA-256 login (a user file in a temporary directory)."""
    from twisted.cred.portal import IRealm, Portal
    from zope.interface import implementer

    from protocols import rpc
    from protocols.auth._interfaces import IRemoteRoot
    from protocols.auth._users import UserFile, addUser

    class EchoRoot(rpc.Referenceable):
        @rpc.remote
        def echo(self, value: Any) -> Any:
            return value

    @implementer(IRealm)
    class Realm:
        def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
            return IRemoteRoot, EchoRoot(), lambda: None

    work = tempfile.mkdtemp(prefix="chunkwire-bench-login-")
    atexit.register(shutil.rmtree, work, True)  # (the server stops by a signal Twisted handles: atexit runs)
    users = Path(work) / "users"
    addUser(users, LOGIN_USER, LOGIN_PASSWORD, iterations=4096)
    port = await rpc.serve(
        reactor, "tcp:0:interface=127.0.0.1", options=rpc.ServerOptions(portal=Portal(Realm(), [UserFile(users)]))
    )
    return str(port.getHost().port)


def _twistedFactory(peer: str) -> Factory:
    if peer == "amp":
        return Factory.forProtocol(AMPEcho)
    if peer == "handrolled":
        return Factory.forProtocol(HandrolledServer)
    if peer == RAW:
        return Factory.forProtocol(RawEcho)
    if peer == "pb":
        from twisted.spread import pb

        class PBEcho(pb.Root):
            def remote_echo(self, value: Any) -> Any:
                return value

        return pb.PBServerFactory(PBEcho())
    raise ValueError(f"unknown peer {peer!r}")


_KEEP: list[Any] = []  # Tubs must outlive the function that made them.


def _listenFoolscap() -> str:
    from foolscap.api import Referenceable, Tub  # type: ignore[import-untyped]

    class FoolscapEcho(Referenceable):  # type: ignore[misc]
        def remote_echo(self, value: Any) -> Any:
            return value

    port = free_port()
    tub = Tub()
    tub.listenOn(f"tcp:{port}:interface=127.0.0.1")
    tub.setLocation(f"127.0.0.1:{port}")
    tub.startService()
    _KEEP.append(tub)
    furl: str = tub.registerReference(FoolscapEcho(), "echo")
    return furl


# -- clients ------------------------------------------------------------------------------------


class Client:
    """
    A connection to one peer's echo server.

    @ivar calls: payload kind (C{"int"}, C{"kib"}) to a one-argument call.
    @ivar close: closes the connection; may return a Deferred.
    """

    def __init__(self, calls: dict[str, Call], close: Callable[[], Any]) -> None:
        self.calls = calls
        self.close = close


async def connect(reactor: Any, peer: str, address: str) -> Client:
    """Connect to C{peer}'s server at C{address} (a port, or a FURL) on 127.0.0.1."""
    if peer == "chunkwire":
        from protocols import rpc

        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={address}")

        def chunkwire(value: Any) -> Deferred[Any]:
            return root.callRemote("echo", value)

        return Client({"int": chunkwire, "kib": chunkwire}, root.broker.disconnect)
    if peer == LOGIN:
        from twisted.cred.credentials import UsernamePassword

        from protocols import rpc

        credentials = UsernamePassword(LOGIN_USER.encode(), LOGIN_PASSWORD)
        root = await rpc.login(reactor, f"tcp:host=127.0.0.1:port={address}", credentials)

        def loggedIn(value: Any) -> Deferred[Any]:
            return root.callRemote("echo", value)

        return Client({"int": loggedIn, "kib": loggedIn}, root.broker.disconnect)
    if peer == "foolscap":
        return await _connectFoolscap(address)
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", int(address))
    if peer == "amp":
        proto = await connectProtocol(endpoint, amp.AMP())
        calls = {
            "int": lambda value: proto.callRemote(EchoInt, value=value).addCallback(_value),
            "kib": lambda value: proto.callRemote(EchoBytes, value=value).addCallback(_value),
        }
        return Client(calls, proto.transport.loseConnection)
    if peer == "handrolled":
        handrolled = await connectProtocol(endpoint, HandrolledClient())

        def echo(value: Any) -> Deferred[Any]:
            return handrolled.callRemote("echo", value)

        return Client({"int": echo, "kib": echo}, handrolled.transport.loseConnection)
    if peer == "pb":
        return await _connectPB(reactor, address)
    if peer == RAW:
        raw = await connectProtocol(endpoint, RawClient())
        return Client({"int": raw.call}, raw.transport.loseConnection)
    raise ValueError(f"unknown peer {peer!r}")


async def _connectPB(reactor: Any, address: str) -> Client:
    from twisted.spread import pb

    factory = pb.PBClientFactory()
    reactor.connectTCP("127.0.0.1", int(address), factory)
    root = await factory.getRootObject()

    def echo(value: Any) -> Deferred[Any]:
        return root.callRemote("echo", value)

    return Client({"int": echo, "kib": echo}, factory.disconnect)


async def _connectFoolscap(furl: str) -> Client:
    from foolscap.api import Tub

    tub = Tub()
    tub.startService()
    _KEEP.append(tub)
    ref = await tub.getReference(furl)

    def echo(value: Any) -> Deferred[Any]:
        return ref.callRemote("echo", value)  # type: ignore[no-any-return]

    return Client({"int": echo, "kib": echo}, tub.stopService)


# -- the load engine ------------------------------------------------------------------------------


class Load:
    """
    Keep C{window} calls of C{call(value)} in flight until C{total} calls
    were sent or the clock passes C{deadline}, then let the window drain.

    What it records during a run goes into arrays sized in advance, so that
    the run leaves no objects of its own scattered over the heap (they would
    pin allocator arenas and show up as RSS growth).

    @ivar rtts: each answered call's round trip in seconds (if C{keepRtts}).
    @ivar marks: C{perf_counter()} at every C{markEvery}-th answer.
    @ivar samples: C{sample()}'s floats at the start and at every mark, flat.
    @ivar errors: calls that failed or were answered with another value.
    @ivar done: a Deferred firing with this object once every sent call is answered.
    """

    def __init__(
        self,
        call: Call,
        value: Any,
        window: int,
        *,
        total: int | None = None,
        deadline: float | None = None,
        keepRtts: bool = True,
        markEvery: int = 0,
        sample: Callable[[], tuple[float, ...]] | None = None,
    ) -> None:
        self.call, self.value, self.window = call, value, window
        self.total, self.deadline = total, deadline
        self.rtts: array[float] | None = array("d") if keepRtts else None
        self.markEvery = markEvery
        slots = total // markEvery if markEvery and total else 0
        self.marks = array("d", bytes(8 * slots))
        self.sample = sample
        width = len(sample()) if sample is not None else 0
        self.samples = array("d", bytes(8 * width * (slots + 1)))
        self._marked = 0
        self.sent = self.answered = self.errors = 0
        self.started = self.last = 0.0
        self.done: Deferred[Load] = Deferred()

    def start(self) -> Deferred[Load]:
        self._sample(0)
        self.started = self.last = time.perf_counter()
        for _ in range(self.window):
            if not self._more():
                break
            self._send()
        return self.done

    def _sample(self, index: int) -> None:
        if self.sample is not None:
            values = self.sample()
            width = len(values)
            self.samples[index * width : (index + 1) * width] = array("d", values)

    def sampleRows(self) -> list[tuple[float, ...]]:
        """The samples taken, one tuple per mark (the start first)."""
        if self.sample is None:
            return []
        width = len(self.samples) // (len(self.marks) + 1)
        rows = [tuple(self.samples[i : i + width]) for i in range(0, len(self.samples), width)]
        return rows[: self._marked + 1]

    def _more(self) -> bool:
        if self.total is not None and self.sent >= self.total:
            return False
        return self.deadline is None or time.perf_counter() < self.deadline

    def _send(self) -> None:
        self.sent += 1
        self.call(self.value).addCallbacks(self._answer, self._failed, callbackArgs=(time.perf_counter(),))

    def _answer(self, answer: Any, sentAt: float) -> None:
        now = time.perf_counter()
        if answer != self.value:
            self.errors += 1
        self._finished(now, sentAt)

    def _failed(self, failure: Any) -> None:
        self.errors += 1
        self._finished(time.perf_counter(), None)

    def _finished(self, now: float, sentAt: float | None) -> None:
        self.answered += 1
        self.last = now
        if self.rtts is not None and sentAt is not None:
            self.rtts.append(now - sentAt)
        if self.markEvery and self.answered % self.markEvery == 0 and self._marked < len(self.marks):
            self.marks[self._marked] = now
            self._marked += 1
            self._sample(self._marked)
        if self._more():
            self._send()
        elif self.answered == self.sent and not self.done.called:
            self.done.callback(self)

    @property
    def callsPerSecond(self) -> float:
        elapsed = self.last - self.started
        return self.answered / elapsed if elapsed > 0 else 0.0


def summary(load: Load) -> dict[str, Any]:
    """Calls/s and round-trip figures of a finished L{Load}."""
    return figures(load.answered, load.errors, load.last - load.started, load.rtts)


def figures(answered: int, errors: int, seconds: float, rtts: Any) -> dict[str, Any]:
    """Calls/s and round-trip figures of C{answered} calls in C{seconds}, their round trips C{rtts} (or None)."""
    result: dict[str, Any] = {
        "calls_per_s": answered / seconds if seconds > 0 else 0.0,
        "completed": answered,
        "errors": errors,
        "seconds": seconds,
    }
    if rtts:
        ordered = sorted(rtts)
        count = len(ordered)
        result.update(
            rtt_mean_us=sum(ordered) / count * 1e6,
            rtt_p50_us=ordered[count // 2] * 1e6,
            rtt_p99_us=ordered[min(count - 1, int(count * 0.99))] * 1e6,
        )
    return result


async def warmUp(call: Call, value: Any, count: int) -> None:
    """C{count} sequential calls, untimed."""
    for _ in range(count):
        await call(value)


# -- the client process's commands ------------------------------------------------------------------


class Commands:
    """
    What the client process does for each JSON command line:

      - C{{"op": "measure", "payload", "window", "duration", "warmup"}}:
        calls/s and RTTs over C{duration} seconds after C{warmup} sequential calls;
      - C{{"op": "count", "payload", "window", "calls"}}: exactly C{calls}
        calls, for a tracer attached meanwhile; answers only when they are done;
      - C{{"op": "flat", "payload", "window", "calls", "warmup", "settle"}}:
        the flatness run (per-tenth times, RSS of both processes before and after);
      - C{{"op": "rss"}}: both processes' RSS now.
    """

    def __init__(self, reactor: Any, client: Client, serverPid: int) -> None:
        self.reactor, self.client, self.serverPid = reactor, client, serverPid

    async def run(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command["op"]
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise ValueError(f"unknown op {op!r}")
        result: dict[str, Any] = await handler(command)
        return result

    def _call(self, command: dict[str, Any]) -> tuple[Call, Any]:
        kind = command.get("payload", "int")
        return self.client.calls[kind], PAYLOADS[kind]

    async def op_measure(self, command: dict[str, Any]) -> dict[str, Any]:
        call, value = self._call(command)
        await warmUp(call, value, command.get("warmup", 300))
        cpu = (_processCpu(os.getpid()), _processCpu(self.serverPid))
        deadline = time.perf_counter() + command["duration"]
        load = await Load(call, value, command["window"], deadline=deadline).start()
        result = summary(load)
        if load.answered:
            result["client_cpu_us"] = (_processCpu(os.getpid()) - cpu[0]) / load.answered * 1e6
            result["server_cpu_us"] = (_processCpu(self.serverPid) - cpu[1]) / load.answered * 1e6
        return result

    async def op_count(self, command: dict[str, Any]) -> dict[str, Any]:
        call, value = self._call(command)
        load = await Load(call, value, command["window"], total=command["calls"], keepRtts=False).start()
        return summary(load)

    async def op_rss(self, command: dict[str, Any]) -> dict[str, Any]:
        """Both processes' RSS, and this process's allocated blocks (C{sys.getallocatedblocks})."""
        return {
            "client_rss_kib": rss_kib(),
            "server_rss_kib": rss_kib(self.serverPid),
            "client_blocks": sys.getallocatedblocks(),
        }

    async def op_flat(self, command: dict[str, Any]) -> dict[str, Any]:
        """
        The flatness run: RSS and allocated blocks when idle (after
        C{warmup} sequential calls), at the start (after a warm-up of
        C{max(2 * window, 1000)} calls with C{window} in flight, so that
        holding the window has been paid for once), and after C{calls} calls,
        once they are all answered; the calls/s and the CPU time per call
        (client + server) of each tenth, with the CPU the rest of the machine
        used meanwhile.  With C{"again": true} the same calls are made once
        more, untimed, and the RSS after that is reported too, to tell a
        one-time high-water mark from growth with age.
        """
        call, value = self._call(command)
        window, calls = command["window"], command["calls"]
        settle = command.get("settle", 0.5)
        await warmUp(call, value, command.get("warmup", 500))
        idle = await self._settledRss(settle)
        await Load(call, value, window, total=max(2 * window, 1000), keepRtts=False).start()
        before = await self._settledRss(settle)
        load = Load(call, value, window, total=calls, keepRtts=False, markEvery=calls // 10, sample=self._cpuSample)
        await load.start()
        after = await self._settledRss(settle)
        result: dict[str, Any] = {}
        if command.get("again"):
            await Load(call, value, window, total=calls, keepRtts=False).start()
            result["after_again"] = await self._settledRss(settle)
        malloc_trim()
        trimmed = await self.op_rss({})
        edges = [load.started, *load.marks]
        tenth = calls // 10
        samples = load.sampleRows()
        return {
            **summary(load),
            "tenths_calls_per_s": [tenth / (b - a) for a, b in itertools.pairwise(edges)],
            "tenths_cpu_us_per_call": [(b[2] - a[2]) / tenth * 1e6 for a, b in itertools.pairwise(samples)],
            "tenths_others_cpu": [_othersBetween(a, b) for a, b in itertools.pairwise(samples)],
            "tenths_client_rss_kib": [row[3] for row in samples[1:]],
            "idle": idle,
            "before": before,
            "after": after,
            "after_trim": trimmed,
            **result,
        }

    def _cpuSample(self) -> tuple[float, float, float, float]:
        own = _processCpu(os.getpid()) + _processCpu(self.serverPid)
        return (time.monotonic(), _machineBusy(), own, float(rss_kib() or 0))

    async def _settledRss(self, settle: float) -> dict[str, Any]:
        from twisted.internet.task import deferLater

        gc.collect()
        await deferLater(self.reactor, settle)
        return await self.op_rss({})


class _CommandLines(LineReceiver):
    delimiter = b"\n"
    MAX_LENGTH = 1 << 20

    def __init__(self, commands: Commands, finished: Deferred[None]) -> None:
        self.commands, self.finished = commands, finished
        self.queue: Deferred[None] | None = None

    def lineReceived(self, line: bytes) -> None:
        command = json.loads(line)
        if command.get("op") == "quit":
            self.finished.callback(None)
            return
        Deferred.fromCoroutine(self._answer(command))

    async def _answer(self, command: dict[str, Any]) -> None:
        try:
            result = await self.commands.run(command)
        except Exception as error:
            result = {"error": f"{type(error).__name__}: {error}"}
        self.transport.write(json.dumps(result).encode() + b"\n")

    def connectionLost(self, reason: Any = None) -> None:
        if not self.finished.called:
            self.finished.callback(None)


# -- driving the processes from a benchmark (no reactor) -------------------------------------------------


def _processCpu(pid: int) -> float:
    """
    CPU seconds process C{pid} has run so far, all its threads (0 if it is gone).  This process's own: the
    clock (C{time.process_time}, threads that ended included).  Another's: the scheduler's nanosecond counts
    (C{se.sum_exec_runtime} in /proc/PID/task/TID/sched, in ms) summed over its threads, where the kernel has
    them (the time of a thread that ended is then missed: the servers measured keep theirs, a Twisted server
    has one, thriftpy2's one per connection, grpc's a pool), else L{_processTicks}.  (Counting only the main
    thread, as /proc/PID/sched does, would miss a threaded server's work.)
    """
    if pid == os.getpid():
        return time.process_time()
    total, found = 0.0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/sched") as sched:
                for line in sched:
                    if line.startswith("se.sum_exec_runtime"):
                        total += float(line.split(":", 1)[1]) / 1000
                        found = True
                        break
        except (OSError, ValueError):
            continue  # (a thread that ended meanwhile)
    return total if found else _processTicks(pid)


def _processTicks(pid: int) -> float:
    """
    CPU seconds process C{pid} has run so far (0 if it is gone): user + system ticks (10 ms steps) from
    /proc/PID/stat, every thread's, those that ended included.
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machineBusy() -> float:
    """Busy CPU seconds of the whole machine so far, steal included."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in stat.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _othersBetween(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """CPUs busy with other work between two C{(monotonic, machine busy, our processes' CPU)} samples."""
    elapsed = b[0] - a[0]
    return max((b[1] - a[1]) - (b[2] - a[2]), 0.0) / elapsed if elapsed > 0 else 0.0


class OthersCpu:
    """
    How many CPUs, on average while it ran, were busy with anything but the
    processes C{pids} (other programs, the hypervisor's steal): a figure
    above about 0.5 on a 2-CPU machine means the measurement shared it.
    """

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.start = (time.monotonic(), _machineBusy(), sum(_processTicks(pid) for pid in pids))

    def stop(self) -> float:
        wall, busy, ours = (time.monotonic(), _machineBusy(), sum(_processTicks(pid) for pid in self.pids))
        elapsed = wall - self.start[0]
        if elapsed <= 0:
            return 0.0
        return max(busy - self.start[1] - (ours - self.start[2]), 0.0) / elapsed


class PeerFailed(Exception):
    """A peer process exited, answered with an error, or missed its deadline."""


class _Lines:
    """Reads JSON lines from a child's stdout with a deadline (select on the raw pipe)."""

    def __init__(self, process: subprocess.Popen[bytes], what: str) -> None:
        assert process.stdout is not None
        self.process, self.what = process, what
        self.fd = process.stdout.fileno()
        self.pending = b""

    def read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerFailed(f"{self.what}: no answer within {timeout:.0f} s")
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise PeerFailed(f"{self.what} exited (status {self.process.poll()})")
                self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        obj: dict[str, Any] = json.loads(line)
        if "error" in obj:
            raise PeerFailed(f"{self.what}: {obj['error']}")
        return obj


def _childEnv() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


class PeerPair:
    """
    One fresh server process and one fresh client process for C{peer},
    connected; L{command} runs one measurement in the client.  Both
    processes are ended by their ids in L{close}.

    @ivar server: the server's C{Popen}; C{client} likewise.
    @ivar address: the server's port or FURL.
    """

    def __init__(self, peer: str, timeout: float = 30.0) -> None:
        self.peer = peer
        self.server: subprocess.Popen[bytes] | None = None
        self.client: subprocess.Popen[bytes] | None = None
        self._logs = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        try:
            self.server = self._spawn(["serve", peer], self._logs[0], stdin=False)
            started = _Lines(self.server, f"{peer} server").read(timeout)
            self.address = started["address"]
            self.client = self._spawn(["client", peer, self.address, str(self.server.pid)], self._logs[1], stdin=True)
            self._answers = _Lines(self.client, f"{peer} client")
            self._answers.read(timeout)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _spawn(args: list[str], log: Any, stdin: bool) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.benchmarks._rpc_peers", *args],
            cwd=REPO_ROOT,
            env=_childEnv(),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
        )

    @property
    def pids(self) -> list[int]:
        """The server's and the client's process ids."""
        return [p.pid for p in (self.server, self.client) if p is not None]

    def command(self, command: dict[str, Any], timeout: float) -> dict[str, Any]:
        """
        Run C{command} in the client process: its JSON answer, plus
        C{others_cpu} (L{OthersCpu} over the command), or L{PeerFailed}.
        """
        assert self.client is not None and self.client.stdin is not None
        watch = OthersCpu(self.pids)
        try:
            self.client.stdin.write(json.dumps(command).encode() + b"\n")
            self.client.stdin.flush()
            answer = self._answers.read(timeout)
        except (OSError, PeerFailed) as error:
            raise PeerFailed(f"{error}{self._stderrTail()}") from None
        answer["others_cpu"] = watch.stop()
        return answer

    def _stderrTail(self) -> str:
        tails = []
        for log in self._logs:
            log.seek(0)
            lines = log.read().decode(errors="replace").strip().splitlines()[-3:]
            if lines:
                tails.append(" | ".join(lines))
        return ("; stderr: " + " || ".join(tails)) if tails else ""

    def close(self) -> None:
        """End the client (politely, then by force) and the server, by their process ids."""
        client, server = self.client, self.server
        self.client = self.server = None
        if client is not None:
            try:
                assert client.stdin is not None
                client.stdin.write(b'{"op": "quit"}\n')
                client.stdin.close()
                client.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                client.kill()
                client.wait()
        if server is not None:
            endProcess(server)
        for log in self._logs:
            log.close()

    def __enter__(self) -> PeerPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def endProcess(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """End C{process} by its id: politely, then by force after C{timeout} seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ServerProcess:
    """
    Only a fresh server process for C{peer} (the client lives elsewhere,
    e.g. in a benchmark's own reactor); ended by its id in L{close}.

    @ivar address: the server's port or FURL.
    """

    def __init__(self, peer: str, timeout: float = 30.0) -> None:
        self._log = tempfile.TemporaryFile()
        self.process: subprocess.Popen[bytes] | None = PeerPair._spawn(["serve", peer], self._log, stdin=False)
        try:
            self.address: str = _Lines(self.process, f"{peer} server").read(timeout)["address"]
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            endProcess(process)
        self._log.close()


# -- process entry points ------------------------------------------------------------------------------


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serveMain(peer: str) -> None:
    from twisted.internet.task import react

    async def main(reactor: Any) -> None:
        address = await listen(reactor, peer)
        _emit({"address": address, "pid": os.getpid()})
        await Deferred()  # until terminated

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))


def thriftServeMain() -> None:
    """The L{THRIFT} peer's server process: thriftpy2's C{TThreadedServer}, a thread per connection."""
    import thriftpy2
    from thriftpy2.rpc import make_server

    service = thriftpy2.load(str(THRIFT_IDL), module_name="echo_thrift").Echo

    class Handler:
        def echoInt(self, value: int) -> int:
            return value

        def echoBytes(self, value: bytes) -> bytes:
            return value

    port = free_port()
    server = make_server(service, Handler(), "127.0.0.1", port, client_timeout=None)
    server.daemon = True  # (its connection threads end with the process)
    listening = threading.Thread(target=server.serve, daemon=True)
    listening.start()
    _awaitPort(port)
    _emit({"address": str(port), "pid": os.getpid()})
    threading.Event().wait()  # until terminated


def _awaitPort(port: int, timeout: float = 30.0) -> None:
    """Return once something listens on 127.0.0.1:C{port} (a server started in another thread)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def grpcServeMain() -> None:
    """
    The L{GRPC} peer's server process: a C{grpc.aio} server on a plain asyncio loop, with a generic handler
    (no protoc): C{Echo}, unary, answers its request; C{Count(n)}, server-streaming, yields the ints 0..n-1.
    """
    import grpc
    import msgpack

    async def echo(request: Any, context: Any) -> Any:
        return request

    async def count(request: int, context: Any) -> Any:
        for item in range(request):
            yield item

    async def main() -> None:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            GRPC_SERVICE,
            {
                "Echo": grpc.unary_unary_rpc_method_handler(
                    echo, request_deserializer=msgpack.unpackb, response_serializer=msgpack.packb
                ),
                "Count": grpc.unary_stream_rpc_method_handler(
                    count, request_deserializer=msgpack.unpackb, response_serializer=msgpack.packb
                ),
            },
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        _emit({"address": str(port), "pid": os.getpid()})
        await server.wait_for_termination()

    asyncio.run(main())


def clientMain(peer: str, address: str, serverPid: int) -> None:
    from twisted.internet import stdio
    from twisted.internet.task import react

    async def main(reactor: Any) -> None:
        client = await connect(reactor, peer, address)
        _emit({"ready": True, "pid": os.getpid()})
        finished: Deferred[None] = Deferred()
        stdio.StandardIO(_CommandLines(Commands(reactor, client, serverPid), finished), reactor=reactor)
        await finished
        closing = client.close()
        if isinstance(closing, Deferred):
            await closing

    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))


def blockingClientMain(address: str, serverPid: int) -> None:
    """
    The L{BLOCKING} peer's client process: C{protocols.blocking} on a plain loop over stdin's
    commands (C{measure} and C{count}; N in flight is N threads making sequential calls on its one connection).
    """
    from protocols.blocking import connect

    with connect(("127.0.0.1", int(address)), options=ClientOptions(timeout=30.0)) as connection:
        echo = functools.partial(connection.root.callRemote, "echo")
        _emit({"ready": True, "pid": os.getpid()})
        for line in sys.stdin:
            command = json.loads(line)
            if command.get("op") == "quit":
                break
            _emit(_threadedCommand(lambda slot, payload: echo, command, serverPid))


def floorClientMain(address: str, serverPid: int) -> None:
    """
    The L{FLOOR} and L{TWISTED_FLOOR} peers' client process: C{measure} and C{count} with the least a call can
    cost (see L{FLOOR}), one call in flight (the answers carry no request id it could match them by).
    """
    from framing.rpc._session import ClientSession
    from framing.rpc._wire import ROOT_ID

    def connectOne() -> dict[str, tuple[Callable[[bytes], None], Callable[[int], bytes], bytes, bytes]]:
        sock = socket.create_connection(("127.0.0.1", int(address)), timeout=30.0)
        sock.settimeout(None)  # (blocking: a send or a read is one system call, with no poll() before it)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session: ClientSession[None] = ClientSession("floor")
        sock.sendall(session.start())
        while not session.ready:
            session.receive(sock.recv(65536))
        messages = {}
        for payload, value in PAYLOADS.items():
            _, call = session.call(None, ROOT_ID, "echo", (value,), {})
            sock.sendall(call)
            answer, settled = b"", []
            while not settled:
                chunk = sock.recv(65536)
                answer += chunk
                settled = session.receive(chunk)
            if settled[0][1:] != (value, None):
                raise ValueError(f"the server answered echo({payload}) with {settled[0][1:]}")
            messages[payload] = (sock.sendall, sock.recv, call, answer)
        return messages

    messages = connectOne()

    def callFor(slot: int, payload: str) -> Callable[[Any], Any]:
        sendall, recv, call, answer = messages[payload]
        size, wanted = len(answer), PAYLOADS[payload]

        def floor(value: Any) -> Any:
            sendall(call)
            data = recv(65536)
            while len(data) < size:
                data += recv(65536)
            return wanted if data == answer else None

        return floor

    _emit({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("op") == "quit":
            break
        if command.get("window", 1) != 1:
            _emit({"error": "the floor makes one call at a time"})
            continue
        _emit(_threadedCommand(callFor, command, serverPid))


def thriftClientMain(address: str, serverPid: int) -> None:
    """
    The L{THRIFT} peer's client process: thriftpy2's blocking client on a plain loop over stdin's commands
    (C{measure} and C{count}; N in flight is N threads, each with a connection of its own, made before the
    timed part and kept for the next commands).
    """
    import thriftpy2
    from thriftpy2.rpc import make_client

    service = thriftpy2.load(str(THRIFT_IDL), module_name="echo_thrift").Echo
    clients: list[Any] = []

    def callFor(slot: int, payload: str) -> Callable[[Any], Any]:
        client = clients[slot]
        return client.echoInt if payload == "int" else client.echoBytes

    try:
        clients.append(make_client(service, "127.0.0.1", int(address), timeout=30_000))
        _emit({"ready": True, "pid": os.getpid()})
        for line in sys.stdin:
            command = json.loads(line)
            if command.get("op") == "quit":
                break
            while len(clients) < command.get("window", 1):
                clients.append(make_client(service, "127.0.0.1", int(address), timeout=30_000))
            _emit(_threadedCommand(callFor, command, serverPid))
    finally:
        for client in clients:
            client.close()


def asyncioClientMain(address: str, serverPid: int) -> None:
    """
    The L{ASYNCIO} peer's client process: C{protocols.asyncioclient} on a plain asyncio loop, each stdin
    command run to its end on it (C{measure} and C{count}; N in flight is N coroutines making sequential calls).
    """
    from protocols.asyncioclient import connect

    loop = asyncio.new_event_loop()
    connection = loop.run_until_complete(connect(("127.0.0.1", int(address)), options=ClientOptions(timeout=30.0)))
    echo = functools.partial(connection.root.callRemote, "echo")
    _emit({"ready": True, "pid": os.getpid()})
    try:
        for line in sys.stdin:
            command = json.loads(line)
            if command.get("op") == "quit":
                break
            _emit(loop.run_until_complete(_concurrentCommand(lambda slot, payload: echo, command, serverPid)))
    finally:
        loop.run_until_complete(connection.close())
        loop.close()


def grpcClientMain(address: str, serverPid: int) -> None:
    """
    The L{GRPC} peer's client process: one C{grpc.aio} channel on a plain asyncio loop, each stdin command run
    to its end on it: C{measure} and C{count} (N in flight is N coroutines making sequential unary calls), and
    C{{"op": "stream", "items": N}}, one server-streaming call of N ints (L{_grpcStream}).
    """
    import grpc
    import msgpack

    async def start() -> Any:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{address}")
        await asyncio.wait_for(channel.channel_ready(), 30.0)
        return channel

    loop = asyncio.new_event_loop()
    channel = loop.run_until_complete(start())
    echo = channel.unary_unary(
        f"/{GRPC_SERVICE}/Echo", request_serializer=msgpack.packb, response_deserializer=msgpack.unpackb
    )
    count = channel.unary_stream(
        f"/{GRPC_SERVICE}/Count", request_serializer=msgpack.packb, response_deserializer=msgpack.unpackb
    )
    _emit({"ready": True, "pid": os.getpid()})
    try:
        for line in sys.stdin:
            command = json.loads(line)
            if command.get("op") == "quit":
                break
            if command.get("op") == "stream":
                _emit(loop.run_until_complete(_grpcStream(count, command["items"], serverPid)))
            else:
                _emit(loop.run_until_complete(_concurrentCommand(lambda slot, payload: echo, command, serverPid)))
    finally:
        loop.run_until_complete(channel.close())
        loop.close()


async def _grpcStream(count: Any, items: int, serverPid: int) -> dict[str, Any]:
    """
    One server-streaming call of C{items} ints, iterated with C{async for}: items/s from the call to the last
    item, each item checked (C{errors}: items out of order, or missing at the end), CPU per item of both sides.
    """
    cpu = (_processCpu(os.getpid()), _processCpu(serverPid))
    started = time.perf_counter()
    expected = errors = 0
    async for item in count(items):
        if item != expected:
            errors += 1
        expected += 1
    seconds = time.perf_counter() - started
    errors += abs(items - expected)
    return {
        "items": expected,
        "errors": errors,
        "seconds": seconds,
        "items_per_s": expected / seconds if seconds > 0 else 0.0,
        "client_cpu_us": (_processCpu(os.getpid()) - cpu[0]) / max(expected, 1) * 1e6,
        "server_cpu_us": (_processCpu(serverPid) - cpu[1]) / max(expected, 1) * 1e6,
    }


class _Measurement:
    """
    One C{measure} or C{count} command of a client without a reactor: its calls' round trips per slot
    (a thread, a coroutine), and the figures at the end; how the slots wait is the client's.
    """

    def __init__(self, command: dict[str, Any], serverPid: int) -> None:
        if command["op"] not in ("measure", "count"):
            raise ValueError(f"this client runs measure and count, not {command['op']!r}")
        self.serverPid = serverPid
        self.value = PAYLOADS[command.get("payload", "int")]
        self.warmup = command.get("warmup", 0)
        self.window = command["window"]
        total = command.get("calls")
        self.share = None if total is None else total // self.window
        self.duration = command.get("duration")
        self.rtts: list[array[float]] = [array("d") for _ in range(self.window)]
        self.errors = [0] * self.window

    def start(self) -> None:
        """The timed part begins (after the warm-up)."""
        self.started = time.perf_counter()
        self.deadline = None if self.duration is None else self.started + self.duration
        self.cpu = (_processCpu(os.getpid()), _processCpu(self.serverPid))

    def more(self, made: int) -> bool:
        """Whether a slot that made C{made} calls makes another."""
        return (self.share is None or made < self.share) and (
            self.deadline is None or time.perf_counter() < self.deadline
        )

    def result(self) -> dict[str, Any]:
        """The figures of the timed part."""
        seconds = time.perf_counter() - self.started
        every = array("d", itertools.chain.from_iterable(self.rtts))
        result = figures(len(every), sum(self.errors), seconds, every)
        if every:
            result["client_cpu_us"] = (_processCpu(os.getpid()) - self.cpu[0]) / len(every) * 1e6
            result["server_cpu_us"] = (_processCpu(self.serverPid) - self.cpu[1]) / len(every) * 1e6
        return result


SlotCall = Callable[[int, str], Callable[[Any], Any]]
"""C{callFor(slot, payload)}: the one-argument call that slot C{slot} (a thread, a coroutine) makes for C{payload}."""


def _threadedCommand(callFor: SlotCall, command: dict[str, Any], serverPid: int) -> dict[str, Any]:
    """One C{measure} or C{count} command, run with blocking calls (a thread per call in flight)."""
    measurement = _Measurement(command, serverPid)
    value = measurement.value
    payload = command.get("payload", "int")
    first = callFor(0, payload)
    for _ in range(measurement.warmup):
        first(value)
    measurement.start()

    def calls(slot: int) -> None:
        own, errors, more, clock, made, call = (
            measurement.rtts[slot],
            measurement.errors,
            measurement.more,
            time.perf_counter,
            0,
            callFor(slot, payload),
        )
        while more(made):
            sentAt = clock()
            if call(value) != value:
                errors[slot] += 1
            own.append(clock() - sentAt)
            made += 1

    if measurement.window == 1:
        calls(0)
    else:
        threads = [threading.Thread(target=calls, args=(slot,)) for slot in range(measurement.window)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return measurement.result()


async def _concurrentCommand(callFor: SlotCall, command: dict[str, Any], serverPid: int) -> dict[str, Any]:
    """One C{measure} or C{count} command, run with awaited calls (a coroutine per call in flight)."""
    measurement = _Measurement(command, serverPid)
    value = measurement.value
    payload = command.get("payload", "int")
    first = callFor(0, payload)
    for _ in range(measurement.warmup):
        await first(value)
    measurement.start()

    async def calls(slot: int) -> None:
        own, errors, more, clock, made, call = (
            measurement.rtts[slot],
            measurement.errors,
            measurement.more,
            time.perf_counter,
            0,
            callFor(slot, payload),
        )
        while more(made):
            sentAt = clock()
            if await call(value) != value:
                errors[slot] += 1
            own.append(clock() - sentAt)
            made += 1

    await asyncio.gather(*(calls(slot) for slot in range(measurement.window)))
    return measurement.result()


def main(argv: list[str]) -> None:
    if argv == ["serve", THRIFT]:
        thriftServeMain()
    elif argv == ["serve", GRPC]:
        grpcServeMain()
    elif argv[:1] == ["serve"] and len(argv) == 2:
        serveMain(argv[1])
    elif argv[:2] in (["client", FLOOR], ["client", TWISTED_FLOOR]) and len(argv) == 4:
        floorClientMain(argv[2], int(argv[3]))
    elif argv[:2] == ["client", THRIFT] and len(argv) == 4:
        thriftClientMain(argv[2], int(argv[3]))
    elif argv[:2] == ["client", GRPC] and len(argv) == 4:
        grpcClientMain(argv[2], int(argv[3]))
    elif argv[:2] in (["client", BLOCKING], ["client", CODEC_FLOOR]) and len(argv) == 4:
        blockingClientMain(argv[2], int(argv[3]))
    elif argv[:2] == ["client", ASYNCIO] and len(argv) == 4:
        asyncioClientMain(argv[2], int(argv[3]))
    elif argv[:1] == ["client"] and len(argv) == 4:
        clientMain(argv[1], argv[2], int(argv[3]))
    else:
        raise SystemExit("usage: _rpc_peers serve PEER | client PEER ADDRESS SERVER_PID")


if __name__ == "__main__":
    main(sys.argv[1:])
