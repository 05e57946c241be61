"""A remote interface declared without loading Twisted: what a service shared with clients without Twisted looks like.

C{Deferred} is imported for type checking only, so importing this module
loads no Twisted; its stubs still say C{-> Deferred[T]} for the Twisted
client's sake, and the sans-IO core reads them as C{T}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Protocol

from framing.rpc._interfaces import RemoteInterface
from framing.rpc._signatures import MaxLength, Range

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred


class ICounter(RemoteInterface, Protocol, name="tests.ICounter"):
    """A counter service: its hints are its constraints."""

    def add(self, name: Annotated[str, MaxLength(8)], amount: Annotated[int, Range(0, 100)] = 1) -> Deferred[int]:
        """Add C{amount} to counter C{name}; its new value."""

    def names(self) -> Deferred[list[str]]:
        """The counters' names."""
