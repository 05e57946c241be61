"""
tests/vectors/object_streams.json: the object streams' messages of
docs/wire-format.md, section 14 (an announcement in an ANSWER, ITEM,
CREDIT, END, ERROR, CANCEL), and refused ones.

The vector file is written by this module (C{python -m
tests.protocols.rpc.test_stream_vectors}); the tests check that the
encoder writes exactly its bytes and that both codec cores decode them to
its messages (and refuse the invalid ones with their codes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, Encoder, Registry, Violation
from framing.rpc._streams import (
    ANNOUNCE_OPEN_TYPE,
    CANCEL,
    CREDIT,
    END,
    ERROR,
    ITEM,
    Announcement,
    AnnouncementUnslicer,
    ByteCreditExceeded,
    EndCountMismatch,
    FlowMessage,
    ItemCreditExceeded,
    ReceiveWindow,
    addFlowTypes,
    leastItemLength,
)
from framing.rpc._wire import ANSWER, Message, addMessageTypes
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from ...framing.test_cores import COMPILED, core
from ...vectorints import integer, written

VECTOR = Path(__file__).resolve().parents[2] / "vectors" / "object_streams.json"

DESCRIPTION = (
    "Object streams in RPC calls (docs/wire-format.md, section 14). Under 'vectors', each is {name, what, fields, "
    "hex}: hex is a complete stream (preamble, then one message); fields are the message's items in wire order "
    "in the tagged form of section 9, an announcement shown as {\"stream\": id}. Under 'invalid', each is "
    "{name, hex, code}: the receiver refuses the one message with that Violation code and stays in step. Under "
    "'overruns', each is {name, what, credit, hex, breaks, code}: hex is a complete stream of ITEMs for stream 1, "
    "whose receiver granted credit = {objects, bytes} once; it accepts the messages before index 'breaks' and "
    "drops the connection with an ERROR of that code at that one (section 14.3). Under 'ends', each is {name, "
    "what, hex, code}: ITEMs of stream 1, then its END; code is null if the receiver ends the stream cleanly, else "
    "the code the stream fails with there (the connection stays up; section 14.4)."
)


@implementer(ISlicer)
class _AnnouncementWriter:
    """Writes an L{Announcement} as a sender's slicer does (without a connection to start a stream on)."""

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(ANNOUNCE_OPEN_TYPE, obj, obj)


def registry() -> Registry:
    """The RPC messages, the flow messages, and announcements decoded as themselves."""
    made = Registry(DEFAULT_REGISTRY)
    addMessageTypes(made)
    addFlowTypes(made)
    made.add_slicer(Announcement, _AnnouncementWriter())
    made.add_unslicer(ANNOUNCE_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, lambda found: found))
    return made


MESSAGES: list[tuple[str, str, Any]] = [
    ("answer-with-stream", "ANSWER 1 whose result is stream 1", Message((ANSWER, 1, Announcement((1,))))),
    ("credit-first", "the receiver's first CREDIT: 256 items, 1 MiB", FlowMessage((CREDIT, 1, 256, 1 << 20))),
    ("item-int", "ITEM 0 of stream 1: 7", FlowMessage((ITEM, 1, 7))),
    ("item-dict", "an ITEM holding a dict", FlowMessage((ITEM, 1, {"event": "put", "key": "a"}))),
    ("item-several", "one ITEM holding items 2, 3 and 4 of stream 1: 8, 9, 10", FlowMessage((ITEM, 1, 8, 9, 10))),
    ("credit-step", "CREDIT 64 more items", FlowMessage((CREDIT, 1, 64, 1 << 20))),
    ("end", "END of stream 1 after 5 items", FlowMessage((END, 1, 5))),
    (
        "error",
        "ERROR of stream 2: the producer raised ValueError",
        FlowMessage((ERROR, 2, "ValueError", "the producer broke", ("the producer broke",))),
    ),
    (
        "error-violation",
        "ERROR of stream 3: its item 17 refused by the sender",
        FlowMessage((ERROR, 3, "Violation", "expected an int, got str", ("kind-refused", "result[17]"))),
    ),
    ("cancel", "CANCEL of stream 4 by its receiver", FlowMessage((CANCEL, 4))),
]

