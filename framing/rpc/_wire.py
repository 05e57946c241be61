# -*- test-case-name: tests.protocols.rpc.test_wire_cores,tests.framing.rpc.test_session -*-
"""The RPC messages on the wire: six small tagged tuples under one open-type.

Contract: every RPC message is one top-level chunkwire object, OPEN C{"rpc"},
an INT tag, the fields of that kind, CLOSE::

    (CALL,    requestId, targetId, name, kwargsDictOrNone, *args)
    (CALL,    requestId, targetId, name, (kwargsDictOrNone, deadlineOrNone, metadataOrNone), *args)
    (ANSWER,  requestId, result)
    (FAIL,    requestId, typeName, message, tracebackOrNone, detailsOrNone)
    (CANCEL,  requestId)
    (RELEASE, exportId, count)
    (GOAWAY,  graceMilliseconds)

L{MESSAGES} is the one table of these shapes; L{MessageUnslicer} is built
from it and hands a CALL on as C{(CALL, id, target, name, args_tuple,
kwargs_dict)}, with C{deadline, metadata} after them when it carried a call
context.  Request id L{NO_ANSWER} (0) asks for no answer.  The unslicer
checks each field as it arrives, naming it in C{where}; once it has the tag
and the id, a refusal of the message is a L{MessageRefused} carrying both,
so that call fails by id; a CALL, ANSWER or FAIL refused before its id is a
L{MessageWithoutId}, which drops the connection.  Handlers are code, chosen
by tag in one routing every endpoint builds (L{framing.rpc._dispatch}).

Cost per field: one table lookup and one check.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zope.interface import implementer

from framing import Limits, Registry, Violation
from framing._errors import InvalidValue, KindRefused, TooManyItems, short_repr
from framing.slicing._builtin import BudgetedUnslicer, DictUnslicer, TupleUnslicer
from framing.slicing._interfaces import ISlicer
from framing.wire import KIND_NAMES, OPEN, STRING

from ._errors import MessageRefused, MessageWithoutId, isTypeName

OPEN_TYPE = "rpc"
"""The open-type name of every RPC message."""

MAX_NAME = 256
"""Longest method or error type name accepted, in characters."""

ROOT_ID = 0
"""The export id of the object a server exposes; never released."""

NO_ANSWER = 0
"""The request id of a CALL that asks for no answer (calls that wait are numbered from 1)."""


class Message(tuple):  # type: ignore[type-arg]
    """
    One RPC message, as sent and as received.  A tuple subclass so that its
    slicer is found by type and a received message cannot be confused with a
    plain tuple a peer sent at the top level.
    """

    __slots__ = ()


@implementer(ISlicer)
class MessageSlicer:
    """Writes a L{Message} as OPEN C{"rpc"}, its fields, CLOSE."""

    # (declared: the compiled core then writes whole messages, see framing.Encoder.tokens)
    record_name = OPEN_TYPE

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(OPEN_TYPE, obj, obj)


# -- field checks ---------------------------------------------------------------


_INT_END = 1 << 64
"""Ids and counts are INT tokens: below 2**64 (a BIGINT is refused at its header, or here once decoded)."""


def _identifier(value: Any) -> None:
    if type(value) is not int or not 0 <= value < _INT_END:
        raise InvalidValue(f"expected an integer from 0 to 2**64 - 1, got {short_repr(value)}")


def _count(value: Any) -> None:
    if type(value) is not int or not 1 <= value < _INT_END:
        raise InvalidValue(f"expected an integer from 1 to 2**64 - 1, got {short_repr(value)}")


def _name(value: Any) -> None:
    if type(value) is not str or not value or len(value) > MAX_NAME:
        raise InvalidValue(f"expected a name of 1 to {MAX_NAME} characters, got {short_repr(value)}")


def _typeName(value: Any) -> None:
    if not isTypeName(value):
        raise InvalidValue(
            f"expected a type name (dot-separated ASCII identifiers, 1 to {MAX_NAME} characters), got "
            f"{short_repr(value)}"
        )


def _text(value: Any) -> None:
    if type(value) is not str:
        raise KindRefused(f"expected a string, got {type(value).__name__}")


def _optionalText(value: Any) -> None:
    if value is not None and type(value) is not str:
        raise KindRefused(f"expected a string or None, got {type(value).__name__}")


def _optionalKwargs(value: Any) -> None:
    if value is None:
        return
    if type(value) is not dict:
        raise KindRefused(f"expected a dict of keyword arguments, got {type(value).__name__}")
    for key in value:
        if type(key) is not str:
            raise InvalidValue(f"keyword argument names must be strings, not {short_repr(key)}")


def _kwargsOrContext(value: Any) -> None:
    """A CALL's keyword arguments (a dict or None), or its call context (a 3-tuple; see the module docstring)."""
    if type(value) is tuple:
        if len(value) != 3:
            raise InvalidValue(f"a call context has 3 fields, got {len(value)}")
        kwargs, deadline, metadata = value
        if type(kwargs) is tuple:
            raise KindRefused("expected a dict of keyword arguments, got tuple")
        _optionalKwargs(kwargs)
        if deadline is not None and (type(deadline) is not int or not 0 <= deadline < _INT_END):
            raise InvalidValue(f"a deadline is milliseconds from 0 to 2**64 - 1, got {short_repr(deadline)}")
        if metadata is not None:
            if type(metadata) is not dict:
                raise KindRefused(f"expected a dict of call metadata, got {type(metadata).__name__}")
            for key, text in metadata.items():
                if type(key) is not str or not key or len(key) > MAX_NAME:
                    raise InvalidValue(f"a metadata key is a name of 1 to {MAX_NAME} characters, not {short_repr(key)}")
                if type(text) is not str:
                    raise KindRefused(f"a metadata value is a string, not {type(text).__name__}")
        return
    _optionalKwargs(value)


