# -*- test-case-name: tests.framing.rpc.test_connection,tests.protocols.rpc.test_ref_vectors -*-
"""How references travel, sans-IO: C{rpc.ref} and C{rpc.yourref}, their slicers and unslicers, the import record.

Contract: a L{framing.rpc._referenceable.Referenceable} in an argument or a
result is sent as OPEN C{"rpc.ref"}, the sender's export id, the names of
the remote interfaces its class implements (none for most), CLOSE; the
receiver turns it into the one reference it holds for that id on that
connection (its tables' C{importReference}).  A reference sent back over its
own connection is sent as OPEN C{"rpc.yourref"}, the id, CLOSE, and arrives
as the original object; over any other connection it is an
L{framing.EncodingError}.  The slicers and unslicers know a connection only
as L{References}, its export and import tables: the Twisted broker's
(L{protocols.rpc._tables}) and the clients without Twisted's
(L{framing.rpc._exports}) both are, so the wire side of references is
written once, here.  Everything is O(1) per reference.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol

from zope.interface import implementer

from framing import EncodingError, Limits
from framing._errors import BodyTooLarge, InvalidValue
from framing.slicing._custom import PartsUnslicer
from framing.slicing._interfaces import ISlicer
from framing.wire import STRING

from ._signatures import REF_OPEN_TYPE, YOURREF_OPEN_TYPE

MAX_INTERFACE_NAMES = 16
"""Most interface names accepted with one reference."""
MAX_INTERFACE_NAME = 200
"""Longest interface name accepted, in UTF-8 bytes."""


class References(Protocol):
    """What the reference slicers and unslicers need of a connection's tables."""

    def exportFor(self, obj: Any) -> int:
        """The export id C{obj} is sent under, counting one more sending."""

    def releaseExport(self, exportId: int, count: int) -> bool:
        """Take back C{count} sendings of C{exportId}."""

    def localObject(self, exportId: int) -> Any:
        """The object exported as C{exportId}."""

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> Any:
        """The reference for the peer's C{exportId}, received once more, naming C{interfaceNames}."""

    def owns(self, ref: Any) -> bool:
        """Whether C{ref} belongs to this connection."""


class ImportRecord(weakref.ref[Any]):
    """
    The receiver's record of one imported id: a weak reference to its
    reference (a L{protocols.rpc.RemoteReference}, or a client's
    L{framing.rpc._interfaces.ExportedReference}), and how many times the id was received, which is the
    count sent back in the RELEASE once the reference dies.

    @ivar exportId: the id the other side exports the object under.
    @ivar count: how many times that id was received for this reference.
    """

    __slots__ = ("exportId", "count")

    def __new__(cls, ref: Any, callback: Callable[[ImportRecord], None], exportId: int, count: int) -> ImportRecord:
        return super().__new__(cls, ref, callback)

    def __init__(self, ref: Any, callback: Callable[[ImportRecord], None], exportId: int, count: int) -> None:
        super().__init__(ref, callback)  # type: ignore[call-arg]
        self.exportId = exportId
        self.count = count


# -- slicing ----------------------------------------------------------------------


@implementer(ISlicer)
class ReferenceableSlicer:
    """
    Sends a L{framing.rpc._referenceable.Referenceable} as C{"rpc.ref"}, exporting it in the tables
    (one more sending of its id); the message's L{framing._outgoing.Outgoing}
    takes that sending back if the message is rolled back.
    """

    def __init__(self, tables: References) -> None:
        self.tables = tables

    def slice(self, obj: Any, encoder: Any) -> None:
        tables = self.tables
        exportId = tables.exportFor(obj)
        outgoing = encoder.outgoing
        if outgoing is not None:
            # Not sent after all: the peer never saw this sending of the id.
            outgoing.on_rollback(lambda: tables.releaseExport(exportId, 1))
        names: tuple[str, ...] = getattr(type(obj), "remoteInterfaceNames", ())
        encoder.write_container(REF_OPEN_TYPE, obj, (exportId, *names) if names else (exportId,))


@implementer(ISlicer)
class RemoteReferenceSlicer:
    """Sends a reference to the peer's object home as C{"rpc.yourref"}; refuses one of any other connection."""

    def __init__(self, tables: References) -> None:
        self.tables = tables

    def slice(self, obj: Any, encoder: Any) -> None:
        if not self.tables.owns(obj):
            raise EncodingError("a remote reference can only be sent over the connection it came from")
        encoder.write_container(YOURREF_OPEN_TYPE, obj, (obj.exportId,))


class _IdUnslicer(PartsUnslicer):
    """One part: an export id, which is an INT token (no body kind is accepted)."""

    part_kinds: tuple[frozenset[int], ...] = (frozenset(),)
    part_types: tuple[type, ...] = (int,)

    def __init__(self, limits: Limits, tables: References) -> None:
        super().__init__(limits)
        self.tables = tables

    def finish(self) -> Any:
        if not self.parts:
            raise InvalidValue(f"{self.open_type} needs an export id")
        exportId, *names = self.parts
        if type(exportId) is not int or exportId < 0:
            raise InvalidValue(f"{self.open_type} needs a non-negative export id")
        return self.resolve(exportId, tuple(names))

    def resolve(self, exportId: int, names: tuple[str, ...]) -> Any:
        raise NotImplementedError


class ReferenceUnslicer(_IdUnslicer):
    """
    Builds the reference for an id the sender exports (the tables' C{importReference}): an INT, then
    up to L{MAX_INTERFACE_NAMES} STRING interface names of at most
    L{MAX_INTERFACE_NAME} bytes each (refused at their headers).
    """

    open_type = REF_OPEN_TYPE
    part_kinds: tuple[frozenset[int], ...] = (frozenset(),) + (frozenset({STRING}),) * MAX_INTERFACE_NAMES
    part_types: tuple[type, ...] = (int,) + (str,) * MAX_INTERFACE_NAMES

    def check_token(self, kind: int, size: int) -> None:
        super().check_token(kind, size)
        if size > MAX_INTERFACE_NAME and kind == STRING:
            raise BodyTooLarge(f"an interface name of {size} bytes, the limit is {MAX_INTERFACE_NAME}")

    def resolve(self, exportId: int, names: tuple[str, ...]) -> Any:
        return self.tables.importReference(exportId, names)


class YourReferenceUnslicer(_IdUnslicer):
    """Builds the local object for an id this side exports."""

    open_type = YOURREF_OPEN_TYPE

    def resolve(self, exportId: int, names: tuple[str, ...]) -> Any:
        return self.tables.localObject(exportId)
