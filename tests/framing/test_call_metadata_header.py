"""A CALL's metadata is refused at the header that proves it too large, not after its dict is built (sans-IO)."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Limits, Registry, Violation, dumps
from framing._decoder import BUILDING, DISCARDING
from framing.rpc._wire import CALL, Message, addMessageTypes, callContext


def registry() -> Registry:
    from framing.slicing._registry import DEFAULT_REGISTRY

    made = Registry(DEFAULT_REGISTRY)
    addMessageTypes(made)
    return made


def call(metadata: dict[str, str], requestId: int = 1) -> bytes:
    """A CALL's tokens (no preamble) with C{metadata} in its call context."""
    from framing.wire import PREAMBLE

    message = Message((CALL, requestId, 0, "method", callContext(None, 1000, metadata)))
    return dumps(message, registry())[len(PREAMBLE) :]


class HeaderRefusalTests(SynchronousTestCase):
    """The decoder stops keeping a CALL's metadata at the first header past the limits, on either core."""

    def decoder(self) -> Decoder:
        decoder = Decoder(Limits(), registry())
        from framing.wire import PREAMBLE

        decoder.feed(PREAMBLE)
        return decoder

    def refusedBefore(self, data: bytes, cut: int) -> list[Any]:
        """Feed C{data} up to C{cut}: already discarding; then the rest: one refusal, then a good call."""
        decoder = self.decoder()
        self.assertEqual(decoder.feed(data[:cut]), [])
        self.assertIs(decoder.state, DISCARDING)
        results = decoder.feed(data[cut:]) + decoder.feed(call({"a": "b"}, requestId=2))
        self.assertIs(decoder.state, BUILDING)
        return results

    def test_longValue(self) -> None:
        """A 1 MB value is refused at its header: its body is skipped, not kept, and the next call is read."""
        data = call({"k": "x" * 1_000_000})
        results = self.refusedBefore(data, len(data) - 900_000)
        self.assertIsInstance(results[0], Violation)
        self.assertEqual(results[0].code, "invalid-value")
        self.assertEqual(results[1][7], {"a": "b"})

    def test_manyEntries(self) -> None:
        """The 65th entry is refused at its key's header, before the other 100,000 arrive."""
        data = call({f"k{n}": "v" for n in range(100_000)})
        results = self.refusedBefore(data, len(data) // 2)
        self.assertEqual(results[0].code, "too-many-items")

    def test_withinLimitsAccepted(self) -> None:
        """64 entries of 8 KiB of characters in all, some of them four UTF-8 bytes each, still pass."""
        metadata = {f"k{n:02}": "\U0001f600" * 60 for n in range(64)}
        self.assertLessEqual(sum(len(k) + len(v) for k, v in metadata.items()), 8192)
        [message] = self.decoder().feed(call(metadata))
        self.assertEqual(message[6:], (1000, metadata))
