"""The worked uploads of the wire format's file service section, generated from the implementation.

Contract: L{vectorFile} drives a real client and a real file service over
an in-memory connection, on a test clock, with fixed settings (100-byte
frames, a 100-byte initial window, SHA-256 only), and returns what each
side wrote, message by message, as C{tests/vectors/bulk_upload.json}
holds it; L{render} turns one exchange into the annotated hex block that
C{docs/wire-format.md} shows.  Nothing in it depends on time, the machine
or the codec core: the same bytes come out every run.

Run C{python -m tests.protocols.bulk.uploadvector} to write the vector
file again and print the blocks for the spec (after a deliberate change of
the wire format only).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from framing.bulk._wire import OP_NAMES
from framing.wire import BODY_KINDS, BYTES, CLOSE, INT, KIND_NAMES, NEG, OPEN, PREAMBLE, SIMPLE, STRING, decode_header
from protocols.bulk import BulkOptions, Stream
from protocols.bulk._files import BulkService
from protocols.rpc import Broker
from protocols.testing import MemoryPair

VECTOR_PATH = Path(__file__).resolve().parents[2] / "vectors" / "bulk_upload.json"

OPTIONS = BulkOptions(
    chunkSize=100,
    window=200,
    maxWindow=0,
    grantStep=100,
    initialWindow=100,
    digests=("sha256",),
    hashing="inline",
    readSize=None,
    sendLimit=None,
)
"""Both sides' settings: 100-byte frames, a 100-byte initial window, SHA-256
only, no autotuning (a receiver hashing inline halves its 200-byte window)."""

NAME = "example.bin"
VERSION = "300-1700000000000000000"
"""The client's version token of its file (opaque to the service)."""
CONTENT = bytes(i % 256 for i in range(300))
"""The file: 300 bytes, byte i being i mod 256."""
HELD_BEFORE = 200
"""Bytes of the resumed upload that an earlier connection delivered."""

DESCRIPTION = (
    "Worked uploads to the bulk file service (docs/wire-format.md, section 5.5), generated from the"
    " implementation: each exchange is one connection, as {name, note, messages, client, server}."
    " 'messages' lists every message in the order it was written, as {from, what, hex} ('from' is"
    " 'client' or 'server'; the preamble is a message here); 'client' and 'server' are each side's"
    " whole stream, preamble included.  The file is 'file.size' bytes, byte i being i mod 256."
)


# -- driving a client and a service ---------------------------------------------------------------


class Recorded:
    """
    A client and a file service joined in memory, every write of either
    side recorded in order.

    @ivar writes: C{(side, bytes)} per write, C{side} being C{"client"} or C{"server"}.
    """

    def __init__(self, service: BulkService, clock: Clock) -> None:
        self.clock = clock
        self.writes: list[tuple[str, bytes]] = []
        self.server = Broker(service, clock=clock, bulk=OPTIONS)
        self.client = Broker(clock=clock, bulk=OPTIONS)
        self.pair = MemoryPair(self.server, self.client)
        self._record(self.pair.serverTransport, "server")
        self._record(self.pair.clientTransport, "client")
        self.pair.serverTransport.protocol.makeConnection(self.pair.serverTransport)
        self.pair.clientTransport.protocol.makeConnection(self.pair.clientTransport)
        self.root = self.client.rootReference()

    def _record(self, transport: Any, side: str) -> None:
        write, writeSequence = transport.write, transport.writeSequence

        def recordingWrite(data: bytes) -> None:
            self.writes.append((side, bytes(data)))
            write(data)

        def recordingWriteSequence(data: Any) -> None:
            pieces = list(data)
            self.writes.append((side, b"".join(pieces)))
            writeSequence(pieces)

        transport.write = recordingWrite
        transport.writeSequence = recordingWriteSequence

    def call(self, method: str, *args: Any) -> Any:
        """Call C{method} on the service, deliver everything, and return its result (raising its failure)."""
        done: Deferred[Any] = self.root.callRemote(method, *args)
        results: list[Any] = []
        done.addBoth(results.append)
        for _ in range(10_000):
            self.clock.advance(0)
            if not self.pair.pump() and results:
                break
        else:
            raise RuntimeError(f"{method} did not finish")
        (result,) = results
        if hasattr(result, "raiseException"):
            result.raiseException()
        return result

    def close(self) -> None:
        """Close the connection from the client's side and deliver what that brings."""
        self.pair.clientTransport.loseConnection()
        self.pair.flush()

    def messages(self) -> list[dict[str, str]]:
        """Every message written, in order, as C{{from, what, hex}} (each side's preamble first)."""
        listed: list[dict[str, str]] = []
        for side, data in self.writes:
            if data.startswith(PREAMBLE):
                listed.append({"from": side, "what": "preamble", "hex": PREAMBLE.hex()})
                data = data[len(PREAMBLE) :]
            for message in splitMessages(data):
                listed.append({"from": side, "what": summary(message), "hex": message.hex()})
        return listed