def checkMetadataSize(metadata: dict[str, str] | None, limits: Limits) -> None:
    """
    Refuse call metadata past C{limits} (C{max_call_metadata} entries,
    C{max_call_metadata_length} characters of keys and values together).

    @raise TooManyItems: too many entries.
    @raise InvalidValue: too many characters.
    """
    if not metadata:
        return
    if len(metadata) > limits.max_call_metadata:
        raise TooManyItems(f"call metadata has more than {limits.max_call_metadata} entries")
    size = 0
    for key, text in metadata.items():
        size += len(key) + len(text)
    if size > limits.max_call_metadata_length:
        raise InvalidValue(
            f"call metadata has {size} characters, more than the {limits.max_call_metadata_length} allowed"
        )


def callContext(kwargs: dict[str, Any] | None, deadline: int | None, metadata: dict[str, str] | None) -> Any:
    """
    What a CALL carries in its keyword arguments' place: C{kwargs or None}
    when there is neither a deadline (milliseconds left) nor metadata, else
    the call context C{(kwargs or None, deadline, metadata or None)}.
    """
    if deadline is None and not metadata:
        return kwargs or None
    return (kwargs or None, deadline, metadata or None)


def _optionalTuple(value: Any) -> None:
    if value is not None and type(value) is not tuple:
        raise KindRefused(f"expected a tuple or None, got {type(value).__name__}")


Check = Callable[[Any], None] | None
_NO_BODY: frozenset[int] = frozenset()
_STRING = frozenset({STRING})
_OPEN = frozenset({OPEN})


@dataclass(frozen=True)
class Field:
    """
    One field of a message kind.

    @ivar name: its name in a refusal's C{where}.
    @ivar check: called with the decoded value; raises a L{framing.Violation}
        to refuse the message (C{None}: any value).
    @ivar bodies: the body kinds accepted at the field's header
        (C{frozenset()}: only a body-less token such as an INT; C{None}: any).
    """

    name: str
    check: Check = None
    bodies: frozenset[int] | None = None


