# -*- test-case-name: tests.framing.rpc.test_exports -*-
"""The references of one connection, sans-IO: what this side exports, what it holds of the peer's, and RELEASE.

Contract: L{ExportTable} counts how many times each exported object's id
was sent; a RELEASE(id, count) takes that many back and the object is
forgotten at zero (the root never).  Ids are never reused.  The Twisted
broker's table and every client's are one L{References}, which adds the
import half: one reference per peer id, and a RELEASE due when it dies or
is released (never of the root).  A dying reference only appends to a list (any
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
"""Most of the peer's references a connection holds at once (C{CallLimits.maxImports}'s default)."""


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


class References(ExportTable):
    """
    One connection's references, both halves, for every shell: its exports
    (the root, objects passed in calls and results), the peer's objects it
    holds, and the RELEASEs due (see the module docstring).  The Twisted
    broker's table (L{protocols.rpc._tables.ReferenceTable}) is one; a
    client's session holds one.

    @ivar owner: the connection; a reference belongs here if its
        C{connection} is this (a shell whose references name their
        connection otherwise overrides L{owns}).
    @ivar died: the records of references that died since L{releases}
        (appended by their weakref callbacks, on any thread).
    """

    def __init__(
        self,
        owner: Any,
        makeReference: Callable[[int, tuple[str, ...]], Any] | None = None,
        *,
        root: Any = None,
        maxImports: int | None = DEFAULT_MAX_IMPORTS,
        released: Callable[[], None] | None = None,
        started: bool = True,
    ) -> None:
        """
        @param makeReference: C{makeReference(exportId, interfaceNames)}: this
            side's reference to the peer's object C{exportId} (L{newReference};
            C{None}: a subclass makes them).
        @param root: the object exported as id 0, or C{None}.
        @param maxImports: most of the peer's references held at once (C{None}: no bound).
        @param released: called (on whatever thread the garbage collector
            runs, maybe inside an encode: it must neither block nor encode)
            each time a reference dies with a RELEASE due: the shell's
            hint to send L{releases} soon (L{releaseDue}).
        @param started: RELEASEs are due from now on (else from L{start}).
        """
        super().__init__(root)
        self.owner = owner
        self._makeReference = makeReference
        self._maxImports = maxImports
        self._released = released
        self._imports: dict[int, ImportRecord] = {}
        self.died: list[ImportRecord] = []
        self._open = started

    @property
    def importCount(self) -> int:
        """How many ids of the peer's this side holds a live or not yet released reference for."""
        return len(self._imports)

    def start(self) -> None:
        """The connection is up: references that die from now on are released."""
        self._open = True

    def rootReference(self) -> Any:
        """
        This side's reference to the peer's root (export id 0): one while
        any is alive, counting no arrival (nobody sent it, and the root is
        never released).
        """
        record = self._imports.get(ROOT_ID)
        ref = record() if record is not None else None
        if ref is None:
            ref = self.newReference(ROOT_ID, ())
            self._imports[ROOT_ID] = ImportRecord(ref, self._referenceDied, ROOT_ID, 0)
        return ref

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> Any:
        """
        The reference for the peer's C{exportId}, just received once more,
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
            raise TooManyReferences(f"this side already holds {len(self._imports)} references of the peer, the limit")
        ref = self.newReference(exportId, interfaceNames)
        # A dead record still waiting for its RELEASE is replaced; L{releases} still releases what it counted.
        self._imports[exportId] = ImportRecord(ref, self._referenceDied, exportId, 1)
        return ref

    def _referenceDied(self, record: ImportRecord) -> None:
        """Weakref callback: note the record (atomic), and hint the shell if a RELEASE is due."""
        self.died.append(record)
        if self._open and record.count and record.exportId != ROOT_ID:
            self.releaseDue()

    def newReference(self, exportId: int, interfaceNames: tuple[str, ...]) -> Any:
        """This side's reference to the peer's C{exportId}: C{makeReference}'s (a shell's subclass may make its own)."""
        assert self._makeReference is not None, "References without makeReference: its subclass makes them"
        return self._makeReference(exportId, interfaceNames)

    def releaseDue(self) -> None:
        """A reference died with a RELEASE due: C{released} is told (a shell's subclass may schedule its own)."""
        if self._released is not None:
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
        return Message((RELEASE, exportId, count)) if count and self._open and exportId != ROOT_ID else None

    def releases(self) -> list[Message]:
        """
        The RELEASEs of the references that died since the last call: none
        of the root (wire format 12.5), none before L{start} or after L{end}.
        """
        died = self.died
        messages: list[Message] = []
        while died:
            record = died.pop(0)
            exportId = record.exportId
            if self._imports.get(exportId) is record:
                del self._imports[exportId]
            if record.count and self._open and exportId != ROOT_ID:
                messages.append(Message((RELEASE, exportId, record.count)))
            record.count = 0
        return messages

    def releaseReceived(self, message: Message) -> bool:
        """A RELEASE from the peer: count the sendings released; C{False} if the id is not exported (the root is)."""
        _, exportId, count = message
        return exportId == ROOT_ID or self.releaseExport(exportId, count)

    def end(self) -> None:
        """The connection is over: forget every export and import; nothing is released any more."""
        self._open = False
        self.forgetExports()
        self._imports.clear()
        self.died.clear()
