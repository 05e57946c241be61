"""An encoder sees slicers registered after it first wrote a type: in its own registry, a parent, or for a subclass."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Encoder, Registry, loads
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


class Numbers(list):  # type: ignore[type-arg]
    """A list subclass: written as a list until a slicer is registered for it."""


@implementer(ISlicer)
class Tagged:
    """Writes an object as a tuple (tag, its state)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def slice(self, obj: Any, encoder: Any) -> None:
        state = obj.x if isinstance(obj, Point) else list(obj)
        encoder.write_container("tuple", obj, (self.tag, state))


def sent(encoder: Encoder, obj: Any) -> Any:
    """What a decoder makes of C{obj} written by C{encoder}."""
    return loads(encoder.preamble() + encoder.encode(obj))


class LateSlicerTests(SynchronousTestCase):
    """A registration made after a type was written changes how the next message writes it."""

    def test_replaced_slicer(self) -> None:
        """A slicer registered again for a type is used from the next object on."""
        registry = Registry(DEFAULT_REGISTRY)
        registry.add_slicer(Point, Tagged("first"))
        encoder = Encoder(registry)
        self.assertEqual(sent(encoder, [Point(1)]), [("first", 1)])
        registry.add_slicer(Point, Tagged("second"))
        self.assertEqual(sent(encoder, [Point(2)]), [("second", 2)])

    def test_parent_registration(self) -> None:
        """A slicer registered in a parent registry reaches the encoder of a child."""
        parent = Registry(DEFAULT_REGISTRY)
        child = Registry(parent)
        encoder = Encoder(child)
        self.assertEqual(sent(encoder, Numbers([1, 2])), [1, 2])
        parent.add_slicer(Numbers, Tagged("numbers"))
        self.assertEqual(sent(encoder, [Numbers([1, 2])]), [("numbers", [1, 2])])

    def test_subclass_of_builtin(self) -> None:
        """A subclass first written as its built-in base is written by its own slicer once one is registered."""
        registry = Registry(DEFAULT_REGISTRY)
        encoder = Encoder(registry)
        self.assertEqual(sent(encoder, {"n": Numbers([3])}), {"n": [3]})
        registry.add_slicer(Numbers, Tagged("numbers"))
        self.assertEqual(sent(encoder, {"n": Numbers([3])}), {"n": ("numbers", [3])})

    def test_others_registrations_cost_nothing(self) -> None:
        """A registration in a child or an unrelated registry (a new connection's) makes the encoder look nothing up."""
        registry = Registry(DEFAULT_REGISTRY)
        registry.add_slicer(Point, Tagged("p"))
        encoder = Encoder(registry)
        lookups: list[type] = []
        lookup = registry.slicer_for
        self.patch(registry, "slicer_for", lambda cls: lookups.append(cls) or lookup(cls))
        sent(encoder, Point(1))
        Registry(registry).add_slicer(Numbers, Tagged("child"))
        Registry(DEFAULT_REGISTRY).add_slicer(Numbers, Tagged("other"))
        sent(encoder, Point(2))
        self.assertEqual(lookups, [Point])