INVALID: list[tuple[str, bytes]] = [
    # OPEN "rpc.flow", INT 9 (no such tag), INT 1, CLOSE
    ("unknown-tag", bytes.fromhex("7872") + b"pc.flow" + bytes.fromhex("0901") + bytes.fromhex("80")),
    # an ITEM with stream id 0 (ids start at 1)
    ("stream-id-zero", bytes.fromhex("7872") + b"pc.flow" + bytes.fromhex("000007") + bytes.fromhex("80")),
    # an ITEM with no item
    ("item-empty", bytes.fromhex("7872") + b"pc.flow" + bytes.fromhex("0001") + bytes.fromhex("80")),
    # a CANCEL with an extra field
    ("cancel-extra-field", bytes.fromhex("7872") + b"pc.flow" + bytes.fromhex("040105") + bytes.fromhex("80")),
    # an announcement with a string id
    ("announcement-string-id", b"\x7arpc.stream" + b"\x311" + bytes.fromhex("80")),
]


OVERRUNS: list[tuple[str, str, tuple[int, int], list[FlowMessage]]] = [
    (
        "items-over-credit",
        "3 items granted; ITEMs of 2 items, then 2 more",
        (3, 1 << 20),
        [FlowMessage((ITEM, 1, 1, 2)), FlowMessage((ITEM, 1, 3, 4))],
    ),
    (
        "bytes-over-window",
        "64 bytes granted; an ITEM of 100 bytes fills it (sent while none was in flight), the next breaks it",
        (256, 64),
        [FlowMessage((ITEM, 1, bytes(100))), FlowMessage((ITEM, 1, b"x"))],
    ),
    (
        "bytes-over-window-text",
        "40 bytes granted; 20 characters count 12 + 21 = 33, [1, {'k': 'hello'}] 25: the 3rd breaks",
        (256, 40),
        [
            FlowMessage((ITEM, 1, "a" * 20)),
            FlowMessage((ITEM, 1, [1, {"k": "hello"}])),
            FlowMessage((ITEM, 1, 0)),
        ],
    ),
    (
        "bytes-over-window-buffer",
        "64 bytes granted; a memoryview of 100 bytes (one BYTES body) counts 12 + 101 = 113 and fills it,"
        " the next breaks it",
        (256, 64),
        [FlowMessage((ITEM, 1, memoryview(bytes(100)))), FlowMessage((ITEM, 1, b"x"))],
    ),
]


ENDS: list[tuple[str, str, list[FlowMessage]]] = [
    (
        "end-counts-items",
        "ITEMs of 3 items and 1 item, then END 4: the count of items, not of ITEM messages; the stream ends cleanly",
        [FlowMessage((ITEM, 1, 1, 2, 3)), FlowMessage((ITEM, 1, 4)), FlowMessage((END, 1, 4))],
    ),
    (
        "end-counts-messages",
        "ITEMs of 3 items and 1 item, then END 2 (the ITEM messages counted): the stream fails at its receiver",
        [FlowMessage((ITEM, 1, 1, 2, 3)), FlowMessage((ITEM, 1, 4)), FlowMessage((END, 1, 2))],
    ),
    (
        "end-counts-more",
        "one ITEM of 2 items, then END 3: an item missing, the stream fails at its receiver",
        [FlowMessage((ITEM, 1, 1, 2)), FlowMessage((END, 1, 3))],
    ),
]


def ending(messages: list[Any]) -> str | None:
    """
    How a receiver (the default window, its consumer taking nothing) takes
    C{messages}, ITEMs then an END: C{None} for a clean end, else the code
    the stream fails with.
    """
    window = ReceiveWindow()
    window.first()
    for message in messages:
        if message[0] == ITEM:
            window.arrived(message)
        else:
            problem = window.endProblem(message[2])
            return None if problem is None else problem.code
    raise AssertionError("no END")


def overrun(credit: tuple[int, int], messages: list[Any]) -> tuple[int, str] | None:
    """
    Where a receiver that granted C{credit} (and took nothing) breaks off
    C{messages}: the index and the code, or C{None}.
    """
    window = ReceiveWindow(*credit)
    window.first()
    for index, message in enumerate(messages):
        try:
            window.received(len(message) - 2, leastItemLength(message))
        except ItemCreditExceeded as error:
            return index, error.code
    return None


def tagged(value: Any) -> Any:
    """A value in section 9's tagged form (an announcement as {"stream": id})."""
    if type(value) is Announcement:
        return {"stream": written(value[0])}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, str):
        return {"str": value}
    if value is None:
        return {"none": None}
    if isinstance(value, tuple):
        return {"tuple": [tagged(item) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[tagged(key), tagged(item)] for key, item in value.items()]}
    raise TypeError(f"no tagged form for {value!r}")


