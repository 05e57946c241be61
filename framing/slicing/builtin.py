"""Unslicers for the built-in containers.

Contract: each container unslicer holds at most C{Limits.max_items} items and
refuses the item past that at its arrival; dict keys and set members must be
hashable and unique.  Item cost is O(1).
"""

from __future__ import annotations

from typing import Any, ClassVar

from zope.interface import implementer

from ..errors import InvalidValue, TooManyItems, short_repr
from ..limits import Limits
from .interfaces import IUnslicer


@implementer(IUnslicer)
class Unslicer:
    """
    A base for unslicers: accepts every token kind and builds nothing.

    @ivar limits: the decoder's L{Limits}.
    """

    open_type: ClassVar[str] = ""
    checks_tokens: ClassVar[bool] = False
    """Set for subclasses that override L{check_token}, so the decoder can
    skip the call for the many that do not."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.checks_tokens = cls.check_token is not Unslicer.check_token

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def check_token(self, kind: int, size: int) -> None:
        """Accept every token; subclasses refuse by raising L{framing.Violation}."""

    def receive_child(self, obj: Any) -> None:
        raise NotImplementedError

    def finish(self) -> Any:
        raise NotImplementedError

    def child_where(self) -> str:
        return ""


class ListUnslicer(Unslicer):
    """Builds a C{list}."""

    open_type = "list"

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.items: list[Any] = []
        self._max = limits.max_items

    def receive_child(self, obj: Any) -> None:
        items = self.items
        if len(items) >= self._max:
            raise TooManyItems(f"{self.open_type} has more than {self._max} items")
        items.append(obj)

    def finish(self) -> Any:
        return self.items

    def child_where(self) -> str:
        return f"[{len(self.items)}]"


class TupleUnslicer(ListUnslicer):
    """Builds a C{tuple}."""

    open_type = "tuple"

    def finish(self) -> Any:
        return tuple(self.items)


class SetUnslicer(Unslicer):
    """Builds a C{set}; members must be hashable and distinct."""

    open_type = "set"
    _build: ClassVar[type] = set

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.items: set[Any] = set()
        self._max = limits.max_items

    def receive_child(self, obj: Any) -> None:
        items = self.items
        if len(items) >= self._max:
            raise TooManyItems(f"{self.open_type} has more than {self._max} items")
        try:
            size = len(items)
            items.add(obj)
        except TypeError:
            raise InvalidValue(f"unhashable {type(obj).__name__} in a {self.open_type}") from None
        if len(items) == size:
            raise InvalidValue(f"duplicate member in a {self.open_type}")

    def finish(self) -> Any:
        return self._build(self.items)

    def child_where(self) -> str:
        return f"<member {len(self.items)}>"


class FrozenSetUnslicer(SetUnslicer):
    """Builds a C{frozenset}."""

    open_type = "frozenset"
    _build = frozenset


_NO_KEY = object()


class DictUnslicer(Unslicer):
    """Builds a C{dict} from alternating keys and values; keys are hashable and distinct."""

    open_type = "dict"

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.items: dict[Any, Any] = {}
        self._key: Any = _NO_KEY
        self._max = limits.max_items

    def receive_child(self, obj: Any) -> None:
        key = self._key
        if key is not _NO_KEY:
            self.items[key] = obj
            self._key = _NO_KEY
            return
        try:
            present = obj in self.items
        except TypeError:
            raise InvalidValue(f"unhashable dict key of type {type(obj).__name__}") from None
        if present:
            raise InvalidValue(f"duplicate dict key {short_repr(obj)}")
        if len(self.items) >= self._max:
            raise TooManyItems(f"dict has more than {self._max} keys")
        self._key = obj

    def expecting_key(self) -> bool:
        """True when the next child is a key (constraints pick key or value rules by this)."""
        return self._key is _NO_KEY

    def finish(self) -> Any:
        if self._key is not _NO_KEY:
            raise InvalidValue(f"dict closed after key {short_repr(self._key)} with no value")
        return self.items

    def child_where(self) -> str:
        if self._key is _NO_KEY:
            return f"<key {len(self.items)}>"
        return f"[{short_repr(self._key)}]"


BUILTIN_UNSLICERS: tuple[type[Unslicer], ...] = (
    ListUnslicer,
    TupleUnslicer,
    SetUnslicer,
    FrozenSetUnslicer,
    DictUnslicer,
)
