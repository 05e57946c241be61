# -*- test-case-name: tests.protocols.bulk.test_states,tests.framing.bulk.test_connection -*-
"""A bulk stream's states, both ways, and the one table of what moves each between them.

Contract: every shell (the Twisted channel, the clients without Twisted)
tracks its streams with these two enums and advances them only through
L{SENDING_TRANSITIONS} and L{RECEIVING_TRANSITIONS}, h11 style: L{Transitions.next} is one dict
lookup, and a pair that is not in the table raises L{IllegalTransition}
(a bug on this side, never the peer's doing: what the peer sends is
checked before it becomes an event).  Callers ask "is it in state X" with
C{is} or C{in}, never by order.

The sending side::

    NEW --announce--> ANNOUNCED --start (initial window or first grant)--> SENDING
    ANNOUNCED --take back (its message was not sent)--> NEW
    SENDING --all sent--> ENDING --END sent (once hashed)--> ENDED
    ANNOUNCED, SENDING, ENDING, ENDED --done (the receiver verified)--> DELIVERED
    NEW, ANNOUNCED, SENDING, ENDING, ENDED --fail--> FAILED

The receiving side::

    ANNOUNCED --start (first grant sent)--> RECEIVING --END received--> ENDED
    ENDED --all released--> VERIFYING --sink completed--> DONE
    ANNOUNCED, RECEIVING, ENDED, VERIFYING --fail--> FAILED
"""

from __future__ import annotations

from enum import Enum
from typing import Generic, TypeVar

from ._errors import IllegalTransition

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


class SendState(Named):
    """Where a stream this side sends stands (see the module docstring)."""

    NEW = "new"
    """Not announced yet."""
    ANNOUNCED = "announced"
    """In a message sent; waits for the receiver's HELLO and credit."""
    SENDING = "sending"
    """Sending frames as credit allows."""
    ENDING = "ending"
    """Every frame sent; END waits for the digest."""
    ENDED = "ended"
    """END sent; waits for DONE."""
    DELIVERED = "delivered"
    """DONE came: the receiver has every byte, verified."""
    FAILED = "failed"
    """Cancelled by the receiver, aborted here, or the connection ended."""


class SendEvent(Named):
    """What moves a stream this side sends from one state to the next."""

    ANNOUNCE = "announce"
    TAKE_BACK = "take back"
    START = "start"
    ALL_SENT = "all sent"
    END_SENT = "end sent"
    DONE = "done"
    FAIL = "fail"


class ReceiveState(Named):
    """Where a stream the peer sends stands (see the module docstring)."""

    ANNOUNCED = "announced"
    """In a message received; nobody receives it yet."""
    RECEIVING = "receiving"
    """Granted: frames go to the sink."""
    ENDED = "ended"
    """END came; waits for the sink and the hasher to release every byte."""
    VERIFYING = "verifying"
    """Checked; waits for the sink to complete."""
    DONE = "done"
    """DONE sent."""
    FAILED = "failed"
    """Cancelled here, aborted by the sender, failed its check, or the connection ended."""


class ReceiveEvent(Named):
    """What moves a stream the peer sends from one state to the next."""

    START = "start"
    END = "end"
    ALL_RELEASED = "all released"
    COMPLETED = "completed"
    FAIL = "fail"


_S, _R = SendState, ReceiveState

ON_WIRE = frozenset((_S.ANNOUNCED, _S.SENDING, _S.ENDING, _S.ENDED))
"""Sending states in which the receiver knows the stream (an ABORT means something to it)."""

SENDING_TRANSITIONS: Transitions[SendState, SendEvent] = Transitions(
    "sending",
    {
        (_S.NEW, SendEvent.ANNOUNCE): _S.ANNOUNCED,
        (_S.ANNOUNCED, SendEvent.TAKE_BACK): _S.NEW,
        (_S.ANNOUNCED, SendEvent.START): _S.SENDING,
        (_S.SENDING, SendEvent.ALL_SENT): _S.ENDING,
        (_S.ENDING, SendEvent.END_SENT): _S.ENDED,
        **{(state, SendEvent.DONE): _S.DELIVERED for state in ON_WIRE},
        **{(state, SendEvent.FAIL): _S.FAILED for state in (_S.NEW, *ON_WIRE)},
    },
)
"""The sending side's table."""

LIVE = frozenset((_R.ANNOUNCED, _R.RECEIVING, _R.ENDED, _R.VERIFYING))
"""Receiving states not over yet."""

RECEIVING_TRANSITIONS: Transitions[ReceiveState, ReceiveEvent] = Transitions(
    "receiving",
    {
        (_R.ANNOUNCED, ReceiveEvent.START): _R.RECEIVING,
        (_R.RECEIVING, ReceiveEvent.END): _R.ENDED,
        (_R.ENDED, ReceiveEvent.ALL_RELEASED): _R.VERIFYING,
        (_R.VERIFYING, ReceiveEvent.COMPLETED): _R.DONE,
        **{(state, ReceiveEvent.FAIL): _R.FAILED for state in LIVE},
    },
)
"""The receiving side's table."""