def build() -> dict[str, Any]:
    """The vector file's content, encoded now."""
    encoder = Encoder(registry())
    vectors = []
    for name, what, message in MESSAGES:
        fields = list(message)
        vectors.append(
            {
                "name": name,
                "what": what,
                "fields": [tagged(field) for field in fields],
                "hex": (PREAMBLE + encoder.encode(message)).hex(),
            }
        )
    invalid = []
    for name, data in INVALID:
        invalid.append({"name": name, "hex": (PREAMBLE + data).hex(), "code": _refusal(data).code})
    overruns = []
    for name, what, (objects, windowBytes), messages in OVERRUNS:
        broken = overrun((objects, windowBytes), messages)
        assert broken is not None, name
        overruns.append(
            {
                "name": name,
                "what": what,
                "credit": {"objects": written(objects), "bytes": written(windowBytes)},
                "hex": (PREAMBLE + b"".join(encoder.encode(message) for message in messages)).hex(),
                "breaks": broken[0],
                "code": broken[1],
            }
        )
    ends = []
    for name, what, messages in ENDS:
        ends.append(
            {
                "name": name,
                "what": what,
                "hex": (PREAMBLE + b"".join(encoder.encode(message) for message in messages)).hex(),
                "code": ending(messages),
            }
        )
    return {"description": DESCRIPTION, "vectors": vectors, "invalid": invalid, "overruns": overruns, "ends": ends}


def _decode(data: bytes) -> list[Any]:
    decoder = Decoder(None, registry())
    return decoder.feed(data)


def _refusal(data: bytes) -> Violation:
    results = _decode(PREAMBLE + data)
    assert len(results) == 1 and isinstance(results[0], Violation), results
    return results[0]


class StreamVectorTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.vectors = json.loads(VECTOR.read_text())

    def test_fileIsCurrent(self) -> None:
        """The file holds what the encoder writes now (regenerate it with python -m this module)."""
        self.assertEqual(self.vectors, build())

    def test_decodePure(self) -> None:
        """The pure core decodes each vector to its message and refuses each invalid one with its code."""
        with core(None):
            self._decodeAll()

    def test_decodeCompiled(self) -> None:
        """The compiled core does the same."""
        if COMPILED is None:
            raise self.skipTest("the compiled core is not built (or CHUNKWIRE_PURE is set)")
        with core(COMPILED):
            self._decodeAll()

    def _decodeAll(self) -> None:
        expected = {name: message for name, _, message in MESSAGES}
        for vector in self.vectors["vectors"]:
            data = bytes.fromhex(vector["hex"])
            whole = _decode(data)
            self.assertEqual(whole, [expected[vector["name"]]], vector["name"])
            self.assertIs(type(whole[0]), type(expected[vector["name"]]))
            decoder = Decoder(None, registry())
            pieces = [result for byte in range(len(data)) for result in decoder.feed(data[byte : byte + 1])]
            self.assertEqual(pieces, whole, vector["name"])
        for vector in self.vectors["invalid"]:
            # The refused message, then a good one: the stream stays in step.
            follower = Encoder(registry()).encode(FlowMessage((CANCEL, 1)))
            results = _decode(bytes.fromhex(vector["hex"]) + follower)
            self.assertEqual(len(results), 2, vector["name"])
            self.assertIsInstance(results[0], Violation, vector["name"])
            self.assertEqual(results[0].code, vector["code"], vector["name"])
            self.assertEqual(results[1], FlowMessage((CANCEL, 1)))
        for vector in self.vectors["overruns"]:
            messages = _decode(bytes.fromhex(vector["hex"]))
            credit = (integer(vector["credit"]["objects"]), integer(vector["credit"]["bytes"]))
            self.assertEqual(overrun(credit, messages), (vector["breaks"], vector["code"]), vector["name"])
            # Every message before the one that breaks the rule is taken.
            self.assertIsNone(overrun(credit, messages[: vector["breaks"]]), vector["name"])

    def test_ends(self) -> None:
        """
        END counts items, not ITEM messages (section 14.4): a receiver ends
        the stream cleanly on the count of the items that arrived and fails
        it (end-count-mismatch) on any other count.
        """
        self.assertEqual(
            [(vector["name"], vector["code"]) for vector in self.vectors["ends"]],
            [
                ("end-counts-items", None),
                ("end-counts-messages", EndCountMismatch.code),
                ("end-counts-more", EndCountMismatch.code),
            ],
        )
        for vector in self.vectors["ends"]:
            self.assertEqual(ending(_decode(bytes.fromhex(vector["hex"]))), vector["code"], vector["name"])

    def test_byteOverrunIsCreditOverrun(self) -> None:
        """A byte window overrun drops the connection with the code of an item overrun."""
        self.assertEqual(ByteCreditExceeded.code, "stream-credit-exceeded")
        self.assertEqual({vector["code"] for vector in self.vectors["overruns"]}, {ItemCreditExceeded.code})


if __name__ == "__main__":
    VECTOR.write_text(json.dumps(build(), indent=1) + "\n")
    sys.stdout.write(f"wrote {VECTOR}\n")
