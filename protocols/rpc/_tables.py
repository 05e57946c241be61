# -*- test-case-name: tests.protocols.rpc.test_tables,tests.protocols.rpc.test_served_call -*-
"""The export and import tables of one connection on Twisted, and sending RELEASEs.

Contract: the tables and their rules are the sans-IO
L{framing.rpc._exports.References}, every client's too: an exported object
counts how many times its id was sent (a sending whose message is rolled
back is taken back); a live imported reference counts how many times its
id arrived, and once it dies RELEASE(id, count) is due, never of the root;
the exporter subtracts and forgets the object at zero, so a reference sent
again while a RELEASE is in flight is never forgotten too early, and ids
are never reused.  At most C{CallLimits.maxImports} of the peer's
references are held (a message past it is refused).  This shell makes
L{RemoteReference}s and sends the RELEASEs due: the weakref callback (which
may run in the middle of an encode) only schedules them, and they go
together, in one write, on the next reactor turn.  Every operation is
O(1); the table refers to its broker weakly, so nothing here is a cycle.
"""

from __future__ import annotations

import weakref
from typing import Any

from twisted.logger import LogLevel

from framing.rpc._exports import References
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._wire import ROOT_ID, Message

from ._calls import reactorOf
from ._refs import RemoteReference


class ReferenceTable(References):
    """
    What one connection exports and imports: the sans-IO
    L{framing.rpc._exports.References} (the clients' too), whose references
    are L{RemoteReference}s and whose RELEASEs are sent on the reactor.

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
        # (no bound method of its own handed to the base: a cycle would keep the table until a collection)
        super().__init__(None, root=root, maxImports=callLimits.maxImports, started=False)
        self._connection = connection
        self._broker = weakref.ref(broker)
        self._clock = clock
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

    def rootReference(self) -> RemoteReference:
        """The L{RemoteReference} to the peer's root object (export id 0)."""
        ref: RemoteReference = super().rootReference()
        return ref

    def releaseReceived(self, message: Message) -> bool:
        """A RELEASE (a handler of the message table): count the sendings released; one not exported is logged."""
        if super().releaseReceived(message):
            return True
        template = "{peer}: ignoring the release of {id}, which is not exported"
        self._connection.logFailure("not-exported", template, LogLevel.debug, id=message[1])
        return False

    def owns(self, ref: Any) -> bool:
        """Whether C{ref} came over this connection (only those may be sent back; the peer checks the id)."""
        return isinstance(ref, RemoteReference) and ref.broker is self._broker()

    def newReference(self, exportId: int, interfaceNames: tuple[str, ...]) -> RemoteReference:
        """The L{RemoteReference} of the peer's C{exportId} (made while decoding, or for L{rootReference})."""
        broker = self._broker()
        assert broker is not None, "the broker is alive while its connection decodes"
        return RemoteReference(broker, exportId, interfaceNames)

    def releaseDue(self) -> None:
        """A reference died with a RELEASE due (maybe inside an encode: nothing is written now): sent next turn."""
        if self._releaseCall is None:
            self._releaseCall = reactorOf(self._clock).callLater(0, self._sendReleases)

    def _sendReleases(self) -> None:
        """Send every RELEASE due, each its own send transaction, all in one write."""
        self._releaseCall = None
        releases = self.releases()
        if not releases:
            return
        transport, send = self._connection.transport, self._connection.sendObject
        transport.hold()
        try:
            for message in releases:
                send(message)
        finally:
            transport.release()

    def connectionLost(self) -> None:
        """Forget every export, import and RELEASE due."""
        release, self._releaseCall = self._releaseCall, None
        if release is not None and release.active():
            release.cancel()
        self.end()
