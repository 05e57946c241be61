"""Limits.max_object_items is exact: an object of that many items passes, one more is refused, whatever its shape."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits, dumps, loads
from framing._errors import TooManyItems

LIMITS = Limits(max_object_items=10)


class ObjectItemsTests(SynchronousTestCase):
    """Items are counted across the containers of one top-level object, to the item."""

    def assertLast(self, fits: Any, over: Any) -> None:
        self.assertEqual(loads(dumps(fits), limits=LIMITS), fits)
        with self.assertRaises(TooManyItems) as caught:
            loads(dumps(over), limits=LIMITS)
        self.assertIn("more than 10 items in all", str(caught.exception))

    def test_flat(self) -> None:
        """A list of 10 items fits; 11 are refused, although the top-level CLOSE follows the last one."""
        self.assertLast([1] * 10, [1] * 11)

    def test_empty_containers(self) -> None:
        """Empty containers are items too: 10 of them fit, 11 are refused."""
        self.assertLast([[] for _ in range(10)], [[] for _ in range(11)])

    def test_nested(self) -> None:
        """Items of nested containers add up with their parents': 1 + 9 fit, 1 + 10 do not."""
        self.assertLast([[1] * 9], [[1] * 10])
        self.assertLast([(1,) * 4, [1] * 4], [(1,) * 4, [1] * 5])

    def test_dict(self) -> None:
        """A dict entry counts once."""
        self.assertLast({i: i for i in range(10)}, {i: i for i in range(11)})
