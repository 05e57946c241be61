"""The RPC message table (L{framing.rpc.wire.MESSAGES}): one row per kind drives checking and dispatch."""

from __future__ import annotations

from operator import attrgetter

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing.errors import InvalidValue, TooManyItems
from framing.rpc.wire import CANCEL, FAIL, MESSAGES, MessageUnslicer
from protocols.rpc import Broker


class TableTests(SynchronousTestCase):
    """Each row names its fields and its handlers; nothing else lists them."""

    def test_tagsAreIndexes(self) -> None:
        """A row's tag is its index in the table, so dispatch is one index per message."""
        self.assertEqual([kind.tag for kind in MESSAGES], list(range(len(MESSAGES))))

    def test_handlersResolve(self) -> None:
        """Every row's handler and refusal handler is a method a broker has."""
        broker = Broker(clock=Clock())
        for kind in MESSAGES:
            self.assertTrue(callable(attrgetter(kind.handler)(broker)), kind.name)
            if kind.refused is not None:
                self.assertTrue(callable(attrgetter(kind.refused)(broker)), kind.name)

    def test_fieldNamesFromTheTable(self) -> None:
        """The unslicer names each field as its row does, and applies the row's check to it."""
        unslicer = MessageUnslicer(Limits())
        unslicer.receive_child(FAIL)
        unslicer.receive_child(3)
        self.assertEqual(unslicer.child_where(), MESSAGES[FAIL].fields[1].name)
        with self.assertRaises(InvalidValue):
            unslicer.receive_child("")

    def test_fieldCountFromTheTable(self) -> None:
        """A message with more fields than its row has is refused."""
        unslicer = MessageUnslicer(Limits())
        unslicer.receive_child(CANCEL)
        unslicer.receive_child(3)
        with self.assertRaises(TooManyItems):
            unslicer.receive_child(4)

    def test_unknownTag(self) -> None:
        """A tag past the table's end is refused."""
        unslicer = MessageUnslicer(Limits())
        with self.assertRaises(InvalidValue):
            unslicer.receive_child(len(MESSAGES))
