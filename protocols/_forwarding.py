# -*- test-case-name: tests.protocols.test_coalescing_parts -*-
"""Forwarded: a public attribute that one of its owner's parts keeps.

Contract: C{name = Forwarded("_part", "attribute", doc)} in a class body
makes C{obj.name} read C{obj._part.attribute}: one C-level
C{operator.attrgetter} call, as cheap as a property.  With
C{settable=True}, assigning C{obj.name} sets C{obj._part.attribute};
otherwise assigning raises C{AttributeError}, as for a read-only property.
It lets a class keep its state in small parts of its own without changing
the names its users read, and without a four-line property per name.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Forwarded(Generic[T]):
    """
    A data descriptor that reads (and, if settable, writes) an attribute of
    one of the instance's own parts.
    """

    def __init__(self, part: str, attribute: str, doc: str, settable: bool = False) -> None:
        """
        @param part: the name of the instance attribute that holds the part.
        @param attribute: the part's attribute to read and write.
        @param doc: the docstring, as a property's.
        @param settable: whether the attribute may be assigned through the owner.
        """
        self.part = part
        self.attribute = attribute
        self.settable = settable
        self.__doc__ = doc
        self._read = attrgetter(f"{part}.{attribute}")

    def __repr__(self) -> str:
        return f"<Forwarded {self.part}.{self.attribute}>"

    @overload
    def __get__(self, instance: None, owner: type) -> Forwarded[T]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> T: ...

    def __get__(self, instance: object | None, owner: type) -> Forwarded[T] | T:
        if instance is None:
            return self
        value: T = self._read(instance)
        return value

    def __set__(self, instance: object, value: T) -> None:
        if not self.settable:
            raise AttributeError(f"{self.attribute!r} is read-only here: it is {self.part}'s")
        part: Any = getattr(instance, self.part)
        setattr(part, self.attribute, value)
