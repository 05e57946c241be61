"""Transition tables: a stream side's states and what moves it between them.

Contract: a L{Transitions} is a dict from (state, event) to the next state,
h11 style; L{Transitions.next} is one dict lookup, and a pair that is not in
the table raises L{IllegalTransition} (a bug on this side, never the peer's
doing: what the peer sends is checked before it becomes an event).  Callers
ask "is it in state X" with C{is} or C{in}, never by order.
"""

from __future__ import annotations

from enum import Enum
from typing import Generic, TypeVar

from framing.bulk.errors import IllegalTransition

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)


class Named(Enum):
    """
    The base of states and events: members are singletons, so they hash by
    identity (a table lookup calls no Python-level C{__hash__}).
    """

    __hash__ = object.__hash__


class Transitions(Generic[S, E]):
    """
    One machine's table.

    @ivar name: what the machine is, for error messages.
    @ivar table: C{{(state, event): next state}}.
    """

    def __init__(self, name: str, table: dict[tuple[S, E], S]) -> None:
        self.name = name
        self.table = table

    def next(self, state: S, event: E) -> S:
        """
        The state after C{event} in C{state}.

        @raise IllegalTransition: the table has no such transition.
        """
        try:
            return self.table[state, event]
        except KeyError:
            raise IllegalTransition(self.name, state.name, event.name) from None
