"""A hostile chunkwire server: each behaviour of the catalogue, on a plain socket bound to port 0.

Contract: L{HostileServer} listens on 127.0.0.1, port 0, and serves every
connection it accepts with one behaviour of L{BEHAVIOURS}, on a thread of
its own, until L{HostileServer.stop}.  It speaks just enough of
docs/wire-format.md (the preamble, section 2; RPC messages, section 12;
object streams, section 14) to be the server a client believes it talks
to, and then misbehaves:

 - C{silent}: accepts, sends nothing, reads nothing.
 - C{dripping}: the preamble, then an ANSWER to the first call, one byte at
   a time, L{Scale.drip} seconds apart (never finished in a call's time).
 - C{garbage}: the preamble, then, once the first call is read, bytes that
   are no token (kind F is reserved: a ProtocolError).
 - C{garbage-preamble}: an HTTP response where the preamble should be.
 - C{huge}: every call answered with a BYTES of exactly the client's
   largest (L{Scale.bytes}); C{huge-past}: one byte past it, body and all.
 - C{flood}: the preamble, then CALLs to the client's root and PINGs as
   fast as the socket takes them, reading nothing: the client's FAILs and
   PONGs pile up on its side.
 - C{stalled-stream}: every call answered with an object stream
   (C{rpc.stream}); after the client's CREDIT, L{STALLED_ITEMS} items,
   then nothing more, while PINGs are still answered (the peer is alive).
 - C{largest-items}: each call answered with one value at its kind's
   largest size under L{Scale}'s limits, by the method's name: C{bytes},
   C{str}, C{memoryview} (a C{memoryview} BYTES body), C{list} and
   C{dict} (as many items, or entries, as the message may hold:
   L{Scale.containerItems}); any other method with the largest BYTES.

Every wait is bounded by the server's stop; a client that closes ends its
connection's thread.  The messages are built with L{framing}'s L{Encoder}
where they are small, and by hand (headers from L{encode_header}, the body
sent from one shared buffer) where they are large, so that a 256 MiB answer
costs the server one buffer, not one copy per answer.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from zope.interface import implementer

from framing import Decoder, Encoder, Limits, Registry
from framing._decoder import Ping
from framing.rpc._streams import CREDIT, ITEM, FlowMessage, addFlowTypes
from framing.rpc._wire import ANSWER, CALL, OPEN_TYPE, Message, addMessageTypes
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import BYTES, CLOSE, INT, OPEN, PING, PONG, PREAMBLE, STRING, encode_header

MiB = 1 << 20

REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)
addFlowTypes(REGISTRY)

STALLED_ITEMS = 3
"""Items a stalled stream sends before it stalls."""

READ_LIMITS = Limits(max_bytes_length=64 * MiB, max_buffered_bytes=64 * MiB)
"""What the hostile server accepts from a client (its calls are small; the interop client's largest is 4 MiB)."""


@dataclass(frozen=True)
class Scale:
    """
    How large and how slow the catalogue runs: the short form's in the
    default run, the full campaign's in C{dev.py attack}.

    @ivar bytes: the largest BYTES body the clients accept (their
        C{Limits.max_bytes_length}); C{huge} answers with exactly this.
    @ivar string: the largest STRING body they accept.
    @ivar items: the most items a container holds (C{Limits.max_items}).
    @ivar drip: seconds between two bytes of C{dripping}.
    """

    bytes: int
    string: int
    items: int
    drip: float

    @property
    def containerItems(self) -> int:
        """
        The most items (a dict's entries) one container in an ANSWER may
        hold: C{items} less the message's own three (its tag, request id
        and result), which count towards the object's C{max_object_items}.
        """
        return self.items - 3

    def limits(self) -> Limits:
        """The clients' limits at this scale (the interop client, which takes none, keeps its defaults)."""
        return Limits(
            max_bytes_length=self.bytes,
            max_string_length=self.string,
            max_items=self.items,
            max_object_items=self.items,
        )


SHORT = Scale(bytes=8 * MiB, string=4 * MiB, items=64 * 1024, drip=0.25)
"""The default run's: every case a few seconds."""

FULL = Scale(bytes=Limits().max_bytes_length, string=Limits().max_string_length, items=Limits().max_items, drip=0.5)
"""The full campaign's: the clients' default limits (256 MiB BYTES, 16 MiB STRING, 1 Mi items)."""


def _open(name: str) -> bytes:
    return encode_header(OPEN, len(name)) + name.encode("ascii")


_CLOSE = encode_header(CLOSE, 0)


def answerHead(requestId: int) -> bytes:
    """OPEN C{"rpc"}, ANSWER, the request id: what precedes an ANSWER's result (then the result, then CLOSE)."""
    return _open(OPEN_TYPE) + encode_header(INT, ANSWER) + encode_header(INT, requestId)


@dataclass
class Connection:
    """One accepted connection, as a behaviour sees it."""

    sock: socket.socket
    scale: Scale
    stopping: threading.Event
    encoder: Encoder = field(default_factory=lambda: Encoder(REGISTRY))
    decoder: Decoder = field(default_factory=lambda: Decoder(READ_LIMITS, REGISTRY))
    sent: int = 0

    def send(self, data: bytes | memoryview) -> None:
        """Send C{data} whole, or give up once the server stops (a client that never reads)."""
        view = memoryview(data)
        while view:
            if self.stopping.is_set():
                raise ConnectionAbortedError("the hostile server stopped")
            try:
                count = self.sock.send(view)
            except TimeoutError:
                continue
            view = view[count:]
            self.sent += count

    def message(self, obj: Any) -> None:
        """Send one object, encoded."""
        self.send(self.encoder.encode(obj))

    def messages(self) -> Iterator[Any]:
        """
        What the client sends, decoded: each top-level object, and a L{Ping}
        for each PING; ends when the client closes or the server stops.
        """
        while not self.stopping.is_set():
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            try:
                objects = self.decoder.feed(chunk)
            except Exception:
                return  # (the client broke the stream: nothing more to read from it)
            events, self.decoder.control_events[:] = list(self.decoder.control_events), []
            yield from events
            yield from objects

    def calls(self) -> Iterator[Message]:
        """The client's CALLs (PINGs answered with their PONGs on the way)."""
        for obj in self.messages():
            if isinstance(obj, Ping):
                self.send(encode_header(PONG, obj.id))
            elif type(obj) is Message and obj[0] == CALL:
                yield obj

    def idle(self) -> None:
        """Hold the connection open, reading and dropping what comes, until the client closes or the server stops."""
        for obj in self.messages():
            if isinstance(obj, Ping):
                self.send(encode_header(PONG, obj.id))


def silent(connection: Connection) -> None:
    """Accept, send nothing, read nothing, until the server stops."""
    connection.stopping.wait()


def dripping(connection: Connection) -> None:
    """The preamble and then an ANSWER to call 1 whose string never ends, a byte every C{scale.drip} seconds."""
    body = answerHead(1) + encode_header(STRING, 1 << 20)
    data = PREAMBLE + body
    index = 0
    while not connection.stopping.wait(connection.scale.drip):
        connection.send(data[index : index + 1] if index < len(data) else b"x")
        index += 1


def garbage(connection: Connection) -> None:
    """The preamble; at the first call, a run of reserved-kind headers (no token: a ProtocolError)."""
    connection.send(PREAMBLE)
    for _call in connection.calls():
        connection.send(b"\xf0\xff\xee\x00" * 64)
        break
    connection.idle()


def garbagePreamble(connection: Connection) -> None:
    """An HTTP response where the preamble should be."""
    connection.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    connection.idle()


_BUFFERS: dict[int, bytes] = {}
_BUFFERS_LOCK = threading.Lock()


def zeros(size: int) -> bytes:
    """One shared buffer of C{size} bytes (made once per size in this process)."""
    with _BUFFERS_LOCK:
        if size not in _BUFFERS:
            _BUFFERS[size] = b"\x00" * size
        return _BUFFERS[size]


@functools.lru_cache(maxsize=4)
def dictEntries(count: int) -> bytes:
    """
    A dict's C{count} entries: distinct keys 0 .. count - 1 (INTs), each
    value 0 (an entry counts as one item).  Made once per size in this
    process (the full campaign's million take the server's thread seconds,
    holding the interpreter's lock the other rows' servers need).
    """
    return b"".join(encode_header(INT, key) + b"\x00" for key in range(count))


def _answerBytes(connection: Connection, requestId: int, size: int, wrapper: str | None = None) -> None:
    head = answerHead(requestId) + (_open(wrapper) if wrapper else b"")
    buffer = zeros(max(size, 1))
    connection.send(head + encode_header(BYTES, size))
    connection.send(memoryview(buffer)[:size])
    connection.send(_CLOSE * (2 if wrapper else 1))


def huge(connection: Connection) -> None:
    """Each call answered with a BYTES of exactly the clients' largest."""
    connection.send(PREAMBLE)
    for call in connection.calls():
        _answerBytes(connection, call[1], connection.scale.bytes)
    connection.idle()


def hugePast(connection: Connection) -> None:
    """Each call answered with a BYTES one byte past the clients' largest, body and all."""
    connection.send(PREAMBLE)
    for call in connection.calls():
        _answerBytes(connection, call[1], connection.scale.bytes + 1)
    connection.idle()


def flood(connection: Connection) -> None:
    """
    The preamble, then CALLs (target 0, the client's root, which exports
    nothing there: each earns a FAIL) and PINGs (each earns a PONG), as
    fast as the socket takes them, forever; nothing is ever read.
    """
    connection.send(PREAMBLE)
    requestId = 1
    while not connection.stopping.is_set():
        batch = []
        for _ in range(256):
            batch.append(connection.encoder.encode(Message((CALL, requestId, 0, "x", None))))
            batch.append(encode_header(PING, requestId))
            requestId += 1
        try:
            connection.send(b"".join(batch))
        except (ConnectionAbortedError, OSError):
            return


class StreamAnnouncement(tuple):  # type: ignore[type-arg]
    """C{(streamId,)}: written as OPEN C{"rpc.stream"} INT CLOSE (wire-format section 14.1)."""

    __slots__ = ()


@implementer(ISlicer)
class _AnnouncementSlicer:
    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container("rpc.stream", obj, obj)


REGISTRY.add_slicer(StreamAnnouncement, _AnnouncementSlicer())


def stalledStream(connection: Connection) -> None:
    """
    Each call answered with a stream; at the client's first CREDIT for it,
    L{STALLED_ITEMS} items, then nothing for that stream ever again (PINGs
    still answered).
    """
    connection.send(PREAMBLE)
    streamId = 0
    fed: set[int] = set()
    for obj in connection.messages():
        if isinstance(obj, Ping):
            connection.send(encode_header(PONG, obj.id))
        elif type(obj) is Message and obj[0] == CALL:
            streamId += 1
            connection.message(Message((ANSWER, obj[1], StreamAnnouncement((streamId,)))))
        elif type(obj) is FlowMessage and obj[0] == CREDIT and obj[2] >= STALLED_ITEMS and obj[1] not in fed:
            fed.add(obj[1])
            connection.message(FlowMessage((ITEM, obj[1], *[f"item {n}" for n in range(STALLED_ITEMS)])))


def largestItems(connection: Connection) -> None:
    """Each call answered, by its method's name, with one value at its kind's largest size."""
    scale = connection.scale
    connection.send(PREAMBLE)
    for call in connection.calls():
        requestId, name = call[1], call[3]
        if name == "bytes":
            _answerBytes(connection, requestId, scale.bytes)
        elif name == "memoryview":
            _answerBytes(connection, requestId, scale.bytes, wrapper="memoryview")
        elif name == "str":
            connection.send(answerHead(requestId) + encode_header(STRING, scale.string))
            connection.send(memoryview(b"s" * scale.string))
            connection.send(_CLOSE)
        elif name == "list":
            connection.send(answerHead(requestId) + _open("list") + bytes(scale.containerItems) + _CLOSE + _CLOSE)
        elif name == "dict":
            connection.send(answerHead(requestId) + _open("dict") + dictEntries(scale.containerItems) + _CLOSE + _CLOSE)
        else:
            _answerBytes(connection, requestId, scale.bytes)  # (any other method: the largest BYTES too)
    connection.idle()


@dataclass(frozen=True)
class Behaviour:
    """
    One hostile behaviour: how it serves a connection, and what a client
    must see.

    @ivar calls: the methods the driver calls, in order, on one connection.
    @ivar answers: C{None}: every step must fail with a typed error; else
        the calls whose answer is acceptable, each with what it must be
        (C{"bytes:N"}, C{"str:N"}, C{"list:N"}, C{"dict:N"}, or C{"stream"}),
        where a typed L{framing.Violation} (this side's budget refusing it)
        is acceptable too.
    @ivar streamItems: a stream result's items before the stall (C{None}: no stream).
    @ivar answerBytes: the bytes of its largest answer, which the client's memory bound allows for.
    @ivar receiveBuffer: the listening socket's C{SO_RCVBUF}, if set: small, the kernel holds little of
        what the client sends before the client's own sends block.
    @ivar interopPasses: the interop cases (docs/interop.md) the interop client may see pass against it,
        because the behaviour really does what the case checks; any other case's pass is the client fooled.
    """

    serve: Callable[[Connection], None]
    calls: tuple[str, ...] = ("hostile",)
    answers: Callable[[Scale], dict[str, str]] | None = None
    streamItems: int | None = None
    answerBytes: Callable[[Scale], int] = lambda scale: 0
    receiveBuffer: int | None = None
    interopPasses: frozenset[str] = frozenset()


ANSWERS_PINGS = frozenset({"ping"})
"""
The interop case a behaviour that reads and answers PINGs lets pass: C{ping}
"must observe the PONG of the same id" (docs/interop.md), and L{Connection.calls}
and L{Connection.idle} send exactly that.  Not so C{silent}, C{dripping} and
C{flood} (nothing read) nor C{garbage-preamble} (no connection is ever made).
"""


def _largestAnswers(scale: Scale) -> dict[str, str]:
    return {
        "bytes": f"bytes:{scale.bytes}",
        "memoryview": f"bytes:{scale.bytes}",
        "str": f"str:{scale.string}",
        "list": f"list:{scale.containerItems}",
        "dict": f"dict:{scale.containerItems}",
    }


BEHAVIOURS: dict[str, Behaviour] = {
    "silent": Behaviour(silent),
    "dripping": Behaviour(dripping),
    "garbage": Behaviour(garbage, interopPasses=ANSWERS_PINGS),
    "garbage-preamble": Behaviour(garbagePreamble),
    "huge": Behaviour(
        huge,
        answers=lambda scale: {"hostile": f"bytes:{scale.bytes}"},
        answerBytes=lambda scale: scale.bytes,
        interopPasses=ANSWERS_PINGS,
    ),
    "huge-past": Behaviour(hugePast, answerBytes=lambda scale: scale.bytes, interopPasses=ANSWERS_PINGS),
    "flood": Behaviour(flood, receiveBuffer=4096),
    "stalled-stream": Behaviour(
        stalledStream,
        answers=lambda scale: {"hostile": "stream"},
        streamItems=STALLED_ITEMS,
        interopPasses=ANSWERS_PINGS,
    ),
    "largest-items": Behaviour(
        largestItems,
        calls=("bytes", "memoryview", "str", "list", "dict"),
        answers=_largestAnswers,
        answerBytes=lambda scale: max(scale.bytes, scale.string, 10 * scale.items),
        interopPasses=ANSWERS_PINGS,
    ),
}
"""The catalogue, by name."""


class HostileServer:
    """A listening socket on 127.0.0.1, port 0, serving each connection with one behaviour on its own thread."""

    def __init__(self, name: str, scale: Scale) -> None:
        self.name = name
        self.behaviour = BEHAVIOURS[name]
        self.scale = scale
        self.listener = socket.socket()
        if self.behaviour.receiveBuffer is not None:
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.behaviour.receiveBuffer)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self.port = int(self.listener.getsockname()[1])
        self.stopping = threading.Event()
        self.accepted = 0
        self.errors: list[BaseException] = []
        self._connections: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name=f"hostile-{name}", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(0.2)  # (each send and read looks at the stop this often)
            self.accepted += 1
            self._connections.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        connection = Connection(sock, self.scale, self.stopping)
        try:
            self.behaviour.serve(connection)
        except (ConnectionAbortedError, ConnectionResetError, BrokenPipeError):
            pass  # (the client went away, or the server stopped)
        except BaseException as error:
            self.errors.append(error)
        finally:
            if not self.stopping.is_set():
                # The client is gone: wait for the stop before closing, so a behaviour's end is never a close.
                self.stopping.wait()
            sock.close()

    def stop(self) -> None:
        """Stop accepting, end every connection's thread and close its socket (within a few seconds)."""
        self.stopping.set()
        self.listener.close()
        self._acceptor.join(5)
        deadline = time.monotonic() + 10
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
