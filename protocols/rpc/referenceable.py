"""What may be called remotely: L{Referenceable} objects and their L{remote} methods.

Contract (the exposure rule): a peer can reach only instances of
L{Referenceable} subclasses (the root given to C{serve}, and objects sent by
reference in arguments and results), and on those only the methods marked
with L{remote}.  Any other name, including inherited Python machinery like
C{__init__} or C{__class__}, is a C{NoSuchMethod} error; nothing is looked up
with C{getattr}.  A subclass that overrides a remote method without marking
it again makes it not remote.  Each class's table of remote methods is built
once, when the class is created, so finding a method is one dict lookup.

Constraints are checked, with
L{framing.slicing.constraints.Constraint.validate}, on the side that runs the
method: the arguments before it runs, the result before it is sent.  L{remote}
derives them from the method's type hints (L{protocols.rpc.hints}), once,
when it decorates the method; constraints given to it explicitly override
the derived ones.  A class that implements a remote interface
(L{protocols.rpc.interfaces}) gets the interface's methods as remote
methods, with the interface's constraints, without marking them.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, overload

from framing import Violation
from framing.errors import KindRefused
from framing.slicing.constraints import Constraint, Optional

from .errors import WrongArguments
from .hints import methodConstraints, registerHint
from .refs import RefOf, RemoteReference

_MARK = "__chunkwire_remote__"

F = TypeVar("F", bound=Callable[..., Any])
ArgumentCheck = Callable[[tuple[Any, ...], dict[str, Any]], None]


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
    """

    __slots__ = ("name", "function", "checkArguments", "result", "proxied")

    def __init__(
        self,
        name: str,
        function: Callable[..., Any],
        checkArguments: ArgumentCheck | None,
        result: Constraint | None,
        proxied: Mapping[int | str, Any] | None = None,
    ) -> None:
        self.name = name
        self.proxied = proxied or {}
        self.function = _withProxies(function, self.proxied)
        self.checkArguments = checkArguments
        self.result = result

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
    Mark a method of a L{Referenceable} subclass as callable by the peer.

    Use it bare (C{@remote}) or with constraints::

        @remote(args={"key": Text(1024), "value": ByteString(1 << 20)}, result=Boolean())
        def put(self, key, value): ...

        @remote(args=TupleOf(Integer(0), Integer(0)))
        def add(self, a, b): ...

    or, most often, with type hints, from which the constraints are derived
    (L{protocols.rpc.hints}), once, here::

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
    @raise protocols.rpc.hints.UnsupportedHint: (a C{TypeError}) a hint no
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
    check = _signatureCheck(function, _argumentCheck(function, args))
    proxied = _proxiedParameters(function, args) if isinstance(args, Mapping) else None
    return RemoteMethod(function.__name__, function, check, result, proxied)


def remoteMethodOf(value: Any) -> RemoteMethod | None:
    """The L{RemoteMethod} recorded on C{value} by L{remote}, or C{None}."""
    spec = getattr(value, _MARK, None)
    return spec if isinstance(spec, RemoteMethod) else None


class Referenceable:
    """
    Base class of objects the peer may call, and that are sent by reference:
    an instance in an argument or a result reaches the other side as a
    C{RemoteReference} to it (and comes back home as itself).  Mark the
    methods to expose with L{remote}.

    A subclass that also subclasses remote interfaces
    (L{protocols.rpc.RemoteInterface}) implements them: each of their
    methods is remote, with the interface's constraints, unless the class
    marks its own with L{remote}.

    @cvar remoteMethods: name to L{RemoteMethod}, for this class and its bases.
    @cvar remoteInterfaceNames: the names of the remote interfaces the class
        implements, sent with each reference to an instance.
    """

    remoteMethods: ClassVar[Mapping[str, RemoteMethod]] = {}  # noqa: N815 (Twisted-style name, like the ivars)
    remoteInterfaceNames: ClassVar[tuple[str, ...]] = ()  # noqa: N815

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[str, RemoteMethod] = {}
        interfaces = []
        for klass in reversed(cls.__mro__):
            if _INTERFACE_METHODS in vars(klass):
                interfaces.append(klass)  # its methods are declarations, not implementations
                continue
            for name, value in vars(klass).items():
                spec = remoteMethodOf(value)
                if spec is not None:
                    table[name] = spec
                else:
                    # An override that is not marked is not remote.
                    table.pop(name, None)
        for interface in interfaces:
            for name, declared in vars(interface)[_INTERFACE_METHODS].items():
                if name not in table:
                    table[name] = _implementation(cls, name, declared)
        cls.remoteMethods = table
        cls.remoteInterfaceNames = tuple(dict.fromkeys(vars(i)["remoteName"] for i in interfaces))


# Sent by reference, received as a RemoteReference (or as itself, coming home).
registerHint(Referenceable, RefOf(None))

_INTERFACE_METHODS = "remoteInterfaceMethods"
"""The attribute a remote interface keeps its declared methods in (L{protocols.rpc.interfaces})."""


def _implementation(cls: type, name: str, declared: RemoteMethod) -> RemoteMethod:
    """The remote method of C{cls} that implements the interface method C{declared}, with its checks."""
    owner = next(klass for klass in cls.__mro__ if name in vars(klass))
    if _INTERFACE_METHODS in vars(owner):
        raise TypeError(f"{cls.__qualname__} does not implement {owner.__qualname__}.{name}")
    return RemoteMethod(name, getattr(cls, name), declared.checkArguments, declared.result, declared.proxied)


# -- references to remote interfaces, as their proxies ----------------------------------


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
    C{function}, handed each L{RemoteReference} received for a parameter in
    C{proxied} as that interface's typed proxy (a local object, come home,
    is handed as itself), so that a method's hint is true of its argument.
    Methods without such parameters are returned as they are: no cost.
    """
    if not proxied:
        return function

    def typed(value: Any, interface: Any) -> Any:
        return interface.remoteProxy(value) if type(value) is RemoteReference else value

    def call(obj: Any, *args: Any, **kwargs: Any) -> Any:
        args = tuple(arg if index not in proxied else typed(arg, proxied[index]) for index, arg in enumerate(args))
        for name in kwargs.keys() & proxied.keys():
            kwargs[name] = typed(kwargs[name], proxied[name])
        return function(obj, *args, **kwargs)

    return functools.update_wrapper(call, function)


# -- argument checks ------------------------------------------------------------


def _signatureCheck(function: Callable[..., Any], then: ArgumentCheck | None) -> ArgumentCheck:
    """
    Refuse arguments C{function}'s signature cannot take (a L{WrongArguments}
    naming the method), then run C{then}.  The signature is read once, here;
    a call by position within the parameter count skips C{bind}.
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

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if kwargs or not low <= len(args) <= high:
            try:
                signature.bind(None, *args, **kwargs)
            except TypeError as error:
                raise WrongArguments(f"{shown} cannot take these arguments: {error}", "args") from None
        if then is not None:
            then(args, kwargs)

    return check


def _argumentCheck(
    function: Callable[..., Any], args: Constraint | Mapping[str, Constraint] | None
) -> ArgumentCheck | None:
    if args is None:
        return None
    if isinstance(args, Constraint):
        return _tupleCheck(args)
    return _mappingCheck(function, args)


def _tupleCheck(constraint: Constraint) -> ArgumentCheck:
    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
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

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
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
    try:
        constraint.validate(value)
    except Violation as violation:
        violation.where = where + violation.where
        raise
