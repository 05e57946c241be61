# -*- test-case-name: tests.framing.rpc.test_interfaces,tests.protocols.rpc.test_interfaces -*-
"""Remote interfaces: one declaration of a service, checked on both ends, by every client.

A remote interface is a C{typing.Protocol} subclassing L{RemoteInterface};
its methods are stubs returning a C{Deferred} of their result, and their
type hints are the schema::

    class IKeyValue(rpc.RemoteInterface, Protocol, name="kv.IKeyValue"):
        def get(self, key: Annotated[str, MaxLength(1024)]) -> Deferred[str]: ...

A server class subclassing it implements it (its methods remote with the
interface's constraints).  A client's typed proxy (C{root.typed(IKeyValue)},
C{connect(..., interface=IKeyValue)}) refuses, with nothing sent, a method
the interface lacks or arguments its constraints refuse, and checks each
result.  This module is the sans-IO half: the declaration, the registry by
name, and the checks (L{proxyMethod}, L{resultCheck}); each client has its
own proxy.  Nothing here imports Twisted.

Cost: the constraints are derived once, when the interface is created; a
proxy call is the server's argument check, a result check one C{validate}.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Protocol, TypeVar, cast

from framing import Violation
from framing._errors import short_repr
from framing.slicing._constraints import Optional

from ._errors import DeadReferenceError, NoSuchMethod
from ._signatures import RefOf, RemoteMethod, proxyFactory, registerHint, remoteMethod, remoteMethodOf
from ._wire import ROOT_ID

_interfaces: dict[str, type] = {}
InterfaceT = TypeVar("InterfaceT", bound="RemoteInterface")


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
    def remoteProxy(cls: type[InterfaceT], reference: Any) -> InterfaceT:
        """
        The typed proxy calling C{reference} as this interface declares:
        the one its client registered for its class (a
        L{protocols.rpc.TypedReference} for a L{protocols.rpc.RemoteReference});
        typed as the interface.

        @raise TypeError: C{reference} is not a reference, or it arrived
            naming its interfaces and this is not one of them.  (A root
            reference names none: its interface is the caller's word.)
        """
        factory = proxyFactory(reference)
        if factory is None:
            raise TypeError(f"{reference!r} is not a reference to a remote object")
        names = reference.interfaceNames
        if names and vars(cls).get("remoteName", None) not in names:
            raise TypeError(f"{reference!r} implements {' and '.join(names)}, not {cls.__qualname__}")
        return cast(InterfaceT, factory(reference, cls))


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


# -- what every typed proxy checks -------------------------------------------------------


def declaredMethod(interface: Any, name: str) -> RemoteMethod:
    """
    The method C{interface} declares as C{name}, for a proxy's C{callRemote}.

    @raise framing.rpc.NoSuchMethod: it declares none (nothing is sent).
    """
    declared: RemoteMethod | None = interface.remoteInterfaceMethods.get(name)
    if declared is None or name.startswith("_"):
        raise NoSuchMethod(f"{interface.remoteName} has no remote method {name!r}")
    return declared


def declaredAttribute(interface: Any, name: str) -> RemoteMethod:
    """
    The method C{interface} declares as C{name}, for a proxy's C{__getattr__}.

    @raise AttributeError: it declares none (so C{hasattr} and C{getattr}
        with a default work as for any object).
    """
    try:
        return declaredMethod(interface, name)
    except NoSuchMethod as error:
        raise AttributeError(str(error)) from None


def resultCheck(declared: RemoteMethod, peer: Callable[[], str]) -> Callable[[Any], Any] | None:
    """
    The check of C{declared}'s result as it arrives, or C{None} if its
    result is not constrained.  The check returns the result (a reference
    constrained to a remote interface wrapped in that interface's typed
    proxy), or raises the L{framing.Violation}, at C{"result..."} and named
    as the broker names an answer it refuses: which call, and who sent it.

    @param peer: gives C{" from PEER"} for the message (or C{""}), called
        only when a result is refused.
    """
    constraint = declared.result
    if constraint is None:
        return None
    name = declared.name
    inner = constraint.inner if isinstance(constraint, Optional) else constraint
    interface = inner.interface if isinstance(inner, RefOf) else None

    def answered(value: Any) -> Any:
        try:
            constraint.validate(value)
        except Violation as violation:
            violation.where = "result" + violation.where
            violation.message += f"; in the answer to {short_repr(name)}{peer()}"
            raise
        if interface is not None and value is not None:
            return interface.remoteProxy(value)
        return value

    return answered


class ExportedReference:
    """
    The part every client without Twisted shares of an object the server
    exports: what it is on its connection, its typed view, and its release.
    The blocking and asyncio clients subclass it with C{callRemote} and
    C{callRemoteOnly} that wait in their own way.

    One reference is held per object per connection (the same object
    received twice is the same reference), so references compare by
    identity.  When the last use of one is dropped, the server is told
    (RELEASE) and forgets the object once no other reference to it is in
    flight; L{release} (or leaving a C{with} block) tells it at once.

    @ivar connection: the client's connection it is called on.
    @ivar exportId: its id on that connection (the root's for the root).
    @ivar interfaceNames: the remote interfaces it arrived naming (none
        for the root, whose interface is the caller's word).
    """

    def __init__(self, connection: Any, exportId: int, interfaceNames: tuple[str, ...] = ()) -> None:
        self.connection = connection
        self.exportId = exportId
        self.interfaceNames = interfaceNames

    def typed(self, interface: type) -> Any:
        """
        The typed proxy (the L{TypedProxy} subclass its client registered
        with L{registerReference}) calling this object as C{interface} (a
        L{RemoteInterface}) declares: arguments checked before anything is
        sent, results checked on arrival.

        Typed C{Any} for mypy, on purpose: an interface's stubs say
        C{-> Deferred[T]} (what the Twisted client's proxy returns), and
        mypy cannot rewrite a protocol's methods to return C{T} or an
        awaitable of it; the checking is done at run time instead.

        @raise TypeError: this reference arrived naming its interfaces, and
            C{interface} is not one of them.
        """
        return interface.remoteProxy(self)  # type: ignore[attr-defined]

    def release(self) -> None:
        """
        Tell the server this side is done with the object now (its RELEASE
        sent), rather than when this reference is collected.  Later calls
        through this reference raise L{DeadReferenceError} without sending
        anything; the object, received again, is a new reference.  Releasing
        the root, or a released reference, does nothing.
        """
        if self.exportId == ROOT_ID or isinstance(self.connection, _Released):
            return
        connection = self.connection
        connection.releaseReference(self)
        self.connection = _Released(connection.peer, self.exportId)

    def __enter__(self: ReferenceT) -> ReferenceT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.exportId} on {self.connection.peer}>"


ReferenceT = TypeVar("ReferenceT", bound=ExportedReference)


class _Released:
    """What a released reference calls instead of its connection: every call is refused here."""

    def __init__(self, peer: str, exportId: int) -> None:
        self.peer = peer
        self._exportId = exportId

    def _refuse(self, name: str) -> NoReturn:
        raise DeadReferenceError(f"cannot call {name!r}: reference {self._exportId} was released by this side")

    def call(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Refused."""
        self._refuse(name)

    def callOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Refused."""
        self._refuse(name)


class TypedProxy:
    """
    The part of a typed proxy that does no I/O, shared by the clients that
    have no Twisted (L{protocols.blocking}, L{protocols.asyncioclient}):
    each of the interface's methods is an attribute, made once by
    L{_typedMethod} (the client's own: it checks the arguments with the
    method's C{checkArguments}, calls and waits as that client waits, and
    passes the result to the check from L{resultCheck}); a method the
    interface lacks is an C{AttributeError}, and through L{callRemote} a
    L{framing.rpc.NoSuchMethod}, nothing sent either way.

    @ivar remoteReference: the reference called (it has C{callRemote},
        C{callRemoteOnly} and a C{connection} with a C{peer}).
    @ivar remoteInterface: the interface.
    """

    def __init__(self, reference: Any, interface: Any) -> None:
        self.remoteReference = reference
        self.remoteInterface = interface

    def _typedMethod(self, declared: RemoteMethod, answered: Callable[[Any], Any] | None) -> Callable[..., Any]:
        """The proxy's method for C{declared}, C{answered} checking its result (C{None}: nothing to check)."""
        raise NotImplementedError

    def _fromPeer(self) -> str:
        """C{" from PEER"}, for the message of a refused result."""
        return f" from {self.remoteReference.connection.peer}"

    def __getattr__(self, name: str) -> Callable[..., Any]:
        declared = declaredAttribute(self.remoteInterface, name)
        method = self._typedMethod(declared, resultCheck(declared, self._fromPeer))
        self.__dict__[name] = method  # found without __getattr__ from now on
        return method

    def callRemote(self, _name: str, /, *args: Any, **kwargs: Any) -> Any:
        """
        Call C{_name}, checked as its proxy method is (what it returns: the
        client's, a result or an awaitable).

        @raise framing.rpc.NoSuchMethod: the interface has no method C{_name} (nothing is sent).
        """
        declaredMethod(self.remoteInterface, _name)
        method: Callable[..., Any] = getattr(self, _name)
        return method(*args, **kwargs)

    def callRemoteOnly(self, _name: str, /, *args: Any, **kwargs: Any) -> Any:
        """
        Call C{_name} for no answer, its arguments checked first (what it
        returns: the reference's C{callRemoteOnly}'s).

        @raise framing.rpc.NoSuchMethod: the interface has no method C{_name}.
        @raise framing.Violation: an argument its constraints refuse.
        """
        checkArguments(declaredMethod(self.remoteInterface, _name), args, kwargs)
        return self.remoteReference.callRemoteOnly(_name, *args, **kwargs)

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"<{kind} {self.remoteInterface.remoteName} on {self.remoteReference.connection.peer}>"


def checkArguments(declared: RemoteMethod, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """
    Check a call's arguments as the server will, before anything is sent.

    @raise framing.Violation: one its constraints refuse (C{where} names it:
        C{"args[0]"}, C{"kwargs['key']"}); L{framing.rpc._errors.WrongArguments}
        for arguments the signature cannot take.
    """
    if declared.checkArguments is not None:
        declared.checkArguments(args, kwargs)
