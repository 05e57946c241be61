"""Constraints from type hints: what L{protocols.rpc.remote} derives from a method's annotations.

Contract: L{constraintFor} turns one type hint into the
L{framing.slicing.constraints.Constraint} that accepts exactly the values the
hint describes, as the wire can carry them, or raises L{UnsupportedHint}.
It runs once per method, when the method is decorated (or its class or
interface is created): a call pays only for checking the constraints, the
same as for constraints written by hand.  A bare type bounds nothing but the
type (C{str} is any string the decoder's L{framing.Limits} accept); bounds
come from C{Annotated} metadata: L{MaxLength}, L{MinLength}, L{Range},
L{Pattern}, or a C{Constraint} instance, which is used as it is.

Supported: C{Any}/C{object}, C{None}, C{bool}, C{int}, C{float} (which, as
in PEP 484, takes an C{int} too), C{str}, C{bytes}; C{list}, C{set}, C{frozenset}, C{tuple} (fixed or C{tuple[X,
...]}), C{dict} and their C{collections.abc} counterparts; C{X | None}, other
unions and C{Optional}; C{Literal}; dataclasses (their fields' hints are
checked too) and types registered with L{framing.register}; remote
interfaces and L{protocols.rpc.RemoteReference} (a reference); any type
given to L{registerHint}.  A result hint of C{Deferred[X]}, C{Awaitable[X]}
or C{Coroutine[..., X]} means C{X}.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred

from framing.slicing.constraints import (
    ANY,
    Boolean,
    ByteString,
    ChoiceOf,
    Constraint,
    DictOf,
    Float,
    InstanceOf,
    Integer,
    IsNone,
    ListOf,
    OneOf,
    Optional,
    SequenceOf,
    SetOf,
    Text,
    TupleOf,
)
from framing.slicing.registry import DEFAULT_REGISTRY

from .refs import RefOf, RemoteReference

UNBOUNDED = sys.maxsize
"""The bound a bare hint gives: none but the decoder's own L{framing.Limits}."""


class UnsupportedHint(TypeError):
    """A type hint that no constraint describes; the message names the parameter."""


@dataclasses.dataclass(frozen=True)
class MaxLength:
    """C{Annotated} bound: at most this many bytes (C{str}: UTF-8 bytes; C{bytes}) or items (containers)."""

    length: int


@dataclasses.dataclass(frozen=True)
class MinLength:
    """C{Annotated} bound: at least this many bytes or items (see L{MaxLength})."""

    length: int


@dataclasses.dataclass(frozen=True)
class Range:
    """C{Annotated} bound for C{int} or C{float}: between C{minimum} and C{maximum} inclusive."""

    minimum: float | None = None
    maximum: float | None = None


@dataclasses.dataclass(frozen=True)
class Pattern:
    """C{Annotated} bound for C{str}: the regular expression must match the whole string."""

    regex: str


_registered: dict[type, Constraint] = {RemoteReference: RefOf(None)}


def registerHint(cls: type, constraint: Constraint) -> None:
    """
    Make a hint of C{cls} (or of a subclass) mean C{constraint}: for types
    that travel some other way than a registered open type (a bulk stream,
    a remote interface).
    """
    _registered[cls] = constraint


# -- one hint ------------------------------------------------------------------------


def constraintFor(hint: Any) -> Constraint:
    """
    The constraint that accepts what C{hint} describes.

    @raise UnsupportedHint: no constraint describes C{hint}.
    """
    return _convert(hint, {}, set())


Bounds = dict[str, Any]


def _convert(hint: Any, bounds: Bounds, seen: set[type]) -> Constraint:
    if hint is typing.Any or hint is object:
        return _unbounded(ANY, bounds, hint)
    if hint is None or hint is type(None):
        return _unbounded(IsNone(), bounds, hint)
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _annotated(hint, bounds, seen)
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(hint), bounds, seen)
    if origin is typing.Literal:
        return _unbounded(OneOf(*typing.get_args(hint)), bounds, hint)
    if origin is not None:
        return _generic(origin, typing.get_args(hint), bounds, seen, hint)
    if isinstance(hint, type):
        return _plain(hint, bounds, seen)
    raise UnsupportedHint(f"{hint!r} is not a type")


def _annotated(hint: Any, bounds: Bounds, seen: set[type]) -> Constraint:
    inner, *metadata = typing.get_args(hint)
    bounds = dict(bounds)
    for item in metadata:
        if isinstance(item, Constraint):
            return item
        if isinstance(item, MaxLength):
            bounds["max"] = item.length
        elif isinstance(item, MinLength):
            bounds["min"] = item.length
        elif isinstance(item, Range):
            bounds["range"] = (item.minimum, item.maximum)
        elif isinstance(item, Pattern):
            bounds["pattern"] = re.compile(item.regex)
        # Other metadata is someone else's business (documentation, validators).
    return _convert(inner, bounds, seen)


