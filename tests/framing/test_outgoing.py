"""Tests for framing._outgoing: one message's commit or rollback."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Encoder, Registry
from framing._blocks import BlockBuffer
from framing._outgoing import Outgoing, OutgoingClosed
from framing.slicing._interfaces import ISlicer


class OutgoingTests(SynchronousTestCase):
    def test_commitRunsCommitActionsInOrder(self) -> None:
        """commit() runs the commit actions in registration order and no rollback action."""
        done: list[str] = []
        outgoing = Outgoing()
        outgoing.on_commit(lambda: done.append("a"))
        outgoing.on_rollback(lambda: done.append("undo"))
        outgoing.on_commit(lambda: done.append("b"))
        outgoing.commit()
        self.assertEqual(done, ["a", "b"])
        self.assertFalse(outgoing.open)

    def test_rollbackUndoesNewestFirst(self) -> None:
        """rollback() runs the rollback actions newest first and no commit action."""
        done: list[str] = []
        outgoing = Outgoing()
        outgoing.on_rollback(lambda: done.append("first"))
        outgoing.on_commit(lambda: done.append("kept"))
        outgoing.on_rollback(lambda: done.append("second"))
        outgoing.rollback()
        self.assertEqual(done, ["second", "first"])

    def test_closedOutgoingRefusesUse(self) -> None:
        """After commit, registering or ending again raises OutgoingClosed."""
        outgoing = Outgoing()
        outgoing.commit()
        self.assertRaises(OutgoingClosed, outgoing.on_commit, lambda: None)
        self.assertRaises(OutgoingClosed, outgoing.rollback)


class Marked:
    pass


@implementer(ISlicer)
class MarkingSlicer:
    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def slice(self, obj: Any, encoder: Any) -> None:
        self.seen.append(encoder.outgoing)
        encoder.write_container("marked", obj, ())


class EncoderOutgoingTests(SynchronousTestCase):
    def test_slicersSeeTheMessagesOutgoing(self) -> None:
        """A slicer finds the message's Outgoing as encoder.outgoing, and None after the encode."""
        seen: list[Any] = []
        registry = Registry()
        registry.add_slicer(Marked, MarkingSlicer(seen))
        encoder = Encoder(registry)
        outgoing = Outgoing()
        encoder.encode_into([Marked()], BlockBuffer(), outgoing)
        self.assertEqual(seen, [outgoing])
        self.assertIsNone(encoder.outgoing)