@dataclass(frozen=True)
class Kind:
    """
    One row of L{MESSAGES}: a kind of RPC message.

    @ivar tag: the INT that opens it on the wire (its index in L{MESSAGES}).
    @ivar name: its name in logs.
    @ivar fields: its fields after the tag, in wire order.
    @ivar awaited: its request id ties it to a call someone waits for (a
        CALL, or an answer to one): refused before that id arrived, it is
        reported as a L{MessageWithoutId}, and the broker drops the
        connection rather than leave the caller waiting for ever.
    """

    tag: int
    name: str
    fields: tuple[Field, ...]
    awaited: bool = False


_ID = Field("id", _identifier, _NO_BODY)

CALL, ANSWER, FAIL, CANCEL, RELEASE, GOAWAY = range(6)
"""The tags of the message kinds (GOAWAY: see L{protocols.rpc._drain})."""

MESSAGES: tuple[Kind, ...] = (
    # A CALL's arguments follow its fields, one field each (see the module docstring).
    Kind(
        CALL,
        "call",
        (
            _ID,
            Field("target", _identifier, _NO_BODY),
            Field("name", _name, _STRING),
            Field("kwargs", _kwargsOrContext, _OPEN),
        ),
        awaited=True,
    ),
    Kind(
        ANSWER,
        "answer",
        (_ID, Field("result")),
        awaited=True,
    ),
    Kind(
        FAIL,
        "fail",
        (
            _ID,
            Field("type", _typeName, _STRING),
            Field("message", _text, _STRING),
            Field("traceback", _optionalText, _STRING),
            Field("details", _optionalTuple, _OPEN),
        ),
        awaited=True,
    ),
    Kind(CANCEL, "cancel", (_ID,)),
    Kind(RELEASE, "release", (_ID, Field("count", _count, _NO_BODY))),
    Kind(GOAWAY, "goaway", (Field("grace", _identifier, _NO_BODY),)),
)
"""Every kind of RPC message, one row each, indexed by tag (h11's table
style): a new kind is one row here, its route in L{framing.rpc._dispatch},
and its handler on each endpoint."""

assert all(kind.tag == index for index, kind in enumerate(MESSAGES))

_KWARGS = 4
_ARGS = 5
"""Where a CALL's keyword arguments (or None, or its call context) and its first argument stand."""


def _call(items: list[Any]) -> Message:
    """The CALL that C{items} (its fields, in wire order, checked) are handed on as."""
    kwargs = items[_KWARGS]
    if type(kwargs) is tuple:
        return Message((*items[:_KWARGS], tuple(items[_ARGS:]), kwargs[0] or {}, kwargs[1], kwargs[2] or {}))
    return Message((*items[:_KWARGS], tuple(items[_ARGS:]), kwargs or {}))


# What the unslicer needs per tag, per position (the tag itself first):
# the check of the decoded value, the body kinds accepted at the header, and
# the field's name.
_AWAITED = tuple(kind.awaited for kind in MESSAGES)
_CHECKS = tuple((None, *(field.check for field in kind.fields)) for kind in MESSAGES)
_BODIES = tuple((_NO_BODY, *(field.bodies for field in kind.fields)) for kind in MESSAGES)
_NAMES = tuple(("tag", *(field.name for field in kind.fields)) for kind in MESSAGES)