def _union(members: tuple[Any, ...], bounds: Bounds, seen: set[type]) -> Constraint:
    others = [member for member in members if member is not type(None) and member is not None]
    choices = [_convert(member, bounds, seen) for member in others]
    if any(choice is ANY for choice in choices):
        return ANY  # Any | X, Any | None: anything
    inner = choices[0] if len(choices) == 1 else ChoiceOf(*choices)
    return Optional(inner) if len(others) < len(members) else inner


def _unbounded(constraint: Constraint, bounds: Bounds, hint: Any) -> Constraint:
    if bounds:
        raise UnsupportedHint(f"{', '.join(sorted(bounds))} bounds do not apply to {hint!r}")
    return constraint


def _take(bounds: Bounds, allowed: set[str], hint: Any) -> Bounds:
    extra = set(bounds) - allowed
    if extra:
        raise UnsupportedHint(f"{', '.join(sorted(extra))} bounds do not apply to {hint!r}")
    return bounds


def _scalar(cls: type, bounds: Bounds) -> Constraint | None:
    if cls is bool:
        return _unbounded(Boolean(), bounds, cls)
    if cls is int or cls is float:
        low, high = _take(bounds, {"range"}, cls).get("range", (None, None))
        lowest = None if low is None else math.ceil(low)
        integer = Integer(lowest, None if high is None else math.floor(high), UNBOUNDED)
        # PEP 484: an int is acceptable where a float is expected.
        return integer if cls is int else ChoiceOf(Float(low, high), integer)
    if cls is str:
        bounds = _take(bounds, {"max", "min", "pattern"}, cls)
        return Text(bounds.get("max", UNBOUNDED), bounds.get("min", 0), bounds.get("pattern"))
    if cls is bytes:
        bounds = _take(bounds, {"max", "min"}, cls)
        return ByteString(bounds.get("max", UNBOUNDED), bounds.get("min", 0))
    return None


_SEQUENCES: dict[Any, Callable[[Constraint, int, int], Constraint]] = {
    list: ListOf,
    collections.abc.MutableSequence: ListOf,
    set: SetOf,
    frozenset: SetOf,
    collections.abc.Set: SetOf,
    collections.abc.MutableSet: SetOf,
    collections.abc.Sequence: lambda item, high, low: ChoiceOf(ListOf(item, high, low), SequenceOf(item, high, low)),
}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}
_AWAITED = {Deferred, collections.abc.Awaitable, collections.abc.Coroutine}


def _generic(origin: Any, args: tuple[Any, ...], bounds: Bounds, seen: set[type], hint: Any) -> Constraint:
    if origin in _AWAITED:
        return _convert(args[-1] if args else Any, bounds, seen)
    sized = _take(bounds, {"max", "min"}, hint)
    high, low = sized.get("max", UNBOUNDED), sized.get("min", 0)
    if origin in _SEQUENCES:
        return _SEQUENCES[origin](_convert(args[0], {}, seen), high, low)
    if origin in _MAPPINGS:
        return DictOf(_convert(args[0], {}, seen), _convert(args[1], {}, seen), high, low)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return SequenceOf(_convert(args[0], {}, seen), high, low)
        if args == ((),):  # tuple[()]
            args = ()
        return _unbounded(TupleOf(*(_convert(arg, {}, seen) for arg in args)), bounds, hint)
    if isinstance(origin, type) and _registeredBase(origin):
        return _plain(origin, bounds, seen)  # a generic type given to registerHint
    raise UnsupportedHint(f"no constraint describes {hint!r}")


def _registeredBase(cls: type) -> list[type]:
    return [base for base in cls.__mro__ if base in _registered]


def _plain(cls: type, bounds: Bounds, seen: set[type]) -> Constraint:
    scalar = _scalar(cls, bounds)
    if scalar is not None:
        return scalar
    if cls in _SEQUENCES or cls in _MAPPINGS or cls is tuple:
        args: tuple[Any, ...] = (Any, Any) if cls in _MAPPINGS else (Any, ...) if cls is tuple else (Any,)
        return _generic(cls, args, bounds, seen, cls)
    known = _registeredBase(cls)
    if known:
        return _unbounded(_registered[known[0]], bounds, cls)
    if dataclasses.is_dataclass(cls):
        return _unbounded(_dataclass(cls, seen), bounds, cls)
    if DEFAULT_REGISTRY.slicer_for(cls) is not None:
        return _unbounded(InstanceOf(cls), bounds, cls)
    raise UnsupportedHint(
        f"{cls.__qualname__} is neither a built-in type, a dataclass, a registered type nor a remote interface"
    )


