# -*- test-case-name: tests.framing.rpc.test_interfaces,tests.framing.rpc.test_exports -*-
"""Remote method signatures: type hints to constraints, and the argument checks made before a call.

Contract: L{constraintFor} turns one type hint into the
L{framing.slicing._constraints.Constraint} accepting exactly the values it
describes, or raises L{UnsupportedHint}.  Bounds come from C{Annotated}
metadata (L{MaxLength}, L{MinLength}, L{Range}, L{Pattern}, a
C{Constraint}).  Supported: the built-in scalars and containers, unions,
C{Literal}, dataclasses, registered types, remote interfaces and
references (L{RefOf}), any type given to L{registerHint}; a result of
C{Deferred[X]}, C{Awaitable[X]} or C{Coroutine[..., X]} means C{X}.
L{RemoteMethod} and L{remoteMethod} record a method's constraints and its
argument check (L{WrongArguments}, or a L{framing.Violation} naming the
argument), which a server runs before the method and a typed proxy before
sending.  Written once, without Twisted, for every side.

Cost: the hints are turned into constraints once per method, when it is
decorated; a call pays only for checking them.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, overload

from framing import Violation
from framing._errors import KindRefused
from framing.slicing._constraints import (
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
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import OPEN

from ._errors import WrongArguments

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


REF_OPEN_TYPE = "rpc.ref"
"""An object exported by the sender: its export id follows."""
YOURREF_OPEN_TYPE = "rpc.yourref"
"""An object exported by the receiver, coming home: its export id follows."""

ProxyFactory = Callable[[Any, Any], Any]
"""C{factory(reference, interface)}: a typed proxy calling C{reference} as C{interface} declares."""

_references: dict[type, ProxyFactory] = {}


def registerReference(cls: type, proxy: ProxyFactory) -> None:
    """
    Make instances of C{cls} count as references to remote objects: L{RefOf}
    accepts them (naming their interfaces in C{interfaceNames}), a hint of
    C{cls} means any reference, and a remote interface's C{remoteProxy}
    wraps one with C{proxy(reference, interface)}.  Each client registers its
    own reference class (L{protocols.rpc.RemoteReference}, the blocking
    client's L{protocols.blocking.BlockingReference}).
    """
    _references[cls] = proxy
    _registered[cls] = RefOf(None)


def proxyFactory(reference: Any) -> ProxyFactory | None:
    """The typed proxy factory registered for C{reference}'s class (or a base), or C{None}: not a reference."""
    for cls in type(reference).__mro__:
        factory = _references.get(cls)
        if factory is not None:
            return factory
    return None


class RefOf(Constraint):
    """
    A reference to an object that implements a remote interface: a
    reference that arrived naming it (an instance of a class given to
    L{registerReference}), or (sent from this side, or coming home) a local
    object whose class implements it (its C{remoteInterfaceNames}).
    C{RefOf(None)}: any reference.

    The kind and the open type (C{rpc.ref} or C{rpc.yourref}) are checked at
    the OPEN header; the interface once the reference is built.

    @ivar interface: the remote interface, or C{None}.
    """

    def __init__(self, interface: Any = None) -> None:
        self.interface = interface
        self.name: str | None = None if interface is None else interface.remoteName

    def check_header(self, kind: int, size: int) -> None:
        if kind != OPEN:
            raise KindRefused(f"expected a reference, got a token of kind {kind}")

    def check_open(self, name: str) -> None:
        if name != REF_OPEN_TYPE and name != YOURREF_OPEN_TYPE:
            raise KindRefused(f"expected a reference, got {name!r}")

    def check_value(self, obj: Any) -> None:
        names: tuple[str, ...] | None = getattr(type(obj), "remoteInterfaceNames", None)
        if proxyFactory(obj) is not None:
            names = obj.interfaceNames
        elif names is None:
            raise KindRefused(f"expected a reference, got {type(obj).__name__}")
        if self.name is not None and self.name not in names:
            provided = " and ".join(names) or "no interface"
            raise KindRefused(f"expected a reference to a {self.name}, got one to {provided}")

    def __repr__(self) -> str:
        return f"RefOf({self.name})"


_registered: dict[type, Constraint] = {}


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

T = TypeVar("T")


class _UnresolvedDeferred(Generic[T]):
    """
    What the name C{Deferred} means in a hint whose module imports Twisted's
    C{Deferred} only for type checking: a result to be awaited, as
    C{Deferred[X]} is (so the module loads no Twisted, and a client without
    Twisted can read its interfaces).
    """


_AWAITED: set[Any] = {collections.abc.Awaitable, collections.abc.Coroutine, _UnresolvedDeferred}


_GENERICS: dict[Any, Callable[[Constraint], Constraint]] = {}


def registerGenericHint(origin: Any, factory: Callable[[Constraint], Constraint]) -> None:
    """
    Make a hint C{origin[X]} mean C{factory(constraintFor(X))} (a bare
    C{origin}: C{factory(ANY)}): for generic types that travel some other
    way than a container, such as C{AsyncIterator[T]}, a stream of objects
    (L{framing.rpc._streams}).
    """
    _GENERICS[origin] = factory


def registerAwaited(cls: type) -> None:
    """Make a result hint of C{cls[X]} mean C{X}: C{cls} is a kind of awaitable result (Twisted's C{Deferred})."""
    _AWAITED.add(cls)


def _generic(origin: Any, args: tuple[Any, ...], bounds: Bounds, seen: set[type], hint: Any) -> Constraint:
    if origin in _AWAITED:
        return _convert(args[-1] if args else Any, bounds, seen)
    if origin in _GENERICS:
        return _unbounded(_GENERICS[origin](_convert(args[0] if args else Any, {}, seen)), bounds, hint)
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
    namespace = getattr(defined, "__globals__", {})
    unresolved = None if "Deferred" in namespace else {"Deferred": _UnresolvedDeferred}
    return typing.get_type_hints(holder, globalns=namespace, localns=unresolved, include_extras=True)[name]


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


# -- remote methods ------------------------------------------------------------------

_MARK = "__chunkwire_remote__"

F = TypeVar("F", bound=Callable[..., Any])
ArgumentCheck = Callable[[tuple[Any, ...], dict[str, Any] | None], None]
"""A method's argument check: C{check(args, kwargs)} (C{kwargs} C{None}: none, as in a CALL) raises a refusal."""


class RemoteMethod:
    """
    What L{remote} records about one method.

    @ivar name: the method's name, as callers give it to C{callRemote}.
    @ivar function: the plain function, called as C{function(obj, *args, **kwargs)}
        (wrapped, if C{proxied} names parameters, to hand those their proxies).
    @ivar checkArguments: C{checkArguments(args, kwargs)} raises a
        L{framing.Violation} for arguments the method refuses; or C{None}.
    @ivar result: the constraint the result must satisfy, or C{None}.
    @ivar proxied: the parameters hinted as a remote interface, by position
        and by name, to that interface: a reference received there reaches
        the method as the interface's typed proxy.  Empty for most methods.
    @ivar arguments: the constraints C{checkArguments} holds the arguments
        to, for a reader (a caller deriving arguments, a tool listing a
        served interface): a mapping from parameter names to constraints
        (the derived ones with C{remote}'s C{args} over them), one
        constraint for the tuple of positional arguments, or C{None}.
        Kept, not copied: reading it costs nothing.
    @ivar fewest: with C{most}, the counts of positional arguments
        C{checkArguments}' signature takes: a call of such a count and no
        keyword arguments passes it if it passes C{checkValues}, which a
        callee checks it by alone (L{framing.rpc._incoming.CallAdmission.admit}:
        one call, not two).  C{1} and C{0} (no count) unless known.
    @ivar checkValues: the part of C{checkArguments} after the signature's:
        the constraints' check, or C{None}.
    """

    __slots__ = (
        "name",
        "function",
        "checkArguments",
        "result",
        "proxied",
        "arguments",
        "fewest",
        "most",
        "checkValues",
    )

    def __init__(
        self,
        name: str,
        function: Callable[..., Any],
        checkArguments: ArgumentCheck | None,
        result: Constraint | None,
        proxied: Mapping[int | str, Any] | None = None,
        arguments: Constraint | Mapping[str, Constraint] | None = None,
        positional: tuple[int, int] = (1, 0),
        checkValues: ArgumentCheck | None = None,
    ) -> None:
        """
        @param positional: L{fewest} and L{most}: the positional argument
            counts C{checkArguments}' signature takes (no count by default:
            a call is checked by C{checkArguments} whole).
        """
        self.name = name
        self.arguments = arguments
        self.proxied = proxied or {}
        self.function = _withProxies(function, self.proxied)
        self.checkArguments = checkArguments
        self.result = result
        self.fewest, self.most = positional if checkArguments is not None else (0, sys.maxsize)
        self.checkValues = checkValues

    def __repr__(self) -> str:
        return f"<RemoteMethod {self.name}>"


@overload
def remote(function: F, /) -> F: ...


@overload
def remote(
    *, args: Constraint | Mapping[str, Constraint] | None = None, result: Constraint | None = None
) -> Callable[[F], F]: ...


def remote(
    function: Any = None,
    /,
    *,
    args: Constraint | Mapping[str, Constraint] | None = None,
    result: Constraint | None = None,
) -> Any:
    """
    Mark a method of a L{protocols.rpc.Referenceable} subclass as callable by the peer.

    Use it bare (C{@remote}) or with constraints::

        @remote(args={"key": Text(1024), "value": ByteString(1 << 20)}, result=Boolean())
        def put(self, key, value): ...

        @remote(args=TupleOf(Integer(0), Integer(0)))
        def add(self, a, b): ...

    or, most often, with type hints, from which the constraints are derived
    (L{framing.rpc._signatures}), once, here::

        @remote
        def put(self, key: Annotated[str, MaxLength(1024)], value: bytes) -> bool: ...

    @param args: either a mapping from parameter names to constraints, which
        apply whether the argument is passed by position or by keyword, and
        replace the constraints derived from those parameters' hints (the
        others keep theirs; a parameter with neither is not checked), or
        one constraint for the tuple of positional arguments (typically a
        C{TupleOf}), which replaces every derived argument constraint; a
        method constrained that way accepts no keyword arguments.
    @param result: a constraint the method's result must satisfy, replacing
        the one derived from its return hint; a result that does not fails
        the call with a C{RemoteViolation} at C{"result..."} instead of
        being sent.
    @raise TypeError: C{args} names a parameter the method does not have.
    @raise UnsupportedHint: (a C{TypeError}) a hint no
        constraint describes; the message names the parameter.
    """

    def mark(f: F) -> F:
        spec = remoteMethod(f, args, result)
        f.__dict__[_MARK] = spec
        return f

    if function is not None:
        return mark(function)
    return mark


def remoteMethod(
    function: Callable[..., Any],
    args: Constraint | Mapping[str, Constraint] | None = None,
    result: Constraint | None = None,
) -> RemoteMethod:
    """The L{RemoteMethod} for C{function}: its hints' constraints, overridden by C{args} and C{result}."""
    derivedArgs, derivedResult = methodConstraints(function)
    if args is None or isinstance(args, Mapping):
        args = {**derivedArgs, **(args or {})} or None
    if result is None:
        result = derivedResult
    values = _argumentCheck(function, args)
    check, positional = _signatureCheck(function, values)
    proxied = _proxiedParameters(function, args) if isinstance(args, Mapping) else None
    return RemoteMethod(function.__name__, function, check, result, proxied, args, positional, values)


def remoteMethodOf(value: Any) -> RemoteMethod | None:
    """The L{RemoteMethod} recorded on C{value} by L{remote}, or C{None}."""
    spec = getattr(value, _MARK, None)
    return spec if isinstance(spec, RemoteMethod) else None


# -- references to remote interfaces, as their proxies ------------------------------


def _proxiedParameters(function: Callable[..., Any], constraints: Mapping[str, Constraint]) -> dict[int | str, Any]:
    """The parameters constrained to a reference to a remote interface (C{RefOf(I)}), by position and name."""
    interfaces: dict[int | str, Any] = {}
    for name, constraint in constraints.items():
        inner = constraint.inner if isinstance(constraint, Optional) else constraint
        if isinstance(inner, RefOf) and inner.interface is not None:
            interfaces[name] = inner.interface
    if not interfaces:
        return {}
    proxied = dict(interfaces)
    parameters = list(inspect.signature(function).parameters.values())[1:]
    for index, parameter in enumerate(parameters):
        positional = parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        if positional and parameter.name in interfaces:
            proxied[index] = interfaces[parameter.name]
    return proxied


def _withProxies(function: Callable[..., Any], proxied: Mapping[int | str, Any]) -> Callable[..., Any]:
    """
    C{function}, handed each reference (L{registerReference}) received for a parameter in
    C{proxied} as that interface's typed proxy (a local object, come home,
    is handed as itself), so that a method's hint is true of its argument.
    Methods without such parameters are returned as they are: no cost.
    """
    if not proxied:
        return function

    def typed(value: Any, interface: Any) -> Any:
        return interface.remoteProxy(value) if proxyFactory(value) is not None else value

    def call(obj: Any, *args: Any, **kwargs: Any) -> Any:
        args = tuple(arg if index not in proxied else typed(arg, proxied[index]) for index, arg in enumerate(args))
        for name in kwargs.keys() & proxied.keys():
            kwargs[name] = typed(kwargs[name], proxied[name])
        return function(obj, *args, **kwargs)

    return functools.update_wrapper(call, function)


# -- argument checks ------------------------------------------------------------


def _signatureCheck(function: Callable[..., Any], then: ArgumentCheck | None) -> tuple[ArgumentCheck, tuple[int, int]]:
    """
    The check refusing arguments C{function}'s signature cannot take (a
    L{WrongArguments} naming the method), then running C{then}; and the
    counts of positional arguments it takes (L{RemoteMethod.fewest},
    L{RemoteMethod.most}).  The signature is read once, here; a call by
    position within those counts skips C{bind}.
    """
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())[1:]  # without self
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    low = sum(1 for p in positional if p.default is p.empty)
    high = len(positional)
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        high = sys.maxsize
    if any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in parameters):
        high = -1  # a required keyword: never the fast path
    bare = [p.replace(annotation=p.empty) for p in parameters]
    shown = f"{function.__name__}{signature.replace(parameters=bare, return_annotation=signature.empty)}"

    def check(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        if kwargs or not low <= len(args) <= high:
            try:
                signature.bind(None, *args, **(kwargs or {}))
            except TypeError as error:
                raise WrongArguments(f"{shown} cannot take these arguments: {error}", "args") from None
        if then is not None:
            then(args, kwargs)

    return check, (low, high)


def _argumentCheck(
    function: Callable[..., Any], args: Constraint | Mapping[str, Constraint] | None
) -> ArgumentCheck | None:
    if args is None:
        return None
    if isinstance(args, Constraint):
        return _tupleCheck(args)
    return _mappingCheck(function, args)


def _tupleCheck(constraint: Constraint) -> ArgumentCheck:
    def check(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        if kwargs:
            raise KindRefused("this method takes positional arguments only", "kwargs")
        try:
            constraint.validate(args)
        except Violation as violation:
            violation.where = "args" + violation.where
            raise

    return check


def _mappingCheck(function: Callable[..., Any], constraints: Mapping[str, Constraint]) -> ArgumentCheck:
    parameters = list(inspect.signature(function).parameters.values())[1:]  # without self
    named = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    unknown = set(constraints) - named
    if unknown:
        raise TypeError(f"{function.__qualname__} has no parameter named {', '.join(sorted(unknown))}")
    for name, constraint in constraints.items():
        if not isinstance(constraint, Constraint):
            raise TypeError(f"the constraint for {name!r} is not a Constraint: {constraint!r}")
    positional = tuple(
        constraints.get(p.name) for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    byName = {
        name: constraint
        for name, constraint in constraints.items()
        if any(p.name == name and p.kind is not p.POSITIONAL_ONLY for p in parameters)
    }
    count = len(positional)

    def check(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        for index, value in enumerate(args):
            if index == count:
                break  # extra positional arguments: the call itself will say
            constraint = positional[index]
            if constraint is not None:
                _validate(constraint, value, f"args[{index}]")
        if kwargs:
            for name, value in kwargs.items():
                constraint = byName.get(name)
                if constraint is not None:
                    _validate(constraint, value, f"kwargs[{name!r}]")

    return check


def _validate(constraint: Constraint, value: Any, where: str) -> None:
    # (a stream's constraint keeps where it stands, for the index of an item it refuses later)
    validateAt = getattr(constraint, "validateAt", None)
    try:
        if validateAt is not None:
            validateAt(value, where)
        else:
            constraint.validate(value)
    except Violation as violation:
        violation.where = where + violation.where
        raise