def buildMessage(items: list[Any]) -> Message | None:
    """
    The L{Message} that L{MessageUnslicer} finishes with, given the fields
    it would receive; C{None} wherever it would refuse them (the compiled
    core's record builder: the pure decoder then reads the message again and
    refuses it in its own words, with its C{where}).  The fields are values
    of built-in kinds, so each one's body kind follows from its type and
    the checks of the decoded values are the unslicer's whole test.
    """
    count = len(items)
    if not count:
        return None
    tag = items[0]
    if type(tag) is not int or not 0 <= tag < len(_CHECKS):
        return None
    # The commonest messages with their checks written out: an ANSWER, a CALL without keyword arguments.
    # (an id's bound: the compiled reader hands an INT and a BIGINT over alike, as ints)
    if tag == ANSWER and count == 3:
        requestId = items[1]
        return Message(items) if type(requestId) is int and 0 <= requestId < _INT_END else None
    if tag == CALL and count >= _ARGS and items[_KWARGS] is None:
        requestId, target, name = items[1], items[2], items[3]
        if type(requestId) is int and 0 <= requestId < _INT_END and type(target) is int and 0 <= target < _INT_END:
            if type(name) is str and 0 < len(name) <= MAX_NAME:
                return Message((CALL, requestId, target, name, tuple(items[_ARGS:]), {}))
        return None
    checks = _CHECKS[tag]
    if count != len(checks) and not (tag == CALL and count >= _ARGS):
        return None
    if tag == CALL and type(items[_KWARGS]) is tuple:
        # A call context: its metadata is checked against the decoder's Limits, which only the unslicer has.
        return None
    try:
        for index in range(1, len(checks)):
            check = checks[index]
            if check is not None:
                check(items[index])
    except Violation:
        return None
    if tag == CALL:
        return _call(items)
    return Message(items)


_SLICER = MessageSlicer()


def addMessageTypes(registry: Registry) -> None:
    """Make C{registry} send L{Message}s and build them from OPEN C{"rpc"} (every RPC connection does)."""
    registry.add_slicer(Message, _SLICER)
    registry.add_unslicer(OPEN_TYPE, MessageUnslicer)


class MetadataUnslicer(DictUnslicer):
    """
    A CALL's metadata, refused at the header of the key or value that
    proves it too large, before its body is kept: an entry past
    C{Limits.max_call_metadata}, a key longer than a name can be, or
    UTF-8 bodies past four bytes for each of C{max_call_metadata_length}
    characters (a character takes one to four); L{checkMetadataSize}
    counts the characters exactly once the dict is built.  So a peer's
    metadata costs at most about C{4 * max_call_metadata_length} bytes
    held and C{max_call_metadata} entries built, however long it claims.
    """

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self._bodyBytes = 0

    def check_token(self, kind: int, size: int) -> None:
        limits = self.limits
        if kind != STRING:
            raise KindRefused(f"call metadata is text keys and values, not {KIND_NAMES.get(kind, kind)}")
        if self.expecting_key():
            if len(self.items) >= limits.max_call_metadata:
                raise TooManyItems(f"call metadata has more than {limits.max_call_metadata} entries")
            if size > 4 * MAX_NAME:
                raise InvalidValue(f"a metadata key is a name of 1 to {MAX_NAME} characters, not {size} bytes")
        self._bodyBytes += size
        if self._bodyBytes > 4 * limits.max_call_metadata_length:
            raise InvalidValue(
                f"call metadata has more than {4 * limits.max_call_metadata_length} bytes, more than the "
                f"{limits.max_call_metadata_length} characters allowed"
            )


class ContextUnslicer(TupleUnslicer):
    """A CALL's call context: a 3-tuple, its metadata (the third) built by a L{MetadataUnslicer}."""

    def check_token(self, kind: int, size: int) -> None:
        if len(self.items) >= 3:
            raise InvalidValue("a call context has 3 fields")

    def child_factory(self, name: bytes, factory: Any) -> Any:
        return MetadataUnslicer if len(self.items) == 2 and name == b"dict" else factory


