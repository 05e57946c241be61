# -*- test-case-name: tests.framing.test_slicing,tests.framing.test_constraints_more,tests.framing.test_hooks -*-
"""The registry: which types may be sent and which open-type names may be built.

Contract: a decoder builds an object only through an unslicer registered
under the OPEN's name; nothing is imported or constructed by name otherwise.
Lookups are one dict access (a type's MRO is walked once, then cached).
"""

from __future__ import annotations

import array
import weakref
from collections.abc import Callable
from typing import Any

from .._limits import Limits
from ._arrays import ARRAY_UNSLICERS, ArraySlicer, BytesLikeSlicer
from ._builtin import BUILTIN_UNSLICERS, Unslicer
from ._custom import FunctionSlicer, dataclass_functions, function_unslicer
from ._interfaces import ISlicer, IUnslicer
from ._stream import StreamUnslicer

UnslicerFactory = Callable[[Limits], Any]


class Registry:
    """
    Maps open-type names to unslicer factories and Python types to slicers.

    A registry made with a C{parent} sees the parent's entries and may add or
    override its own without changing the parent.

    @ivar generation: bumped by each registration in this registry or one
        of its parents (which tell their children), so an encoder that
        cached how to write a type knows, with one comparison, to look
        again.
    @ivar codec_cache: what the codec cores worked out from this registry
        (the compiled reader C{loads} uses, say), emptied by each
        registration here or in a parent.
    """

    def __init__(self, parent: Registry | None = None) -> None:
        self._parent = parent
        self._unslicers: dict[str, UnslicerFactory] = {}
        self._slicers: dict[type, Any] = {}
        self._slicer_cache: dict[type, Any] = {}
        self.generation = 0
        self.codec_cache: dict[str, Any] = {}
        # Made when a first child is: most registries (one per connection) have none.
        self._children: weakref.WeakSet[Registry] | None = None
        if parent is not None:
            if parent._children is None:
                parent._children = weakref.WeakSet()
            parent._children.add(self)

    def add_unslicer(self, name: str, factory: UnslicerFactory) -> None:
        """
        Build objects opened as C{name} with C{factory(limits)}, which must
        return an L{IUnslicer} provider.
        """
        if not name or not name.isascii() or len(name) > 64:
            raise ValueError(f"open-type name must be 1-64 ASCII characters: {name!r}")
        self._unslicers[name] = factory
        self._changed()

    def add_slicer(self, cls: type, slicer: Any) -> None:
        """Send instances of C{cls} (and of its subclasses) through C{slicer}, an L{ISlicer} provider."""
        if not ISlicer.providedBy(slicer):
            raise TypeError(f"{slicer!r} does not provide ISlicer")
        self._slicers[cls] = slicer
        self._slicer_cache.clear()
        self._changed()

    def _changed(self) -> None:
        """Tell the codecs of this registry and of its children to look their types up again."""
        self.generation += 1
        self.codec_cache.clear()
        if self._children is not None:
            for child in list(self._children):
                child._changed()

    def register(
        self,
        cls: type,
        name: str,
        to_wire: Callable[[Any], Any] | None = None,
        from_wire: Callable[[Any], Any] | None = None,
        *,
        slicer: Any = None,
        unslicer: UnslicerFactory | None = None,
    ) -> None:
        """
        Make C{cls} sendable as open-type C{name}.

        Give either a pair of functions (C{to_wire(obj)} returns a state the
        encoder can send, C{from_wire(state)} rebuilds the object), or a
        C{slicer}/C{unslicer} pair, or neither for a dataclass (its init
        fields travel as a dict).  Only the type's own name is ever built on
        receipt: nothing is imported or constructed by name.  C{from_wire}
        should only build the object: the compiled core may call it again
        for the same state when the object around it is refused (see
        C{rebuildable} in L{framing.slicing._interfaces.IUnslicer}).
        """
        if slicer is not None or unslicer is not None:
            if slicer is None or unslicer is None:
                raise TypeError("give both a slicer and an unslicer")
        else:
            if to_wire is None and from_wire is None:
                to_wire, from_wire = dataclass_functions(cls)
            if to_wire is None or from_wire is None:
                raise TypeError("give both to_wire and from_wire")
            slicer = FunctionSlicer(name, to_wire)
            unslicer = function_unslicer(name, from_wire)
        self.add_unslicer(name, unslicer)
        self.add_slicer(cls, slicer)

    def unslicer_for(self, name: str) -> UnslicerFactory | None:
        """Return the factory registered for C{name}, or C{None}."""
        factory = self._unslicers.get(name)
        if factory is None and self._parent is not None:
            return self._parent.unslicer_for(name)
        return factory

    def unslicers(self) -> dict[str, UnslicerFactory]:
        """Every open-type name this registry builds, with its factory (its own over its parents')."""
        found = self._parent.unslicers() if self._parent is not None else {}
        found.update(self._unslicers)
        return found

    def slicer_for(self, cls: type) -> Any:
        """Return the slicer for C{cls} or its nearest registered base, or C{None}."""
        try:
            return self._slicer_cache[cls]
        except KeyError:
            pass
        found = None
        for base in cls.__mro__:
            found = self._slicers.get(base)
            if found is not None:
                break
        if found is None and self._parent is not None:
            # Not cached: the parent may gain a registration later.
            return self._parent.slicer_for(cls)
        self._slicer_cache[cls] = found
        return found


def _builtin_registry() -> Registry:
    registry = Registry()
    unslicers: tuple[type[Unslicer], ...] = (*BUILTIN_UNSLICERS, *ARRAY_UNSLICERS, StreamUnslicer)
    for unslicer in unslicers:
        assert IUnslicer.implementedBy(unslicer)
        registry.add_unslicer(unslicer.open_type, unslicer)
    registry.add_slicer(bytearray, BytesLikeSlicer("bytearray"))
    registry.add_slicer(memoryview, BytesLikeSlicer("memoryview"))
    registry.add_slicer(array.array, ArraySlicer())
    return registry


DEFAULT_REGISTRY = _builtin_registry()
"""The registry a L{framing.Decoder} or L{framing.Encoder} uses when given none."""

register = DEFAULT_REGISTRY.register
