# -*- test-case-name: tests.framing.rpc.test_connection,tests.protocols.rpc.test_table -*-
"""One RPC connection's objects, sans-IO, built once for every shell: its registry, its parts and its dispatch.

Contract: an L{RpcConnection} is what the Twisted L{protocols.rpc.Broker}
and the L{framing.rpc._session.ClientSession} (the blocking and asyncio
clients') both are below their waiting: the connection's own registry,
a child of the application's, with the RPC messages
(L{framing.rpc._wire.addMessageTypes}) and, once L{carryReferences} is
told the reference tables, the references sliced and unsliced against them;
the L{framing.rpc._calltable.CallTable} of this side's calls; the
L{framing.rpc._drain.Drain}; and the one L{framing.rpc._dispatch.Dispatch}
(L{route}) from the shell's handlers, which L{objectReceived} and L{refused}
route through.  The shell keeps its codec (bytes in and out: the session's
Decoder and Encoder, the broker's L{protocols.TokenProtocol}) and its
waiting (settled triples, Deferreds), and reads the dispatch's tables in
line on its per-message path (L{messages}, L{controls}).

Cost: built once per connection; nothing on a call's path (a shell indexes
L{messages} itself; L{objectReceived} is that index for a caller that
does not).  L{end} forgets the handlers, so nothing here refers back to
the shell once the connection is over.

Design: docs/design/same-bytes.md
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from framing import Registry, Violation
from framing.slicing._registry import DEFAULT_REGISTRY

from ._calltable import CallFailed, CallTable
from ._dispatch import Control, Dispatch, Handler, Handlers, RpcEndpoint
from ._drain import Drain
from ._referenceable import Referenceable
from ._references import (
    ReferenceableSlicer,
    References,
    ReferenceUnslicer,
    RemoteReferenceSlicer,
    YourReferenceUnslicer,
)
from ._signatures import REF_OPEN_TYPE, YOURREF_OPEN_TYPE
from ._wire import Message, addMessageTypes

Waiter = TypeVar("Waiter")


def _unnamed(waiter: object) -> str:
    return "?"


def _unrouted(*arguments: object) -> None:
    raise RuntimeError("routed before RpcConnection.route")


_UNROUTED = Handlers(
    callReceived=_unrouted,
    answerReceived=_unrouted,
    failReceived=_unrouted,
    cancelReceived=_unrouted,
    releaseReceived=_unrouted,
    goAwayReceived=_unrouted,
    callRefused=_unrouted,
    answerRefused=_unrouted,
    refused=_unrouted,
    ruleBroken=_unrouted,
)
"""The handlers of a connection not routed yet: each raises."""


class RpcConnection(Generic[Waiter]):
    """
    One RPC connection's registry, parts and dispatch (see the module docstring).

    @ivar registry: the connection's own L{Registry}: the application's
        types (its parent's), the RPC messages, the references once carried.
    @ivar calls: the L{CallTable} of this side's calls, by request id, each
        with its C{Waiter} (the shell's: a Deferred, a settled slot).
    @ivar drain: the L{Drain} (GOAWAY either way).
    @ivar references: the L{References} tables references are sliced
        against (L{carryReferences}), or C{None}: none travel.
    @ivar messages: per tag, the handler of a received message (the
        dispatch's, L{route}); empty before and after the connection.
    @ivar controls: per type, the handler of an object that is no RPC message.
    @ivar dispatch: the L{Dispatch} of L{route} (before it, one whose every route raises).
    """

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        maxPending: int | None = None,
        nameOf: Callable[[Waiter], str] = _unnamed,
        callFailed: CallFailed | None = None,
    ) -> None:
        """
        @param registry: the application's types (not changed: the
            connection's registry is its child); C{None}: the built-in ones.
        @param maxPending: most of this side's calls waiting at once (L{CallTable}).
        @param nameOf: a waiter's method name, for the errors naming its call.
        @param callFailed: told of each call failed by the peer or given up (L{CallTable.callFailed}).
        """
        self.registry = Registry(registry if registry is not None else DEFAULT_REGISTRY)
        addMessageTypes(self.registry)
        self.calls: CallTable[Waiter] = CallTable(maxPending, nameOf, callFailed)
        self.drain = Drain()
        self.references: References | None = None
        self.messages: tuple[Handler, ...] = ()
        self.controls: dict[type, Control] = {}
        self.dispatch = Dispatch(_UNROUTED)

    def carryReferences(self, references: References, referenceType: type) -> None:
        """
        Send and receive references on L{registry}, against C{references}'s
        tables: a L{Referenceable} is exported, a C{referenceType} (the
        shell's reference to the peer's object) is sent back as the peer's
        own, and a received reference becomes the one C{references} makes.
        Once, before the connection's first byte.
        """
        registry = self.registry
        self.references = references
        registry.add_slicer(Referenceable, ReferenceableSlicer(references))
        registry.add_slicer(referenceType, RemoteReferenceSlicer(references))
        registry.add_unslicer(REF_OPEN_TYPE, lambda limits: ReferenceUnslicer(limits, references))
        registry.add_unslicer(YOURREF_OPEN_TYPE, lambda limits: YourReferenceUnslicer(limits, references))

    def route(self, endpoint: RpcEndpoint, controls: Mapping[type, Control] | None = None) -> Dispatch:
        """
        Route what arrives to C{endpoint}'s handlers and C{controls} (an
        extension's objects by type) from now on: the connection's one
        L{Dispatch}, whose tables L{messages} and L{controls} are.  Built
        again only to put a handler in front (the broker's interceptors).
        """
        self.dispatch = dispatch = Dispatch(endpoint, controls)
        self.messages = dispatch.messages
        self.controls = dispatch.controls
        return dispatch

    def objectReceived(self, obj: Any) -> None:
        """
        Route one top-level object: a message by its tag and an
        extension's object by its type, in line; anything else through
        L{Dispatch.received} (a refusal, or the end for no RPC message).
        """
        if type(obj) is Message:
            self.messages[obj[0]](obj)
            return
        control = self.controls.get(type(obj))
        if control is not None:
            control(obj)
            return
        self.dispatch.received(obj)

    def refused(self, violation: Violation) -> None:
        """Route one refusal (L{Dispatch.refused})."""
        self.dispatch.refused(violation)

    def end(self) -> None:
        """
        The connection is over: the handlers are forgotten (L{Dispatch.clear}),
        so nothing here refers back to the shell; nothing is routed after.
        """
        self.dispatch.clear()
        self.messages = ()
        self.controls = {}
