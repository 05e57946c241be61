# -*- test-case-name: tests.framing.rpc.test_connection,tests.protocols.rpc.test_table -*-
"""One RPC connection's objects, sans-IO, built once for every shell: its registry, its parts and its dispatch.

Contract: an L{RpcConnection} is what the Twisted L{protocols.rpc.Broker}
and L{framing.rpc._session.ClientSession} both are below their codec and
their waiting: the connection's own registry (the RPC messages and, once
L{carryReferences} is called, the references), the
L{framing.rpc._calltable.CallTable}, the L{framing.rpc._drain.Drain} and
the one L{framing.rpc._dispatch.Dispatch} (L{route}).  It handles what
answers this side's calls (ANSWER, FAIL, a refused answer), RELEASE and
GOAWAY, applying their rules, and tells the shell the outcome through its
L{Shell}, a record of narrow callbacks, which also holds the shell's own
handlers of the peer's CALLs and CANCELs.

Cost: built once per connection.  A shell reads L{messages} and
L{controls} in line on its per-message path (one index); an answer is one
dict pop and one callback, a FAIL its rebuild and one callback.  L{end}
forgets the shell, so nothing here refers back to it afterwards.

Design: docs/design/same-bytes.md
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from framing import Registry, Violation
from framing.slicing._registry import DEFAULT_REGISTRY

from ._calltable import CallFailed, CallTable
from ._dispatch import Control, Dispatch, Handler, Handlers, RefusalHandler
from ._drain import Drain, GoingAway
from ._errors import MessageRefused, RuleBroken, UnexpectedAnswer
from ._exports import References
from ._referenceable import Referenceable
from ._references import ReferenceableSlicer, ReferenceUnslicer, RemoteReferenceSlicer, YourReferenceUnslicer
from ._signatures import REF_OPEN_TYPE, YOURREF_OPEN_TYPE
from ._wire import Message, addMessageTypes

Waiter = TypeVar("Waiter")


class Shell(Generic[Waiter]):
    """
    What a shell gives its L{RpcConnection} (L{RpcConnection.route}): its
    handlers of the peer's calls, and its reactions to what the
    connection's rules decide.  Each attribute is called as its name says;
    none is changed once made.  (A plain class, not a dataclass: a
    dataclass compiles its methods when its module is imported, in every
    client process.)
    """

    __slots__ = (
        "callReceived",
        "cancelReceived",
        "callRefused",
        "answered",
        "failed",
        "ignored",
        "goneAway",
        "refused",
        "ruleBroken",
        "peerName",
    )

    def __init__(
        self,
        *,
        callReceived: Handler,
        cancelReceived: Handler,
        callRefused: RefusalHandler,
        answered: Callable[[Waiter, Any], object],
        failed: Callable[[Waiter, BaseException], object],
        ignored: Callable[[int, str], object],
        goneAway: Callable[[], object],
        refused: Callable[[Violation], None],
        ruleBroken: Callable[[RuleBroken, Any], None],
        peerName: Callable[[], str],
    ) -> None:
        """
        @param callReceived: the peer's CALL: admit, run and answer it (the shell's call runner).
        @param cancelReceived: a CANCEL: the peer gave up on its call.
        @param callRefused: a CALL refused after its id: answered with its FAIL (none for a call for no answer).
        @param answered: C{answered(waiter, result)}: the call of C{waiter} was answered with C{result}.
        @param failed: C{failed(waiter, error)}: the call of C{waiter} failed (the peer's FAIL, or an answer
            refused here).
        @param ignored: C{ignored(requestId, what)}: the late answer C{what} of a call given up on, ignored (once).
        @param goneAway: the peer's first GOAWAY came: this side's calls are stopped already; close once idle.
        @param refused: a refusal to count (a refused CANCEL, RELEASE or GOAWAY; an object of no type taken);
            the connection stays.
        @param ruleBroken: end the connection for C{error}, which C{received} broke (an answer to no call too:
            wire format 12.3).
        @param peerName: the peer's address, as the errors naming a call say it.
        """
        self.callReceived = callReceived
        self.cancelReceived = cancelReceived
        self.callRefused = callRefused
        self.answered = answered
        self.failed = failed
        self.ignored = ignored
        self.goneAway = goneAway
        self.refused = refused
        self.ruleBroken = ruleBroken
        self.peerName = peerName


def _unnamed(waiter: object) -> str:
    return "?"


def _unrouted(*arguments: object) -> Any:
    raise RuntimeError("routed before RpcConnection.route, or after its end")


def _noPeer() -> str:
    return "?"


_UNROUTED: Shell[Any] = Shell(
    callReceived=_unrouted,
    cancelReceived=_unrouted,
    callRefused=_unrouted,
    answered=_unrouted,
    failed=_unrouted,
    ignored=_unrouted,
    goneAway=_unrouted,
    refused=_unrouted,
    ruleBroken=_unrouted,
    peerName=_noPeer,
)
"""The shell of a connection not routed yet, or ended: each route raises."""

_UNROUTED_HANDLERS = Handlers(
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
"""The dispatch's handlers before L{RpcConnection.route}: none refers back to the connection."""


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
        dispatch's, L{route}); empty after L{end}.
    @ivar controls: per type, the handler of an object that is no RPC message.
    @ivar dispatch: the L{Dispatch} of L{route} (before it and after L{end}, one whose every route raises).
        Once routed, the connection and its dispatch refer to each other
        (some handlers are its methods) until L{end}, which a shell calls
        when the connection is over: it is then freed without the GC.
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
        self._shell: Shell[Waiter] = _UNROUTED
        self.dispatch = Dispatch(_UNROUTED_HANDLERS)
        self.messages: tuple[Handler, ...] = self.dispatch.messages
        self.controls: dict[type, Control] = self.dispatch.controls

    def carryReferences(self, references: References, referenceType: type) -> None:
        """
        Send and receive references on L{registry}, against C{references}'s
        tables: a L{Referenceable} is exported, a C{referenceType} (the
        shell's reference to the peer's object) is sent back as the peer's
        own, and a received reference becomes the one C{references} makes;
        a RELEASE is counted there.  Once, before the connection's first byte.
        """
        registry = self.registry
        self.references = references
        registry.add_slicer(Referenceable, ReferenceableSlicer(references))
        registry.add_slicer(referenceType, RemoteReferenceSlicer(references))
        registry.add_unslicer(REF_OPEN_TYPE, lambda limits: ReferenceUnslicer(limits, references))
        registry.add_unslicer(YOURREF_OPEN_TYPE, lambda limits: YourReferenceUnslicer(limits, references))

    def route(
        self,
        shell: Shell[Waiter],
        controls: Mapping[type, Control] | None = None,
        answerReceived: Handler | None = None,
    ) -> Dispatch:
        """
        Route what arrives from now on: the peer's calls to C{shell}'s
        handlers, the answers, RELEASEs and GOAWAYs to this connection's
        (which report to C{shell}), an extension's objects by type to
        C{controls}: the connection's one L{Dispatch}, whose tables
        L{messages} and L{controls} are.  Built again only to put a handler
        in front of the peer's calls (the broker's interceptors).

        @param answerReceived: the shell's own match of an ANSWER, in line:
            L{calls}' pop and L{Shell.answered}'s work in one call, an
            ANSWER to no call handed to L{answerReceived} (the broker's;
            the session matches in line before routing, as its C{receive}
            does).  C{None}: L{answerReceived}.
        """
        self._shell = shell
        handlers = self._handlers(shell, answerReceived or self.answerReceived)
        self.dispatch = dispatch = Dispatch(handlers, controls)
        self.messages = dispatch.messages
        self.controls = dispatch.controls
        return dispatch

    def _handlers(self, shell: Shell[Waiter], answerReceived: Handler) -> Handlers:
        """Every route's handler: the shell's for the peer's calls and its reactions, this connection's for the rest."""
        return Handlers(
            callReceived=shell.callReceived,
            answerReceived=answerReceived,
            failReceived=self.failReceived,
            cancelReceived=shell.cancelReceived,
            releaseReceived=self.releaseReceived,
            goAwayReceived=self.goAwayReceived,
            callRefused=shell.callRefused,
            answerRefused=self.answerRefused,
            refused=shell.refused,
            ruleBroken=shell.ruleBroken,
        )

    # -- receiving -------------------------------------------------------------

    def objectReceived(self, obj: Any) -> None:
        """
        Route one top-level object through L{Dispatch.received}: a message
        by its tag, an extension's object by its type, a refusal, or the
        end for no RPC message.  (The shells write its first two steps in
        line on their per-message paths.)
        """
        self.dispatch.received(obj)

    def refused(self, violation: Violation) -> None:
        """Route one refusal (L{Dispatch.refused})."""
        self.dispatch.refused(violation)

    # -- the connection's handlers ------------------------------------------------

    def answerReceived(self, message: Message) -> None:
        """
        An ANSWER: its call answered (L{Shell.answered}); one to no call is
        ignored once if its call was given up on, else it ends the
        connection (L{CallTable.strayAnswer}, wire format 12.3).
        """
        calls = self.calls
        waiter = calls.pop(message[1], None)  # (the CallTable is the dict: the match in one C call)
        if waiter is not None:
            self._shell.answered(waiter, message[2])
            return
        # (an answer to no call, in line: the late answer of a call given up on costs a session no call more)
        unexpected = calls.strayAnswer(message[1], "an answer")
        if unexpected is not None:
            self._shell.ruleBroken(unexpected, message)
            return
        self._shell.ignored(message[1], "an answer")

    def failReceived(self, message: Message) -> None:
        """A FAIL: its call failed with the error it describes (L{CallTable.failed}); one to no call as an ANSWER's."""
        shell = self._shell
        try:
            failed = self.calls.failed(message, shell.peerName)
        except UnexpectedAnswer as unexpected:
            shell.ruleBroken(unexpected, message)
            return
        if failed is None:
            shell.ignored(message[1], "a failure")
            return
        shell.failed(failed[0], failed[1])

    def answerRefused(self, refused: MessageRefused) -> None:
        """
        An ANSWER or FAIL refused after its id: its call failed with the
        violation, naming the call and the peer (L{CallTable.refused}); one
        to no call as an ANSWER's.
        """
        shell = self._shell
        try:
            failed = self.calls.refused(refused, shell.peerName)
        except UnexpectedAnswer as unexpected:
            shell.ruleBroken(unexpected, refused)
            return
        if failed is None:
            shell.ignored(refused.requestId, "a refused answer")
            return
        shell.failed(failed[0], failed[1])

    def releaseReceived(self, message: Message) -> None:
        """A RELEASE: counted against this side's exports (L{References.releaseReceived}); none without references."""
        references = self.references
        if references is not None:
            references.releaseReceived(message)

    def goAwayReceived(self, message: Message) -> None:
        """
        The peer's GOAWAY (a second one ignored, L{Drain.received}): new
        calls fail with L{GoingAway} (L{CallTable.stop}), the calls in
        flight go on, and the shell is told (L{Shell.goneAway}).
        """
        if self.drain.received(message):
            shell = self._shell
            self.calls.stop(self.drain.refusal(shell.peerName()), GoingAway)
            shell.goneAway()

    def end(self) -> None:
        """
        The connection is over: the shell is forgotten (and the dispatch's
        handlers, L{Dispatch.clear}), so nothing here refers back to it;
        nothing is routed after.
        """
        self.dispatch.clear()
        self._shell = _UNROUTED
        self.messages = ()
        self.controls = {}