def _dataclass(cls: type, seen: set[type]) -> Constraint:
    if cls in seen:
        return InstanceOf(cls)  # a recursive dataclass: its fields are checked one level up
    seen = seen | {cls}
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {}
    for field in dataclasses.fields(cls):
        try:
            constraint = _convert(hints.get(field.name, Any), {}, seen)
        except UnsupportedHint as error:
            raise UnsupportedHint(f"field {field.name!r} of {cls.__qualname__}: {error}") from None
        if constraint is not ANY:
            fields[field.name] = constraint
    return InstanceOf(cls, fields)


# -- a method ------------------------------------------------------------------------


def methodConstraints(function: Callable[..., Any]) -> tuple[dict[str, Constraint], Constraint | None]:
    """
    The constraints C{function}'s annotations give: one per annotated
    parameter (not C{self}, C{*args} or C{**kwargs}), and the result's, or
    C{None} where the hint accepts anything.

    @raise UnsupportedHint: a hint cannot be converted, or named; the
        message names the method and the parameter.
    """
    annotations: Mapping[str, Any] = getattr(function, "__annotations__", {})
    if not annotations:
        return {}, None
    parameters = list(inspect.signature(function).parameters.values())[1:]
    wanted = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    arguments = {}
    for name in wanted:
        if name in annotations:
            constraint = _parameterConstraint(function, name, annotations[name])
            if constraint is not ANY:
                arguments[name] = constraint
    result = None
    if "return" in annotations:
        derived = _parameterConstraint(function, "return", annotations["return"])
        result = None if derived is ANY else derived
    return arguments, result


def _parameterConstraint(function: Callable[..., Any], name: str, annotation: Any) -> Constraint:
    what = "the result" if name == "return" else f"parameter {name!r}"
    where = f"{getattr(function, '__qualname__', function)}: {what}"
    try:
        hint = _resolve(function, name, annotation)
    except NameError as error:
        if getattr(error, "name", None) != _enclosingClass(function):
            raise UnsupportedHint(f"{where}: cannot resolve {annotation!r}: {error}") from None
        # The method's own class (a method returning another of its kind):
        # it exists once its class statement is done, so resolve at first use.
        return _OwnClassHint(function, name, annotation, where)
    except Exception as error:
        raise UnsupportedHint(f"{where}: cannot resolve {annotation!r}: {error}") from None
    try:
        return _convert(hint, {}, set())
    except UnsupportedHint as error:
        raise UnsupportedHint(f"{where}: {error}") from None


def _resolve(function: Callable[..., Any], name: str, annotation: Any) -> Any:
    # One annotation at a time, so an unresolvable one is named; in the module
    # of the function a decorator wrapped (functools.wraps), such as rpc.deferred.
    holder = types.SimpleNamespace(__annotations__={name: annotation})
    defined = inspect.unwrap(function)
    return typing.get_type_hints(holder, globalns=getattr(defined, "__globals__", {}), include_extras=True)[name]


def _enclosingClass(function: Callable[..., Any]) -> str | None:
    """The name of the class a method is defined in (at module level), from its qualified name."""
    parts = getattr(function, "__qualname__", "").split(".")
    return parts[-2] if len(parts) == 2 else None


class _OwnClassHint(Constraint):
    """
    The constraint of a hint naming the method's own class, which does not
    exist yet when the method is decorated: derived when first used, with
    the same checks and the same L{UnsupportedHint} then.
    """

    def __init__(self, function: Callable[..., Any], name: str, annotation: Any, where: str) -> None:
        self._function, self._name, self._annotation, self._where = function, name, annotation, where
        self._derived: Constraint | None = None

    def _constraint(self) -> Constraint:
        if self._derived is None:
            try:
                hint = _resolve(self._function, self._name, self._annotation)
                self._derived = _convert(hint, {}, set())
            except UnsupportedHint as error:
                raise UnsupportedHint(f"{self._where}: {error}") from None
            except Exception as error:
                raise UnsupportedHint(f"{self._where}: cannot resolve {self._annotation!r}: {error}") from None
        return self._derived

    def check_header(self, kind: int, size: int) -> None:
        self._constraint().check_header(kind, size)

    def check_open(self, name: str) -> None:
        self._constraint().check_open(name)

    def child(self, unslicer: Any) -> Constraint:
        return self._constraint().child(unslicer)

    def check_value(self, obj: Any) -> None:
        self._constraint().check_value(obj)

    def validate(self, obj: Any) -> None:
        self._constraint().validate(obj)