def exchange(name: str, note: str, recorded: Recorded) -> dict[str, Any]:
    """The vector of one recorded connection."""
    messages = recorded.messages()
    streams = {
        side: "".join(message["hex"] for message in messages if message["from"] == side)
        for side in ("client", "server")
    }
    return {"name": name, "note": note, "messages": messages, **streams}


def putExchange(directory: str) -> dict[str, Any]:
    """A whole file through one call: C{put} with a stream argument."""
    clock = Clock()
    recorded = Recorded(BulkService(directory, reactor=clock, digests=["sha256"], hashing="inline"), clock)
    answer = recorded.call("put", NAME, Stream(CONTENT))
    assert answer == hashlib.sha256(CONTENT).hexdigest(), answer
    return exchange(
        "put",
        'put(name, stream): the stream is announced with digest name "*" (the client has not seen the'
        " service's HELLO yet), waits for that HELLO, then sends its initial window of 100 bytes; the"
        " service starts receiving with a GRANT of 0 and grants 100 bytes per 100 bytes it has stored."
        " END carries the size and the SHA-256 of the file, DONE the digest the service verified, and the"
        " answer is that digest in hex.",
        recorded,
    )


def resumeExchange(directory: str) -> dict[str, Any]:
    """A resumed upload: C{openUpload} reports bytes held, C{upload} sends the rest, C{finishUpload} verifies."""
    clock = Clock()
    service = BulkService(directory, reactor=clock, digests=["sha256"], hashing="inline")
    earlier = Recorded(service, clock)
    earlier.call("openUpload", NAME, len(CONTENT), VERSION, ["sha256"])
    earlier.call("upload", NAME, Stream(CONTENT, ranges=[(0, HELD_BEFORE)], digest=None))
    earlier.close()
    recorded = Recorded(service, clock)
    opened = recorded.call("openUpload", NAME, len(CONTENT), VERSION, ["sha256"])
    assert opened == {"held": [[0, HELD_BEFORE]], "algorithm": "sha256"}, opened
    missing = [(HELD_BEFORE, len(CONTENT))]
    held = recorded.call("upload", NAME, Stream(CONTENT, ranges=missing, digest=None))
    assert held == {"held": len(CONTENT)}, held
    digest = hashlib.sha256(CONTENT).digest()
    finished = recorded.call("finishUpload", NAME, digest)
    assert finished["digest"] == digest.hex(), finished
    return exchange(
        "resume",
        f"An earlier connection opened the upload and sent bytes 0 to {HELD_BEFORE - 1}, then closed."
        f" This one asks again: openUpload answers that [0, {HELD_BEFORE}) is held, so the client sends"
        f" only [{HELD_BEFORE}, {len(CONTENT)}) in a stream announced with the file's size and no digest"
        " (its data frames carry file offsets), and finishUpload sends the SHA-256 of the whole file:"
        " the service verifies it and moves the file into place.",
        recorded,
    )


