"""Conformance: the RPC message vectors in C{tests/vectors/rpc.json} (GOAWAY, calls with a context, one of each kind).

Each valid vector is encoded from its fields and must give exactly its
bytes, and decoded (whole, split at every offset, byte by byte) must give
exactly its message; each refused vector must give its Violation, with the
decoder still in step (the next message on the stream decodes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Registry, dumps
from framing.rpc._wire import OPEN_TYPE, Message, MessageSlicer, MessageUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY

from ...framing.test_vectors import FEEDINGS, PREAMBLE, assert_error, assert_same, build

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "vectors" / "rpc.json").read_text("utf-8"))


def registry() -> Registry:
    """The default registry plus the RPC message type, as a broker has it."""
    result = Registry(DEFAULT_REGISTRY)
    result.add_slicer(Message, MessageSlicer())
    result.add_unslicer(OPEN_TYPE, MessageUnslicer)
    return result


def fields(vector: dict[str, Any]) -> tuple[Any, ...]:
    """The message a vector describes, as a tuple of its fields."""
    return tuple(build(field) for field in vector["message"])


def decodeAll(pieces: list[bytes]) -> list[Any]:
    """Feed C{pieces} to one fresh decoder with the RPC types; return everything it completed."""
    decoder = Decoder(registry=registry())
    results: list[Any] = []
    for piece in pieces:
        results.extend(decoder.feed(piece))
    return results


def expected(message: tuple[Any, ...]) -> tuple[Any, ...]:
    """
    A CALL as the unslicer hands it on: arguments as a tuple, keyword
    arguments as a dict, and a call context's deadline and metadata after them.
    """
    if message[0] == 0:
        if type(message[4]) is tuple:
            kwargs, deadline, metadata = message[4]
            return (*message[:4], tuple(message[5:]), kwargs or {}, deadline, metadata or {})
        return (*message[:4], tuple(message[5:]), message[4] or {})
    return message


class RpcVectorTests(SynchronousTestCase):
    """Every RPC vector, encoded and decoded every way."""

    def test_encode(self) -> None:
        """Each valid vector's fields encode to exactly its bytes."""
        for vector in VECTORS["vectors"]:
            self.assertEqual(dumps(Message(fields(vector)), registry()).hex(), vector["hex"], vector["name"])

    def test_decode(self) -> None:
        """Each valid vector decodes to exactly its message, however it is fed."""
        for vector in VECTORS["vectors"]:
            data = bytes.fromhex(vector["hex"])
            for how, feeding in FEEDINGS.items():
                for pieces in feeding(data):
                    (message,) = decodeAll(pieces)
                    self.assertIs(type(message), Message)
                    assert_same(self, expected(fields(vector)), tuple(message), f"{vector['name']} {how}")

    def test_refused(self) -> None:
        """Each refused vector gives its Violation, and the message after it still decodes."""
        follower = bytes.fromhex(VECTORS["vectors"][0]["hex"])[len(PREAMBLE) :]
        for vector in VECTORS["errors"]:
            data = bytes.fromhex(vector["hex"]) + follower
            for how, feeding in FEEDINGS.items():
                for pieces in feeding(data):
                    refused, after = decodeAll(pieces)
                    # A refusal once the tag and first field are known is wrapped to name the message.
                    refused = getattr(refused, "violation", refused)
                    assert_error(self, refused, vector["error"], vector["code"], f"{vector['name']} {how}")
                    self.assertIs(type(after), Message)
