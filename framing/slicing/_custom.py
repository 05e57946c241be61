# -*- test-case-name: tests.framing.test_cores_nested -*-
"""User types: objects sent as a registered open-type name and a state.

Contract: a registered type travels as OPEN name, its state (any value the
encoder can send), CLOSE.  The receiver calls the registered C{from_wire}
with the decoded state; nothing but what a registry names is ever built, and
an exception in C{from_wire} refuses only that object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from zope.interface import implementer

from .._errors import InvalidValue, KindRefused, TooManyItems, Violation
from .._limits import Limits
from ..wire import KIND_NAMES
from ._builtin import Unslicer
from ._interfaces import ISlicer


class PartsUnslicer(Unslicer):
    """
    Collects a fixed number of parts, optionally of fixed body kinds, and
    builds the object from them in L{build}.

    @cvar part_kinds: for each part, the body kinds accepted at its header
        (C{None}: any).
    @cvar part_types: for each part, the Python types accepted once it is
        decoded (C{None} or a missing entry: any), which catches value kinds
        (ints, None, bools) whose headers carry no body to refuse early.
    """

    part_kinds: Sequence[frozenset[int] | None] = ()
    part_types: Sequence[type | tuple[type, ...] | None] = ()

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.parts: list[Any] = []

    def check_token(self, kind: int, size: int) -> None:
        index = len(self.parts)
        if index >= len(self.part_kinds):
            raise TooManyItems(f"{self.open_type} takes {len(self.part_kinds)} parts")
        allowed = self.part_kinds[index]
        if allowed is not None and kind not in allowed:
            raise KindRefused(f"part {index} of {self.open_type} cannot be {KIND_NAMES.get(kind, kind)}")

    def receive_child(self, obj: Any) -> None:
        index = len(self.parts)
        if index >= len(self.part_kinds):
            raise TooManyItems(f"{self.open_type} takes {len(self.part_kinds)} parts")
        wanted = self.part_types[index] if index < len(self.part_types) else None
        if wanted is not None and not isinstance(obj, wanted):
            raise KindRefused(f"part {index} of {self.open_type} cannot be a {type(obj).__name__}")
        self.parts.append(obj)

    def finish(self) -> Any:
        if len(self.parts) != len(self.part_kinds):
            raise InvalidValue(f"{self.open_type} needs {len(self.part_kinds)} parts, got {len(self.parts)}")
        return self.build(*self.parts)

    def build(self, *parts: Any) -> Any:
        raise NotImplementedError

    def child_where(self) -> str:
        return f"<{self.open_type} part {len(self.parts)}>"


@implementer(ISlicer)
class FunctionSlicer:
    """Sends an object as OPEN name, C{to_wire(obj)}, CLOSE."""

    def __init__(self, name: str, to_wire: Callable[[Any], Any]) -> None:
        self.name = name
        self.to_wire = to_wire

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(self.name, obj, (self.to_wire(obj),))


def function_unslicer(name: str, from_wire: Callable[[Any], Any]) -> Callable[[Limits], Unslicer]:
    """Return an unslicer factory that builds objects with C{from_wire(state)}."""

    class FunctionUnslicer(PartsUnslicer):
        open_type = name
        part_kinds = (None,)
        rebuildable = True  # from_wire builds an object and does nothing else (see Registry.register)

        def build(self, state: Any) -> Any:
            try:
                return from_wire(state)
            except Violation:
                raise
            except Exception as error:
                raise InvalidValue(f"{name}: cannot build from its state: {type(error).__name__}: {error}") from None

    FunctionUnslicer.__qualname__ = f"FunctionUnslicer[{name}]"
    return FunctionUnslicer


def dataclass_functions(cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """
    Return C{(to_wire, from_wire)} for a dataclass: its init fields as a
    dict of name to value, and back (unknown or missing fields refuse the
    object rather than reach the constructor).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    names = tuple(f.name for f in dataclasses.fields(cls) if f.init)

    def to_wire(obj: Any) -> dict[str, Any]:
        return {name: getattr(obj, name) for name in names}

    def from_wire(state: Any) -> Any:
        if not isinstance(state, dict) or set(state) - set(names):
            raise InvalidValue(f"{cls.__name__} takes a dict of the fields {', '.join(names)}")
        return cls(**state)

    return to_wire, from_wire