def vectorFile() -> dict[str, Any]:
    """Everything C{tests/vectors/bulk_upload.json} holds, generated now."""
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        exchanges = [putExchange(first), resumeExchange(second)]
    return {
        "description": DESCRIPTION,
        "settings": {
            "chunkSize": OPTIONS.chunkSize,
            "initialWindow": OPTIONS.startWindow,
            "digests": list(OPTIONS.digests),
        },
        "file": {
            "name": NAME,
            "size": len(CONTENT),
            "version": VERSION,
            "sha256": hashlib.sha256(CONTENT).hexdigest(),
        },
        "exchanges": exchanges,
    }


# -- reading the bytes back: messages, tokens and their roles ------------------------------------------


def tokens(data: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    """Each token of C{data} (no preamble) as C{(kind, header value, header bytes, body)}."""
    position = 0
    while position < len(data):
        header = decode_header(data, position, len(data))
        assert header is not None, "a message cut short"
        kind, value, length = header
        start, position = position, position + length
        body = b""
        if kind in BODY_KINDS:
            body, position = data[position : position + value], position + value
        yield kind, value, data[start : start + length], body


def splitMessages(data: bytes) -> list[bytes]:
    """C{data} (whole top-level objects, no preamble) cut into its objects."""
    messages: list[bytes] = []
    depth = start = position = 0
    for kind, _, header, body in tokens(data):
        position += len(header) + len(body)
        depth += 1 if kind == OPEN else -1 if kind == CLOSE else 0
        if depth == 0:
            messages.append(data[start:position])
            start = position
    return messages


RPC_TAGS = ("CALL", "ANSWER", "FAIL", "CANCEL", "RELEASE", "GOAWAY")
_RPC_FIELDS: dict[str, tuple[str, ...]] = {
    "CALL": ("request id", "target export id", "method name", "keyword arguments"),
    "ANSWER": ("request id", "result"),
}
_CONTROL_FIELDS: dict[str, tuple[str, ...]] = {
    "GRANT": ("credit: more bytes",),
    "END": ("size", "digest"),
    "DONE": ("digest",),
    "CANCEL": ("code", "message"),
    "ABORT": ("code", "message"),
    "HELLO": ("digests", "initial window"),
}


def _items(message: bytes) -> tuple[str, list[Any]]:
    """A message's open type and its first-level items (a value, or the tokens of a nested container)."""
    found = list(tokens(message))
    openType = found[0][3].decode("ascii")
    items: list[Any] = []
    depth = 0
    for kind, value, _header, body in found[1:-1]:
        if depth == 0:
            items.append(body if kind in BODY_KINDS and kind != OPEN else value)
        depth += 1 if kind == OPEN else -1 if kind == CLOSE else 0
    return openType, items


def summary(message: bytes) -> str:
    """A few words naming a message: C{HELLO}, C{GRANT}, C{data}, C{CALL put}, C{ANSWER}..."""
    if message == PREAMBLE:
        return "preamble"
    openType, items = _items(message)
    if openType == "bulk.ctl":
        return OP_NAMES[items[0]]
    if openType == "bulk.data":
        return "data"
    if openType == "rpc":
        tag = RPC_TAGS[items[0]]
        return f"CALL {items[3].decode()}" if tag == "CALL" else tag
    return openType


def _roles(message: bytes) -> list[str]:
    """What each first-level item of a message is, in order."""
    openType, items = _items(message)
    if openType == "bulk.ctl":
        op = OP_NAMES[items[0]]
        return [f"op: {op}", "stream id", *_CONTROL_FIELDS[op]]
    if openType == "bulk.data":
        return ["stream id", "offset", "body"]
    if openType == "rpc":
        tag = RPC_TAGS[items[0]]
        fields = _RPC_FIELDS.get(tag, ())
        if tag != "CALL":
            return [f"tag: {tag}", *fields]
        parameters = _PARAMETERS.get(items[3].decode(), ())
        arguments = [f"argument {index + 1}" for index in range(len(items) - 1 - len(fields))]
        named = [f"{argument}: {parameter}" for argument, parameter in zip(arguments, parameters, strict=False)]
        return [f"tag: {tag}", *fields, *named, *arguments[len(named) :]]
    return []


_PARAMETERS = {
    "put": ("name", "stream"),
    "openUpload": ("name", "size", "version", "digests"),
    "upload": ("name", "stream"),
    "finishUpload": ("name", "digest"),
}
"""The parameters of the calls the examples make, by method name."""

_NESTED_ROLES = {"bulk.stream": ("stream id", "size", "digest name")}


def describeToken(kind: int, value: int, body: bytes) -> str:
    """One token as the spec writes it: C{OPEN "bulk.ctl"}, C{INT 5}, C{BYTES 32}, C{SIMPLE None}, C{CLOSE}."""
    name = KIND_NAMES[kind]
    if kind in (OPEN, STRING):
        text = body.decode("utf-8")
        if len(text) > _TEXT_SHOWN:
            return f'{name} {json.dumps(text[: _TEXT_SHOWN - 4])[:-1]}…"'
        return f"{name} {json.dumps(text)}"
    if kind == BYTES:
        return f"{name} {len(body)}"
    if kind == NEG:
        return f"{name} {-1 - value}"
    if kind == SIMPLE:
        return f"{name} {('None', 'False', 'True')[value]}"
    if kind == CLOSE:
        return name
    assert kind == INT, kind
    return f"{name} {value}"


_TEXT_SHOWN = 14
"""Characters of a STRING shown in full in a token's description (its hex shows it all)."""

_HEX_WIDTH = 12
"""Bytes of hex per line of a rendered block."""


def _hexLines(data: bytes) -> list[str]:
    return [data[start : start + _HEX_WIDTH].hex(" ").upper() for start in range(0, len(data), _HEX_WIDTH)] or [""]


def renderMessage(side: str, message: bytes) -> list[str]:
    """The lines of one message: a title, then one line per token (hex, token, what it is)."""
    lines = [f"{side} → {'server' if side == 'client' else 'client'}: {summary(message)}"]
    if message == PREAMBLE:
        return [*lines, f"  {_row(message.hex(' ').upper(), 'preamble', '')}"]
    openType = next(tokens(message))[3].decode("ascii")
    roles = iter(_roles(message))
    nested: list[Iterator[str]] = []
    depth = 0
    for kind, value, header, body in tokens(message):
        role = ""
        if depth == 1 and kind != CLOSE:
            role = next(roles, "")
        elif depth == 2 and nested and kind != CLOSE:
            role = next(nested[-1], "")
        if kind == OPEN:
            depth += 1
            nested.append(iter(_NESTED_ROLES.get(body.decode("ascii"), ())))
        elif kind == CLOSE:
            depth -= 1
            nested.pop()
        if openType == "bulk.data" and kind == BYTES:
            shown = _hexLines(header)
            role = f"body: bytes {_offset(message)} to {_offset(message) + len(body) - 1} of the file (not shown)"
        else:
            shown = _hexLines(header + body)
        lines.append(f"  {_row(shown[0], describeToken(kind, value, body), role)}")
        lines += [f"  {_row(more, '', '')}" for more in shown[1:]]
    return lines


def _offset(message: bytes) -> int:
    offset: int = _items(message)[1][1]
    return offset


def _row(hexText: str, token: str, role: str) -> str:
    return f"{hexText:<{3 * _HEX_WIDTH}} {token:<22} {role}".rstrip()


def render(vector: dict[str, Any]) -> str:
    """The block C{docs/wire-format.md} shows for one exchange of the vector file."""
    blocks = ["\n".join(renderMessage(m["from"], bytes.fromhex(m["hex"]))) for m in vector["messages"]]
    return "\n\n".join(blocks)


def main(write: Callable[[str], Any] = sys.stdout.write) -> None:
    """Write the vector file anew and print each exchange's block for the spec."""
    vectors = vectorFile()
    VECTOR_PATH.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", "utf-8")
    for vector in vectors["exchanges"]:
        write(f"--- {vector['name']}\n```\n{render(vector)}\n```\n")


if __name__ == "__main__":
    main()
