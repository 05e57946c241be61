# -*- test-case-name: tests.framing.rpc.test_dispatch,tests.protocols.rpc.test_dispatch_alike -*-
"""The one routing of what an RPC connection receives, for every shell: which handler takes each top-level object.

Contract: an endpoint (L{RpcEndpoint}: the handlers an
L{framing.rpc._connection.RpcConnection} gives, its own and its shell's)
names its handlers;
L{Dispatch} routes to them (C{docs/wire-format.md} 12.4): a message by its
tag; a L{MessageRefused} by its tag (a CALL's to C{callRefused}, an ANSWER's
or FAIL's to C{answerRefused}, any other's to C{refused}, as any other
L{framing.Violation}); an extension's object by its type (C{controls}); a
L{MessageWithoutId} and an object that is no RPC message end the connection
(C{ruleBroken}, with the error made here).  The shells react, each its own
way, and deliver nothing once the connection ended.

Cost: built once per connection.  A message is one tuple index, an
extension's object one dict lookup: a shell takes them in line from
L{Dispatch.messages} and L{Dispatch.controls}, then hands the rest to
L{Dispatch.received} or L{Dispatch.refused}.

Design: docs/design/same-bytes.md
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from framing import Violation

from ._errors import MessageRefused, MessageWithoutId, NotAnRpcMessage, RuleBroken, UnreadableRequestId
from ._wire import ANSWER, CALL, CANCEL, FAIL, GOAWAY, MESSAGES, RELEASE, Message

Handler = Callable[[Message], object]
"""What a received message of one kind is handed to (what it returns is dropped)."""

RefusalHandler = Callable[[MessageRefused], None]
"""What the refusal of a message of one kind, after its id arrived, is handed to."""

Control = Callable[[Any], object]
"""What a top-level object of one type that is no RPC message (an extension's) is handed to; its result is dropped."""


class RpcEndpoint(Protocol):
    """The handlers every RPC endpoint has, one per route of L{Dispatch}."""

    def callReceived(self, message: Message) -> object:
        """The peer's CALL: admit, run and answer it."""

    def answerReceived(self, message: Message) -> object:
        """An ANSWER: its call's result (an answer to no call breaks a rule: C{docs/wire-format.md} 12.3)."""

    def failReceived(self, message: Message) -> object:
        """A FAIL: its call's error."""

    def cancelReceived(self, message: Message) -> object:
        """A CANCEL: the peer gave up on its call."""

    def releaseReceived(self, message: Message) -> object:
        """A RELEASE: the peer dropped references to an export."""

    def goAwayReceived(self, message: Message) -> object:
        """A GOAWAY: the peer is going away (C{docs/wire-format.md} 12.1)."""

    def callRefused(self, refused: MessageRefused) -> None:
        """A CALL refused after its id: answered with its FAIL (none for a call for no answer)."""

    def answerRefused(self, refused: MessageRefused) -> None:
        """An ANSWER or FAIL refused after its id: its call fails with the refusal."""

    def refused(self, violation: Violation) -> None:
        """Any other refusal (a CANCEL, RELEASE or GOAWAY one too): counted as a refusal; the connection stays up."""

    def ruleBroken(self, error: RuleBroken, received: Any) -> None:
        """End the connection for C{error}, made here for C{received} (a L{MessageWithoutId}, or no RPC message)."""


@dataclass(frozen=True, slots=True)
class Handlers:
    """
    An L{RpcEndpoint} whose handlers are other objects' methods (a
    connection's and its shell's): each field is the handler of that name.
    """

    callReceived: Handler
    answerReceived: Handler
    failReceived: Handler
    cancelReceived: Handler
    releaseReceived: Handler
    goAwayReceived: Handler
    callRefused: RefusalHandler
    answerRefused: RefusalHandler
    refused: Callable[[Violation], None]
    ruleBroken: Callable[[RuleBroken, Any], None]


class Dispatch:
    """
    One endpoint's routing (see the module docstring), built once.

    @ivar messages: per tag (L{MESSAGES}), the handler of a message of that kind.
    @ivar refusals: per tag, the handler of a L{MessageRefused} of that kind.
    @ivar controls: per type, the handler of an object that is no RPC message.
    """

    __slots__ = ("controls", "messages", "refusals", "_refused", "_ruleBroken")

    def __init__(self, endpoint: RpcEndpoint, controls: Mapping[type, Control] | None = None) -> None:
        handlers: dict[int, Handler] = {
            CALL: endpoint.callReceived,
            ANSWER: endpoint.answerReceived,
            FAIL: endpoint.failReceived,
            CANCEL: endpoint.cancelReceived,
            RELEASE: endpoint.releaseReceived,
            GOAWAY: endpoint.goAwayReceived,
        }
        # A call waits on a CALL, an ANSWER and a FAIL: their refusals go to that call; any other is counted.
        refusals: dict[int, RefusalHandler] = {
            CALL: endpoint.callRefused,
            ANSWER: endpoint.answerRefused,
            FAIL: endpoint.answerRefused,
        }
        self.messages: tuple[Handler, ...] = tuple(handlers[kind.tag] for kind in MESSAGES)
        self.refusals: tuple[RefusalHandler, ...] = tuple(refusals.get(kind.tag, endpoint.refused) for kind in MESSAGES)
        self.controls: dict[type, Control] = dict(controls or {})
        self._refused: Callable[[Violation], None] = endpoint.refused
        self._ruleBroken: Callable[[RuleBroken, Any], None] = endpoint.ruleBroken

    def received(self, obj: Any) -> None:
        """
        Route one top-level object: a message by its tag, an extension's
        object by its type, a refusal (L{refused}); anything else ends the
        connection (L{NotAnRpcMessage}).
        """
        if type(obj) is Message:
            self.messages[obj[0]](obj)
            return
        control = self.controls.get(type(obj))
        if control is not None:
            control(obj)
        elif isinstance(obj, Violation):
            self.refused(obj)
        else:
            self._ruleBroken(notAnRpcMessage(obj), obj)

    def refused(self, violation: Violation) -> None:
        """
        Route one refusal: a L{MessageRefused} by its tag; a
        L{MessageWithoutId} ends the connection (L{UnreadableRequestId});
        any other is C{refused}.
        """
        if type(violation) is MessageRefused:
            self.refusals[violation.tag](violation)
        elif type(violation) is MessageWithoutId:
            self._ruleBroken(unreadableRequestId(violation), violation)
        else:
            self._refused(violation)

    def clear(self) -> None:
        """
        Forget the endpoint's handlers (its connection ended): nothing here
        refers back to it any more, so an endpoint that holds its own
        dispatch is freed without a garbage collection.  Nothing may be
        routed after.
        """
        self.messages = self.refusals = ()
        self.controls = {}
        self._refused = self._ruleBroken = _cleared


def _cleared(*arguments: object) -> None:
    raise RuntimeError("routed after its connection ended (Dispatch.clear)")


def unreadableRequestId(refused: MessageWithoutId) -> UnreadableRequestId:
    """The error that ends a connection for C{refused}: what went unanswered, and why it was refused."""
    if refused.tag == CALL:
        what = "a call refused before its request id arrived cannot be answered"
    else:
        what = "an answer refused before its request id arrived leaves its call waiting"
    return UnreadableRequestId(f"{what} ({refused.code}: {refused.violation})")


def notAnRpcMessage(obj: Any) -> NotAnRpcMessage:
    """The error that ends a connection for C{obj}, a top-level object that is no RPC message (nor an extension's)."""
    return NotAnRpcMessage(f"a top-level {type(obj).__name__} where only rpc messages are taken")
