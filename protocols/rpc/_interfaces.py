# -*- test-case-name: tests.protocols.rpc.test_interfaces,tests.protocols.rpc.test_connecting -*-
"""Remote interfaces on the Twisted side: typed proxies whose calls return Deferreds.

The declaration (L{RemoteInterface}), the registry of interfaces
(L{interfaceNamed}) and the checks a proxy makes are sans-IO, in
L{framing.rpc._interfaces} (read it for what an interface is, and why its
stubs return C{Deferred[T]}), shared with the clients without Twisted; this
module re-exports them and adds what Twisted adds: L{TypedReference}, the
proxy of a L{RemoteReference}, whose calls return L{Deferred}s, and
L{deferred}, for servers implementing an interface method with a coroutine;
and it tells L{framing.rpc._signatures} that a result hint of C{Deferred[X]}
means C{X} (L{registerAwaited}).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from twisted.internet.defer import Deferred, fail

from framing import Violation
from framing.rpc._errors import NoSuchMethod
from framing.rpc._interfaces import RemoteInterface as RemoteInterface
from framing.rpc._interfaces import checkArguments, declaredAttribute, declaredMethod, resultCheck
from framing.rpc._interfaces import interfaceNamed as interfaceNamed
from framing.rpc._signatures import RemoteMethod, registerAwaited, registerReference

from ._refs import RemoteReference

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
        method = _proxyMethod(self.remoteReference, declaredAttribute(self.remoteInterface, name))
        self.__dict__[name] = method  # found without __getattr__ from now on
        return method

    def callRemote(self, _name: str, /, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """Call C{_name}, checked as its proxy method is; a name the interface lacks fails with L{NoSuchMethod}."""
        try:
            declaredMethod(self.remoteInterface, _name)
        except NoSuchMethod as error:
            return fail(error)
        method: Callable[..., Deferred[Any]] = getattr(self, _name)
        return method(*args, **kwargs)

    def callRemoteOnly(self, _name: str, /, *args: Any, **kwargs: Any) -> None:
        """
        Call C{_name} for no answer, its arguments checked first.

        @raise NoSuchMethod: the interface has no method C{_name}.
        @raise framing.Violation: an argument its constraints refuse.
        """
        declared = declaredMethod(self.remoteInterface, _name)
        args, kwargs = _unwrapped(args, kwargs)
        checkArguments(declared, args, kwargs)
        self.remoteReference.callRemoteOnly(_name, *args, **kwargs)

    def isConnected(self) -> bool:
        """Whether calls can still be sent."""
        return self.remoteReference.isConnected()

    def whenDisconnected(self) -> Deferred[BaseException]:
        """Fires with the exception that ended the connection."""
        return self.remoteReference.whenDisconnected()

    def __repr__(self) -> str:
        return f"<TypedReference {self.remoteInterface.remoteName} {self.remoteReference!r}>"


# A RemoteReference is a reference (RefOf takes it, a hint of it means any reference), proxied by a
# TypedReference.  Registered here, not in refs.py, which this module imports; protocols.rpc imports both.
registerReference(RemoteReference, TypedReference)
# A result hint of Deferred[X] means X (framing.rpc._signatures loads no Twisted, so it is told here).
registerAwaited(Deferred)


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
    name, check = declared.name, declared.checkArguments
    answered = resultCheck(declared, lambda: _fromPeer(reference))

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


def _fromPeer(reference: RemoteReference) -> str:
    """C{" from PEER"} for a reference on a broker's connection; empty for any other L{Caller}."""
    connection = getattr(reference.broker, "connection", None)
    return f" from {connection.peerName()}" if connection is not None else ""
