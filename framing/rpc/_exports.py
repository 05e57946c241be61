# -*- test-case-name: tests.framing.rpc.test_exports -*-
"""The references of one connection, sans-IO: what this side exports, what it holds of the peer's, and RELEASE.

Contract: L{ExportTable} counts how many times each exported object's id
was sent; a RELEASE(id, count) takes that many back and the object is
forgotten at zero (the root never).  Ids are never reused.  The Twisted
broker's table is one; L{ClientReferences}, the clients' without Twisted,
adds the import half: one reference per server id, and a RELEASE due when
it dies or is released.  A dying reference only appends to a list (any
thread, any moment); the RELEASEs are made by L{releases} when the session
is asked what to send.  At most C{maxImports} references are held
(L{TooManyReferences}).

Cost: every operation O(1); L{releases} O(references died since).

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from framing._errors import InvalidValue

from ._errors import TooManyReferences
from ._references import ImportRecord
from ._wire import RELEASE, ROOT_ID, Message

DEFAULT_MAX_IMPORTS = 10_000
"""Most of the server's references a client holds at once, as the Twisted side's C{CallLimits.maxImports}."""


class ExportTable:
    """
    What one connection exports.

    @ivar exports: export id to C{[object, count]}: the objects this side
        exports and how many sendings of each id are not released yet (the
        root, id 0, is never forgotten).  Read it; change it only through
        L{exportFor} and L{releaseExport}.
    """

    def __init__(self, root: Any = None) -> None:
        """
        @param root: the object exported as id 0, or C{None} (a client exports no root).
        """
        self._exportCounter = itertools.count(ROOT_ID + 1)
        self.exports: dict[int, list[Any]] = {}
        self._exportIds: dict[int, int] = {}
        if root is not None:
            self.exports[ROOT_ID] = [root, 0]
            self._exportIds[id(root)] = ROOT_ID

    @property
    def exportCount(self) -> int:
        """How many objects this side exports (the root included)."""
        return len(self.exports)

    def exportFor(self, obj: Any) -> int:
        """
        The export id under which C{obj} is being sent (a new id the first
        time), counting one more sending of it.  Called while encoding.
        """
        key = id(obj)
        exportId = self._exportIds.get(key)
        if exportId is None:
            exportId = next(self._exportCounter)
            self._exportIds[key] = exportId
            self.exports[exportId] = [obj, 1]
        else:
            self.exports[exportId][1] += 1
        return exportId

    def releaseExport(self, exportId: int, count: int) -> bool:
        """Count C{count} sendings of C{exportId} as released; forget it at zero.  False if unknown."""
        entry = self.exports.get(exportId)
        if entry is None:
            return False
        entry[1] -= count
        if entry[1] <= 0 and exportId != ROOT_ID:
            del self.exports[exportId]
            del self._exportIds[id(entry[0])]
        return True

    def localObject(self, exportId: int) -> Any:
        """
        The object this side exports as C{exportId} (a reference coming home).

        @raise InvalidValue: nothing is exported under C{exportId}.
        """
        entry = self.exports.get(exportId)
        if entry is None:
            raise InvalidValue(f"no object is exported as {exportId} on this connection")
        return entry[0]

    def forgetExports(self) -> None:
        """Forget every export (the connection is over)."""
        self.exports.clear()
        self._exportIds.clear()


class ClientReferences(ExportTable):
    """
    A client's references on one connection: its exports (callbacks it
    passed), the server's objects it holds, and the RELEASEs due (see the
    module docstring).

    @ivar owner: the client's connection; a reference belongs here if its
        C{connection} is this.
    """

    def __init__(
        self,
        owner: Any,
        makeReference: Callable[[int, tuple[str, ...]], Any],
        *,
        maxImports: int | None = DEFAULT_MAX_IMPORTS,
        released: Callable[[], None] | None = None,
    ) -> None:
        """
        @param makeReference: C{makeReference(exportId, interfaceNames)}: the
            client's reference to the server's object C{exportId}.
        @param maxImports: most of the server's references held at once (C{None}: no bound).
        @param released: called (on whatever thread the garbage collector
            runs, maybe inside an encode: it must neither block nor encode)
            each time a reference dies with a RELEASE due: the I/O layer's
            hint to send L{releases} soon.
        """
        super().__init__()
        self.owner = owner
        self._makeReference = makeReference
        self._maxImports = maxImports
        self._released = released
        self._imports: dict[int, ImportRecord] = {}
        self.died: list[ImportRecord] = []
        """The records of references that died since L{releases} (appended by their weakref callbacks)."""
        self._open = True

    @property
    def importCount(self) -> int:
        """How many ids of the server's this side holds a live or not yet released reference for."""
        return len(self._imports)

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> Any:
        """
        The reference for the server's C{exportId}, just received once more,
        naming C{interfaceNames} (kept from its first arrival).  Called while decoding.

        @raise TooManyReferences: a new one past C{maxImports}.
        """
        record = self._imports.get(exportId)
        if record is not None:
            ref = record()
            if ref is not None:
                record.count += 1
                return ref
        limit = self._maxImports
        if limit is not None and record is None and len(self._imports) >= limit:
            raise TooManyReferences(f"this side already holds {len(self._imports)} references of the server, the limit")
        ref = self._makeReference(exportId, interfaceNames)
        # A dead record still waiting for its RELEASE is replaced; L{releases} still releases what it counted.
        self._imports[exportId] = ImportRecord(ref, self._referenceDied, exportId, 1)
        return ref

    def _referenceDied(self, record: ImportRecord) -> None:
        """Weakref callback: note the record (atomic), and hint the I/O layer."""
        self.died.append(record)
        if self._open and record.count and self._released is not None:
            self._released()

    def owns(self, ref: Any) -> bool:
        """Whether C{ref} came over this connection (only those may be sent back)."""
        return getattr(ref, "connection", None) is self.owner

    def release(self, ref: Any) -> Message | None:
        """
        The RELEASE of C{ref}, released now by its holder (its later death
        then releases nothing); C{None} if nothing is due (the root, or
        released already).
        """
        exportId: int = ref.exportId
        record = self._imports.get(exportId)
        if record is None or record() is not ref:
            return None
        del self._imports[exportId]
        count, record.count = record.count, 0
        return Message((RELEASE, exportId, count)) if count and self._open else None

    def releases(self) -> list[Message]:
        """The RELEASEs of the references that died since the last call (none once the connection is over)."""
        died = self.died
        messages: list[Message] = []
        while died:
            record = died.pop(0)
            exportId = record.exportId
            if self._imports.get(exportId) is record:
                del self._imports[exportId]
            if record.count and self._open:
                messages.append(Message((RELEASE, exportId, record.count)))
                record.count = 0
        return messages

    def releaseReceived(self, message: Message) -> bool:
        """A RELEASE from the server: count the sendings released; C{False} if the id is not exported."""
        _, exportId, count = message
        return exportId == ROOT_ID or self.releaseExport(exportId, count)

    def end(self) -> None:
        """The connection is over: forget every export and import; nothing is released any more."""
        self._open = False
        self.forgetExports()
        self._imports.clear()
        self.died.clear()