class MessageUnslicer(BudgetedUnslicer):
    """
    Builds a L{Message}, checking each field as it arrives.  Its fields
    count towards the decoder's per-object budget like a list's items.

    @ivar items: the fields received so far.
    """

    open_type = OPEN_TYPE
    # The compiled core builds whole messages of built-in values itself (framing.slicing._interfaces.IUnslicer).
    record_builder = staticmethod(buildMessage)
    record_extra_items = _ARGS
    # ... and builds an ANSWER and a CALL without keyword arguments without calling it (the same checks, in C).
    record_rpc = (Message, MAX_NAME)

    def __init__(self, limits: Limits) -> None:
        # BudgetedUnslicer's attributes, set here once (one per message):
        # the fixed fields, then up to max_items arguments.
        self.limits = limits
        self.max_length = self.cap = limits.max_items + _ARGS
        self.settled = self.extra = 0
        self._counter = None
        self.items: list[Any] = []
        self._checks: tuple[Check, ...] = (None,)
        self._bodies: tuple[frozenset[int] | None, ...] = (_NO_BODY,)

    def check_token(self, kind: int, size: int) -> None:
        index = len(self.items)
        bodies = self._bodies
        if index >= len(bodies):
            if self._isCall():
                self._checkArgumentCount(index)
                return
            raise TooManyItems(f"an rpc {self._kind()} message has {len(bodies)} fields")
        allowed = bodies[index]
        if allowed is not None and kind not in allowed:
            raise KindRefused(f"an rpc message field cannot be {KIND_NAMES.get(kind, kind)}")

    def receive_child(self, obj: Any) -> None:
        items = self.items
        index = len(items)
        if index >= self.cap:
            self.full()
        if index == 0:
            self._setKind(obj)
        else:
            checks = self._checks
            if index < len(checks):
                check = checks[index]
                if check is not None:
                    check(obj)
                    if index == _KWARGS and type(obj) is tuple:
                        # (a CALL's context, checked by the kwargs check above: its metadata's size here)
                        checkMetadataSize(obj[2], self.limits)
            elif self._isCall():
                self._checkArgumentCount(index)
            else:
                raise TooManyItems(f"an rpc {self._kind()} message has {len(checks)} fields")
        items.append(obj)

    def child_factory(self, name: bytes, factory: Any) -> Any:
        """A CALL's call context is built by a L{ContextUnslicer} (its metadata refused at the header)."""
        items = self.items
        if len(items) == _KWARGS and name == b"tuple" and items[0] == CALL:
            return ContextUnslicer
        return factory

    def _isCall(self) -> bool:
        return bool(self.items) and self.items[0] == CALL

    def _checkArgumentCount(self, index: int) -> None:
        if index - _ARGS >= self.limits.max_items:
            raise TooManyItems(f"a call has more than {self.limits.max_items} arguments")

    def _setKind(self, tag: Any) -> None:
        if type(tag) is not int or not 0 <= tag < len(_CHECKS):
            raise InvalidValue(f"unknown rpc message tag {short_repr(tag)}")
        self._checks = _CHECKS[tag]
        self._bodies = _BODIES[tag]

    def _kind(self) -> str:
        return MESSAGES[self.items[0]].name if self.items else "?"

    def finish(self) -> Message:
        items = self.items
        if self._isCall() and len(items) >= _ARGS:
            return _call(items)
        if len(items) != len(self._checks):
            raise InvalidValue(f"an rpc {self._kind()} message needs {len(self._checks)} fields, got {len(items)}")
        return Message(items)

    def child_where(self) -> str:
        items = self.items
        index = len(items)
        if index < 2:
            # Not traceable to a call yet: say where it happened instead.
            return "<rpc>"
        tag = items[0]
        if tag == CALL and index >= _KWARGS:
            return "kwargs" if index == _KWARGS else f"args[{index - _ARGS}]"
        names = _NAMES[tag]
        return names[index] if index < len(names) else "?"

    def report_violation(self, violation: Violation) -> Violation:
        """
        The decoder refused this message: once its tag and id are known, say
        which message it was (a L{MessageRefused}); with only the tag of a
        CALL, ANSWER or FAIL, say which kind it was (a L{MessageWithoutId}:
        a call waits on it); else C{violation} as it is.
        """
        items = self.items
        if len(items) < 2:
            # (a tag is kept only once it names a kind: see _setKind)
            if items and _AWAITED[items[0]]:
                return MessageWithoutId(violation, items[0])
            return violation
        return MessageRefused(violation, items[0], items[1])
