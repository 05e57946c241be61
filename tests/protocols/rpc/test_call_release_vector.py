"""
tests/vectors/rpc_call_release.json: the worked example of docs/wire-format.md,
section 12 (a call carrying a reference, the callee calling back through it,
both answers, and the RELEASE), re-derived here from a real broker pair.

The vector file is written by this module (C{python -m
tests.protocols.rpc.test_call_release_vector}) and checked against a fresh
run on every test run, on both codec cores.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._wire import MESSAGES
from framing.wire import BODY_KINDS, CLOSE, OPEN, PREAMBLE, decode_header

from .services import Child, RpcPair, Service

VECTOR = Path(__file__).resolve().parents[2] / "vectors" / "rpc_call_release.json"
DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "wire-format.md"

DESCRIPTION = (
    "The worked example of docs/wire-format.md, section 12: both streams of one RPC connection, "
    "as the messages each side wrote, in the order they were written. The client exports an object "
    "whose remote method add(n) adds n to its value (10) and returns the sum, and calls the server "
    "root's callBack(ref, 5) with it; the server calls add(5) back through the reference, answers "
    "callBack with what add answered (15), then releases the reference it received once. "
    "Each step is {from, what, hex}: 'what' is 'preamble' or the message kind; hex is the step's bytes."
)

NOTES = {
    1: "CALL 1: target 0 (the root), 'callBack', no keyword arguments, then rpc.ref 1 (the client's export) and 5.",
    3: "The server's own first call, so its own request id 1: target 1 (the client's export), 'add', 5.",
    4: "The client answers the server's call 1 with 15.",
    5: "The server answers the client's call 1 with what add answered.",
    6: "RELEASE export 1, count 1: the server received rpc.ref 1 once and holds the reference no more.",
}


class _Written(list[bytes]):
    """A transport's list of writes that also puts each write on a timeline shared by both sides."""

    def __init__(self, side: str, timeline: list[tuple[str, bytes]]) -> None:
        super().__init__()
        self.side = side
        self.timeline = timeline

    def append(self, data: bytes) -> None:
        super().append(data)
        self.timeline.append((self.side, bytes(data)))


def _topLevel(data: bytes) -> list[bytes]:
    """Split one side's stream (after its preamble) into its top-level objects' bytes."""
    pieces: list[bytes] = []
    start = position = depth = 0
    while position < len(data):
        header = decode_header(data, position, len(data))
        assert header is not None, f"a header cut at {position}"
        kind, value, size = header
        position += size + (value if kind in BODY_KINDS else 0)
        depth += 1 if kind == OPEN else -1 if kind == CLOSE else 0
        if not depth:
            pieces.append(data[start:position])
            start = position
    assert start == len(data), "an object cut at the end"
    return pieces


def _kind(message: bytes) -> str:
    """The RPC kind of one message's bytes: its tag is the INT after OPEN "rpc"."""
    assert message.startswith(b"\x73rpc"), message.hex()
    header = decode_header(message, 4, len(message))
    assert header is not None
    return MESSAGES[header[1]].name.upper()


def exchange() -> list[dict[str, str]]:
    """Run the example on a real broker pair; its steps, in the order written: {from, what, hex[, note]}."""
    timeline: list[tuple[str, bytes]] = []
    pair = RpcPair(Service())
    pair.memory.clientTransport.writes = _Written("client", timeline)
    pair.memory.serverTransport.writes = _Written("server", timeline)
    exported = Child(10)
    answer = pair.root.callRemote("callBack", exported, 5)
    pair.flush()
    assert answer.called and answer.result == 15, answer
    assert exported.value == 15 and pair.client.exportCount == 0, "the reference was not released"
    steps: list[dict[str, str]] = []
    started: set[str] = set()
    for side, data in timeline:
        if side not in started:
            started.add(side)
            assert data.startswith(PREAMBLE)
            steps.append({"from": side, "what": "preamble", "hex": PREAMBLE.hex()})
            data = data[len(PREAMBLE) :]
        for message in _topLevel(data):
            steps.append({"from": side, "what": _kind(message), "hex": message.hex()})
    for index, note in NOTES.items():
        steps[index]["note"] = note
    return steps


def vector() -> dict[str, Any]:
    """The whole vector file's content, as this implementation makes it."""
    return {"description": DESCRIPTION, "steps": exchange()}


def spaced(hexText: str) -> list[str]:
    """Bytes in hex as the document writes them: upper case, one pair each."""
    return [hexText[i : i + 2].upper() for i in range(0, len(hexText), 2)]


class CallReleaseVectorTests(SynchronousTestCase):
    """The example's bytes are what the implementation writes, and the document shows them all."""

    def test_vectorIsWhatBrokersWrite(self) -> None:
        """A fresh broker pair writes exactly the vector's steps, in its order."""
        self.assertEqual(json.loads(VECTOR.read_text("utf-8")), vector())

    def test_eachStream(self) -> None:
        """Each side's steps join into its whole stream: the preamble, then whole messages only."""
        steps = vector()["steps"]
        for side in ("client", "server"):
            mine = [step for step in steps if step["from"] == side]
            self.assertEqual(mine[0]["what"], "preamble")
            stream = bytes.fromhex("".join(step["hex"] for step in mine[1:]))
            self.assertEqual(b"".join(_topLevel(stream)), stream)

    def test_documentShowsEveryByte(self) -> None:
        """Section 12's worked example shows every byte of the vector after the preambles, in order."""
        document = DOCUMENT.read_text("utf-8")
        section = document[document.index("## 12. RPC messages") :]
        start = section.index("<!-- rpc_call_release.json -->")
        block = section[section.index("```", start) + 3 :]
        block = block[: block.index("```")]
        # Each line's bytes: pairs one or two spaces apart, then three or more spaces before its words.
        shown = [re.match(r"([0-9A-F]{2}(?: {1,2}[0-9A-F]{2})*)(?= {3,}|$)", line) for line in block.splitlines()]
        shownBytes = " ".join(found.group(1) for found in shown if found is not None).split()
        wanted = [pair for step in vector()["steps"] if step["what"] != "preamble" for pair in spaced(step["hex"])]
        self.assertEqual(shownBytes, wanted)


if __name__ == "__main__":
    VECTOR.write_text(json.dumps(vector(), indent=1, ensure_ascii=False) + "\n", "utf-8")
    sys.stdout.write(f"wrote {VECTOR}\n")
