# -*- test-case-name: tests.framing.rpc.test_interfaces,tests.framing.rpc.test_session -*-
"""What may be called remotely: L{Referenceable} objects and their L{remote} methods, sans-IO.

Contract (the exposure rule): a peer reaches only instances of
L{Referenceable} subclasses (the root, and objects sent by reference), and
on those only the methods marked L{remote} (or a remote interface's
methods); any other name is a C{NoSuchMethod}, nothing looked up with
C{getattr}.  An override not marked again is not remote.  Constraints,
derived from the hints (L{framing.rpc._signatures}) or given explicitly,
are checked on the side that runs the method: arguments before, result
after.  The Twisted broker and the clients without Twisted share it.

Cost: each class's table of remote methods is built once, when the class
is created; finding a method is one dict lookup.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ._signatures import RefOf, RemoteMethod, registerHint, remoteMethodOf


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
"""The attribute a remote interface keeps its declared methods in (L{protocols.rpc._interfaces})."""


def _implementation(cls: type, name: str, declared: RemoteMethod) -> RemoteMethod:
    """The remote method of C{cls} that implements the interface method C{declared}, with its checks."""
    owner = next(klass for klass in cls.__mro__ if name in vars(klass))
    if _INTERFACE_METHODS in vars(owner):
        raise TypeError(f"{cls.__qualname__} does not implement {owner.__qualname__}.{name}")
    return RemoteMethod(
        name,
        getattr(cls, name),
        declared.checkArguments,
        declared.result,
        declared.proxied,
        declared.arguments,
        (declared.fewest, declared.most),
        declared.checkValues,
    )
