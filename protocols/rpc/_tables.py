# -*- test-case-name: tests.protocols.rpc.test_tables,tests.protocols.rpc.test_served_call -*-
"""The export and import tables of one connection, and RELEASE.

Contract: an exported object lives in L{ReferenceTable.exports} (id to
C{[object, count]}), counting how many times its id was sent; a sending
whose message is rolled back is taken back.  The receiving side counts how
many times it received the id for its live L{RemoteReference}; when that
reference dies it sends RELEASE(id, count) and the exporter subtracts,
forgetting the object at zero.  A reference sent again while a RELEASE is in
flight is therefore never forgotten too early, and ids are never reused.
RELEASEs are queued by the weakref callback (which may run in the middle of
an encode, so it must not write) and sent together, in one write, on the
next reactor turn.  At most C{CallLimits.maxImports} of the peer's
references are held (a message past it is refused).  Every operation is
O(1); the table refers to its broker weakly, so nothing here is a cycle.
"""

from __future__ import annotations

import weakref
from typing import Any

from twisted.logger import LogLevel

from framing.rpc._errors import TooManyReferences
from framing.rpc._exports import ExportTable
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._wire import RELEASE, ROOT_ID, Message

from ._calls import reactorOf
from ._refs import ImportRecord, RemoteReference


class ReferenceTable(ExportTable):
    """
    What one connection exports and imports: the export half is the
    sans-IO L{framing.rpc._exports.ExportTable} (shared with the clients
    without Twisted); the import half and the RELEASEs are sent on the reactor.

    @ivar exports: export id to C{[object, count]}: the objects this side
        exports and how many sendings of each id are not released yet (the
        root, id 0, is never forgotten).  Read it; change it only through
        L{exportFor} and L{releaseExport}.
    """

    def __init__(self, connection: Any, broker: Any, root: Any, callLimits: CallLimits, clock: Any = None) -> None:
        """
        @param connection: the L{protocols.TokenProtocol} RELEASEs are sent on.
        @param broker: the L{protocols.rpc.Broker} that imported references
            call through (held weakly).
        @param root: the object exported as id 0, or C{None}.
        """
        super().__init__(root)
        self._connection = connection
        self._broker = weakref.ref(broker)
        self._callLimits = callLimits
        self._clock = clock
        self._open = False
        self._imports: dict[int, ImportRecord] = {}
        self._releases: list[Message] = []
        self._releaseCall: Any = None  # an IDelayedCall

    def exportRoot(self, root: Any) -> None:
        """
        Export C{root} as id 0 from now on: a login's avatar, on a
        connection that had no root until its peer logged in.

        @raise ValueError: this side already exports a root.
        @raise TypeError: C{root} is not a L{Referenceable}.
        """
        if not isinstance(root, Referenceable):
            raise TypeError(f"the root must be a Referenceable, not {type(root).__name__}")
        if ROOT_ID in self.exports:
            raise ValueError("this connection already exports a root")
        self.exports[ROOT_ID] = [root, 0]
        self._exportIds[id(root)] = ROOT_ID

    @property
    def importCount(self) -> int:
        """How many ids this side holds a live or not yet released L{RemoteReference} for."""
        return len(self._imports)

    def start(self) -> None:
        """The connection is up: dead references are released."""
        self._open = True

    # -- exports -------------------------------------------------------------------------

    def releaseReceived(self, message: Message) -> None:
        """A RELEASE (a handler of the message table): count the sendings released."""
        _, exportId, count = message
        if exportId != ROOT_ID and not self.releaseExport(exportId, count):
            template = "{peer}: ignoring the release of {id}, which is not exported"
            self._connection.logFailure("not-exported", template, LogLevel.debug, id=exportId)

    # -- imports -------------------------------------------------------------------------

    def rootReference(self) -> RemoteReference:
        """The L{RemoteReference} to the peer's root object (export id 0)."""
        record = self._imports.get(ROOT_ID)
        ref = record() if record is not None else None
        if ref is None:
            # Not counted: nobody sent it, and the root is never released.
            ref = self._newImport(ROOT_ID, 0)
        return ref

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> RemoteReference:
        """
        The L{RemoteReference} for the peer's C{exportId}, just received once
        more, naming C{interfaceNames} (kept from its first arrival: an
        export's class does not change).  Called while decoding.
        """
        record = self._imports.get(exportId)
        if record is not None:
            ref: RemoteReference | None = record()
            if ref is not None:
                record.count += 1
                return ref
        limit = self._callLimits.maxImports
        if limit is not None and len(self._imports) >= limit and record is None:
            raise TooManyReferences(f"this side already holds {len(self._imports)} references of the peer, the limit")
        return self._newImport(exportId, 1, interfaceNames)

    def owns(self, ref: RemoteReference) -> bool:
        """Whether C{ref} came over this connection (only those may be sent back; the peer checks the id)."""
        return ref.broker is self._broker()

    def _newImport(self, exportId: int, count: int, interfaceNames: tuple[str, ...] = ()) -> RemoteReference:
        broker = self._broker()
        assert broker is not None, "the broker is alive while its connection decodes"
        ref = RemoteReference(broker, exportId, interfaceNames)
        # A dead record still waiting for its callback is replaced; the
        # callback still releases what that record counted.
        self._imports[exportId] = ImportRecord(ref, self._referenceDied, exportId, count)
        return ref

    def _referenceDied(self, record: ImportRecord) -> None:
        """Weakref callback: queue the RELEASE (it may run inside an encode, so it must not write)."""
        exportId = record.exportId
        if self._imports.get(exportId) is record:
            del self._imports[exportId]
        if not record.count or exportId == ROOT_ID or not self._open:
            return
        self._releases.append(Message((RELEASE, exportId, record.count)))
        if self._releaseCall is None:
            self._releaseCall = reactorOf(self._clock).callLater(0, self._sendReleases)

    def _sendReleases(self) -> None:
        """Send every queued RELEASE, each its own send transaction, all in one write."""
        self._releaseCall = None
        releases, self._releases = self._releases, []
        if not releases or not self._open:
            return
        transport, send = self._connection.transport, self._connection.sendObject
        transport.hold()
        try:
            for message in releases:
                send(message)
        finally:
            transport.release()

    def connectionLost(self) -> None:
        """Forget every export, import and queued RELEASE."""
        self._open = False
        release, self._releaseCall = self._releaseCall, None
        if release is not None and release.active():
            release.cancel()
        self.forgetExports()
        self._imports.clear()
        self._releases.clear()
