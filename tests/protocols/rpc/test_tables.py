"""
One connection's export and import tables, and RELEASE (L{protocols.rpc._tables.ReferenceTable}), driven directly.

A recording connection and a fake clock: exports count their sendings and
are forgotten when RELEASEs bring the count to zero; a dead imported
reference queues RELEASE(id, count), sent on the next turn in one write.
"""

from __future__ import annotations

import gc
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._errors import TooManyReferences
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._wire import RELEASE, ROOT_ID, Message
from protocols.rpc._refs import RemoteReference
from protocols.rpc._tables import ReferenceTable


class Transport:
    """Counts the send transactions it is held for (hold/release)."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def hold(self) -> None:
        self.log.append("hold")

    def release(self) -> None:
        self.log.append("release")


class Connection:
    """What the table asks of its connection: RELEASEs sent (between hold and release), failures logged."""

    def __init__(self) -> None:
        self.writes: list[Any] = []
        self.transport = Transport(self.writes)
        self.logged: list[tuple[str, dict[str, Any]]] = []

    def sendObject(self, message: Message) -> None:
        self.writes.append(tuple(message))

    def logFailure(self, kind: str, template: str, level: Any, **fields: Any) -> None:
        self.logged.append((kind, fields))


class Broker:
    """A stand-in for the broker imported references call through (held weakly)."""


class ReferenceTableTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.connection = Connection()
        self.broker = Broker()
        self.clock = Clock()
        self.root = Referenceable()
        self.table = self.make()

    def make(self, limits: CallLimits | None = None) -> ReferenceTable:
        table = ReferenceTable(self.connection, self.broker, self.root, limits or CallLimits(), self.clock)
        table.start()
        return table

    # -- exports

    def test_exportCountsSendings(self) -> None:
        """An object sent twice keeps one id, forgotten only once both sendings are released."""
        obj = Referenceable()
        exportId = self.table.exportFor(obj)
        self.assertEqual(self.table.exportFor(obj), exportId)
        self.table.releaseReceived(Message((RELEASE, exportId, 1)))
        self.assertIs(self.table.localObject(exportId), obj)
        self.table.releaseReceived(Message((RELEASE, exportId, 1)))
        self.assertNotIn(exportId, self.table.exports)
        self.assertNotEqual(self.table.exportFor(obj), exportId)  # ids are never reused

    def test_releaseOfUnknownLogged(self) -> None:
        """A RELEASE of an id not exported is logged (debug) and ignored; the root's is ignored silently."""
        self.table.releaseReceived(Message((RELEASE, 42, 1)))
        self.table.releaseReceived(Message((RELEASE, ROOT_ID, 5)))
        self.assertEqual(self.connection.logged, [("not-exported", {"id": 42})])
        self.assertIs(self.table.localObject(ROOT_ID), self.root)

    def test_exportRoot(self) -> None:
        """A root is exported once, and only a Referenceable."""
        table = ReferenceTable(self.connection, self.broker, None, CallLimits(), self.clock)
        self.assertRaises(TypeError, table.exportRoot, object())
        avatar = Referenceable()
        table.exportRoot(avatar)
        self.assertIs(table.localObject(ROOT_ID), avatar)
        self.assertEqual(table.exportFor(avatar), ROOT_ID)
        self.assertRaises(ValueError, table.exportRoot, Referenceable())

    # -- imports

    def test_oneReferencePerId(self) -> None:
        """An id received again, while its reference lives, gives the same reference; it is owned by this table."""
        ref = self.table.importReference(5, ("example.IThing",))
        self.assertIs(self.table.importReference(5), ref)
        self.assertEqual((ref.exportId, ref.interfaceNames, self.table.importCount), (5, ("example.IThing",), 1))
        self.assertTrue(self.table.owns(ref))
        self.assertFalse(self.table.owns(RemoteReference(Broker(), 5)))  # type: ignore[arg-type]

    def test_deadReferenceReleasedNextTurn(self) -> None:
        """A dead reference queues RELEASE(id, times received), sent on the next turn, all in one write."""
        a = self.table.importReference(5)
        self.table.importReference(5)
        b = self.table.importReference(6)
        del a, b
        gc.collect()
        self.assertEqual((self.connection.writes, self.table.importCount), ([], 2))  # (dead, not yet released)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(0)
        self.assertEqual(self.connection.writes, ["hold", (RELEASE, 5, 2), (RELEASE, 6, 1), "release"])
        self.assertEqual(self.table.importCount, 0)

    def test_rootNeverReleased(self) -> None:
        """The peer's root is not counted, and its reference dying sends nothing."""
        ref = self.table.rootReference()
        self.assertIs(self.table.rootReference(), ref)
        del ref
        gc.collect()
        self.clock.advance(0)
        self.assertEqual(self.connection.writes, [])

    def test_notReleasedBeforeStart(self) -> None:
        """A reference dying before the connection is up sends nothing."""
        table = ReferenceTable(self.connection, self.broker, None, CallLimits(), self.clock)
        table.importReference(5)  # (dropped at once)
        gc.collect()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_maxImports(self) -> None:
        """At most C{maxImports} of the peer's references are held; one more is refused, a known one is not."""
        table = self.make(CallLimits(maxImports=2))
        held = [table.importReference(1), table.importReference(2)]
        self.assertRaises(TooManyReferences, table.importReference, 3)
        self.assertIs(table.importReference(1), held[0])

    def test_connectionLost(self) -> None:
        """Losing the connection forgets every export and import and cancels the queued RELEASEs."""
        self.table.exportFor(Referenceable())
        self.table.importReference(5)  # dies at once: a RELEASE is queued
        gc.collect()
        self.table.connectionLost()
        self.assertEqual((self.table.exports, self.table.importCount, self.clock.getDelayedCalls()), ({}, 0, []))
        self.assertEqual(self.connection.writes, [])
