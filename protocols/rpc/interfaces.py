"""Remote interfaces: one declaration of a service, checked on both ends.

A remote interface is a C{typing.Protocol} that subclasses
L{RemoteInterface}; its methods are stubs returning a C{Deferred} of
their result, and their type hints are the schema::

    class IKeyValue(rpc.RemoteInterface, Protocol, name="kv.IKeyValue"):
        def get(self, key: Annotated[str, MaxLength(1024)]) -> Deferred[str]: ...

The server's class subclasses it (C{class KeyValue(rpc.Referenceable,
IKeyValue)}) and so implements it: each of its methods is remote with the
interface's constraints (L{protocols.rpc.Referenceable}), and each
reference to an instance carries the interface's name.  The client asks a
reference for a proxy (C{root.typed(IKeyValue)}, or C{rpc.connect(...,
interface=IKeyValue)}) on which a call to a method the interface lacks, or
with arguments its constraints refuse, fails here, with nothing sent, and a
result is checked against the result constraint.

Why a C{typing.Protocol} and not a C{zope.interface.Interface}: a proxy's
calls are only worth typing if a type checker can check them.  mypy knows
nothing of zope.interface (its methods are declared without C{self} and its
attributes are C{Attribute} objects, so a checker sees neither the
parameters nor the results without a plugin), while a Protocol's methods are
ordinary annotated methods: C{root.typed(IKeyValue)} is typed as
C{IKeyValue}, so C{mypy --strict} checks every call made on it, and the
server class that subclasses the interface is checked against it too.  The
hints are also what L{protocols.rpc.hints} turns into constraints, so one
declaration is both the static and the runtime schema.

Why stubs return C{Deferred[T]}: that is what a proxy's call returns, so
mypy lets a caller C{await} it (the result typed C{T}), C{cancel()} it or
C{addTimeout()} it, and refuses C{Deferred.fromCoroutine(proxy.get(k))},
which would fail at run time.  One declaration is read by both ends, and
mypy cannot map an interface's methods to other return types for the
proxy, so the declaration says what the caller gets; the server's method
must then return a C{Deferred} too, to pass mypy's override check: write it
C{async def} under L{deferred}, which makes it return one.  (C{async def}
stubs still work at run time, but mypy then types each call as a
coroutine, which it is not: C{cancel()} is refused and
C{Deferred.fromCoroutine} accepted.)

Cost: the interface's constraints are derived once, when the interface
class is created; a proxy call is the same argument check the server would
make, then the call; a result check is one C{validate}.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, ParamSpec, Protocol, TypeVar, cast

from twisted.internet.defer import Deferred, fail

from framing import Violation
from framing.errors import short_repr
from framing.slicing.constraints import Constraint, Optional

from .errors import NoSuchMethod
from .hints import registerHint
from .referenceable import RemoteMethod, remoteMethod, remoteMethodOf
from .refs import RefOf, RemoteReference

_interfaces: dict[str, type] = {}
InterfaceT = TypeVar("InterfaceT", bound="RemoteInterface")
P = ParamSpec("P")
ResultT = TypeVar("ResultT")


def deferred(method: Callable[P, Coroutine[Any, Any, ResultT]]) -> Callable[P, Deferred[ResultT]]:
    """
    Make an C{async def} method return a L{Deferred} of its result (the
    coroutine run by C{Deferred.fromCoroutine}): how a server implements an
    interface method declared as returning C{Deferred[T]} with a coroutine,
    and passes mypy's override check::

        class KeyValue(rpc.Referenceable, IKeyValue):
            @rpc.deferred
            async def get(self, key: str) -> str: ...

    Cancelling the L{Deferred} (a caller's cancel reaches it) cancels what
    the coroutine awaits.  The method keeps its name, signature and hints.
    """

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> Deferred[ResultT]:
        return Deferred.fromCoroutine(method(*args, **kwargs))

    return call


def interfaceNamed(name: str) -> type | None:
    """The remote interface called C{name} in this process, or C{None}."""
    return _interfaces.get(name)


class RemoteInterface(Protocol):
    """
    The base of remote interfaces.  Subclass it together with
    C{typing.Protocol}, optionally naming the interface (the default name
    is C{module.QualifiedName}; name it when both ends may import it under
    different module names)::

        class IKeyValue(rpc.RemoteInterface, Protocol, name="kv.IKeyValue"): ...

    Each public method becomes a L{RemoteMethod} whose constraints come
    from its hints (or from L{protocols.rpc.remote} given explicitly on the
    stub).  An interface extending another has both's methods, and a
    reference to an implementation carries both names.

    @cvar remoteName: the interface's name, as it travels with references.
    @cvar remoteInterfaceMethods: method name to L{RemoteMethod} (the stub's).
    """

    if TYPE_CHECKING:
        # Declared with a value for mypy only: a protocol attribute without
        # one is abstract, and mypy would refuse to instantiate every class
        # that implements an interface.  At run time each interface gets its
        # own from __init_subclass__, and the base has none, so that
        # Referenceable counts only real interfaces (those with a table).
        remoteName: ClassVar[str] = ""  # noqa: N815 (camelCase, as everywhere in protocols)
        remoteInterfaceMethods: ClassVar[Mapping[str, RemoteMethod]] = {}  # noqa: N815

    def __init_subclass__(cls, name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if Protocol not in cls.__bases__:
            return  # an implementation: L{Referenceable} makes its table
        cls.remoteName = name or f"{cls.__module__}.{cls.__qualname__}"
        cls.remoteInterfaceMethods = _declaredMethods(cls)
        _interfaces[cls.remoteName] = cls
        registerHint(cls, RefOf(cls))

    @classmethod
    def remoteProxy(cls: type[InterfaceT], reference: RemoteReference) -> InterfaceT:
        """
        A L{TypedReference} calling C{reference} as this interface declares
        (typed as the interface).

        @raise TypeError: C{reference} arrived naming its interfaces, and
            this is not one of them.  (A root reference names none: its
            interface is the caller's word.)
        """
        names = reference.interfaceNames
        if names and vars(cls).get("remoteName", None) not in names:
            raise TypeError(f"{reference!r} implements {' and '.join(names)}, not {cls.__qualname__}")
        return cast(InterfaceT, TypedReference(reference, cls))


_PROXY_NAMES = frozenset(
    {"callRemote", "callRemoteOnly", "isConnected", "whenDisconnected", "remoteReference", "remoteInterface"}
)


def _declaredMethods(interface: type) -> dict[str, RemoteMethod]:
    table: dict[str, RemoteMethod] = {}
    for base in reversed(interface.__mro__[1:]):
        inherited = vars(base).get("remoteInterfaceMethods")
        if inherited is not None:
            table.update(inherited)
    for name, value in vars(interface).items():
        if name.startswith("_") or not inspect.isfunction(value):
            continue
        if name in _PROXY_NAMES:
            raise TypeError(f"{interface.__qualname__}.{name}: this name is the typed proxy's own")
        table[name] = remoteMethodOf(value) or remoteMethod(value)
    return table


class TypedReference:
    """
    A L{RemoteReference} seen through a remote interface: each of the
    interface's methods is a method here, which checks its arguments as the
    server will (a refusal is a failed L{Deferred}, and nothing is sent),
    calls, and checks the result against the result constraint (a refused
    result fails the call with the L{framing.Violation}, at C{"result..."}).
    A result constrained to a reference to an interface comes wrapped in a
    L{TypedReference} of its own.  Any other attribute is an
    C{AttributeError}.

    @ivar remoteReference: the reference called (send this, not the proxy,
        where a reference is wanted: proxies passed as arguments of its own
        calls are unwrapped).
    @ivar remoteInterface: the interface.
    """

    def __init__(self, reference: RemoteReference, interface: Any) -> None:
        self.remoteReference = reference
        self.remoteInterface = interface

    def __getattr__(self, name: str) -> Callable[..., Deferred[Any]]:
        declared = self.remoteInterface.remoteInterfaceMethods.get(name)
        if declared is None or name.startswith("_"):
            raise AttributeError(f"{self.remoteInterface.remoteName} has no remote method {name!r}")
        method = _proxyMethod(self.remoteReference, declared)
        self.__dict__[name] = method  # found without __getattr__ from now on
        return method

    def callRemote(self, _name: str, /, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """Call C{_name}, checked as its proxy method is; a name the interface lacks fails with L{NoSuchMethod}."""
        if _name not in self.remoteInterface.remoteInterfaceMethods:
            return fail(NoSuchMethod(f"{self.remoteInterface.remoteName} has no remote method {_name!r}"))
        method: Callable[..., Deferred[Any]] = getattr(self, _name)
        return method(*args, **kwargs)

    def callRemoteOnly(self, _name: str, /, *args: Any, **kwargs: Any) -> None:
        """
        Call C{_name} for no answer, its arguments checked first.

        @raise NoSuchMethod: the interface has no method C{_name}.
        @raise framing.Violation: an argument its constraints refuse.
        """
        declared = self.remoteInterface.remoteInterfaceMethods.get(_name)
        if declared is None:
            raise NoSuchMethod(f"{self.remoteInterface.remoteName} has no remote method {_name!r}")
        args, kwargs = _unwrapped(args, kwargs)
        if declared.checkArguments is not None:
            declared.checkArguments(args, kwargs)
        self.remoteReference.callRemoteOnly(_name, *args, **kwargs)

    def isConnected(self) -> bool:
        """Whether calls can still be sent."""
        return self.remoteReference.isConnected()

    def whenDisconnected(self) -> Deferred[BaseException]:
        """Fires with the exception that ended the connection."""
        return self.remoteReference.whenDisconnected()

    def __repr__(self) -> str:
        return f"<TypedReference {self.remoteInterface.remoteName} {self.remoteReference!r}>"


def referenceOf(proxy: Any) -> RemoteReference:
    """
    The L{RemoteReference} under a typed proxy (a L{RemoteReference} is
    returned as it is): for code that mypy checks, where a proxy is typed as
    its interface and so has no C{remoteReference} attribute.

    @raise TypeError: C{proxy} is neither.
    """
    if type(proxy) is TypedReference:
        reference: RemoteReference = proxy.remoteReference
        return reference
    if isinstance(proxy, RemoteReference):
        return proxy
    raise TypeError(f"{proxy!r} is neither a typed proxy nor a RemoteReference")


def _unwrapped(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if any(type(arg) is TypedReference for arg in args):
        args = tuple(arg.remoteReference if type(arg) is TypedReference else arg for arg in args)
    if kwargs and any(type(arg) is TypedReference for arg in kwargs.values()):
        kwargs = {k: v.remoteReference if type(v) is TypedReference else v for k, v in kwargs.items()}
    return args, kwargs


def _proxyMethod(reference: RemoteReference, declared: RemoteMethod) -> Callable[..., Deferred[Any]]:
    """The proxy's method for C{declared}: check, call, check the result (and type a returned reference)."""
    name, check, result = declared.name, declared.checkArguments, declared.result
    answered = _resultCheck(reference, name, result) if result is not None else None

    def call(*args: Any, **kwargs: Any) -> Deferred[Any]:
        args, kwargs = _unwrapped(args, kwargs)
        if check is not None:
            try:
                check(args, kwargs)
            except Violation as violation:
                return fail(violation)
        called = reference.callRemote(name, *args, **kwargs)
        return called if answered is None else called.addCallback(answered)

    call.__name__ = call.__qualname__ = name
    return call


def _resultCheck(reference: RemoteReference, name: str, constraint: Constraint) -> Callable[[Any], Any]:
    inner = constraint.inner if isinstance(constraint, Optional) else constraint
    interface = inner.interface if isinstance(inner, RefOf) else None

    def answered(value: Any) -> Any:
        try:
            constraint.validate(value)
        except Violation as violation:
            # Named as the broker names an answer it refuses: which call, and who.
            violation.where = "result" + violation.where
            violation.message += f"; in the answer to {short_repr(name)}{_fromPeer(reference)}"
            raise
        if interface is not None and value is not None:
            return interface.remoteProxy(value)
        return value

    return answered


def _fromPeer(reference: RemoteReference) -> str:
    """C{" from PEER"} for a reference on a broker's connection; empty for any other L{Caller}."""
    connection = getattr(reference.broker, "connection", None)
    return f" from {connection.peerName()}" if connection is not None else ""
