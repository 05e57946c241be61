"""Decoder.reconfigure: new limits and registry from the next top-level object on."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, Encoder, Limits, Registry, Violation
from framing.slicing._builtin import TupleUnslicer
from framing.slicing._interfaces import ISlicer
from framing.wire import PREAMBLE

TINY = Limits(max_bytes_length=16, max_string_length=16, max_items=4, max_object_items=4, max_depth=2)


class ReconfigureTests(SynchronousTestCase):
    def test_tighter_limits_apply_to_later_objects(self) -> None:
        """An object decoded before reconfigure is kept; one after it over the new limits is refused."""
        decoder = Decoder()
        self.assertEqual(decoder.feed(PREAMBLE + Encoder().encode(b"x" * 100)), [b"x" * 100])
        decoder.reconfigure(TINY)
        [refused] = decoder.feed(Encoder().encode(b"x" * 100))
        self.assertIsInstance(refused, Violation)
        self.assertEqual(decoder.feed(Encoder().encode(b"small")), [b"small"])

    def test_looser_limits_apply_to_later_objects(self) -> None:
        """Limits widened after a login let a larger object through."""
        decoder = Decoder(TINY)
        [refused] = decoder.feed(PREAMBLE + Encoder().encode([1, 2, 3, 4, 5, 6]))
        self.assertIsInstance(refused, Violation)
        decoder.reconfigure(Limits())
        self.assertEqual(decoder.feed(Encoder().encode([1, 2, 3, 4, 5, 6])), [[1, 2, 3, 4, 5, 6]])

    def test_registry_swap(self) -> None:
        """An open type unknown to the first registry is refused, and decoded after the swap."""
        known = Registry()
        known.add_unslicer("pair", TupleUnslicer)
        decoder = Decoder(registry=Registry())
        [refused] = decoder.feed(PREAMBLE + _openPair())
        self.assertIsInstance(refused, Violation)
        decoder.reconfigure(registry=known)
        self.assertEqual(decoder.feed(_openPair()), [(1, 2)])

    def test_refused_mid_object(self) -> None:
        """Reconfiguring while an object is half built is a ValueError (the caller's bug, not the peer's)."""
        decoder = Decoder()
        whole = PREAMBLE + Encoder().encode([1, 2, 3])
        decoder.feed(whole[:-1])
        self.assertRaises(ValueError, decoder.reconfigure, TINY)


class _Pair(tuple):  # type: ignore[type-arg]
    __slots__ = ()


@implementer(ISlicer)
class _PairSlicer:
    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container("pair", obj, obj)


def _openPair() -> bytes:
    """The tokens of OPEN "pair", 1, 2, CLOSE."""
    registry = Registry()
    registry.add_slicer(_Pair, _PairSlicer())
    return Encoder(registry).encode(_Pair((1, 2)))
