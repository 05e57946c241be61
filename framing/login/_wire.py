# -*- test-case-name: tests.framing.login.test_exchange,tests.protocols.test_blocking_typed,tests.attack.test_auth -*-
"""The login exchange on the wire: one small open-type, three fields, and the limits before a login.

Contract: every login message is one top-level object, OPEN C{"login"}, then
exactly three fields, CLOSE::

    (verb, mechanism, payload)      verb and mechanism STRING, payload BYTES

The client sends C{"start"} (with the mechanism's first message) and, when
asked, C{"continue"}; the server answers C{"challenge"}, C{"accepted"} or
C{"refused"} (an empty payload, and the same for every reason).  The fields
are checked at their headers, so a login message never costs more than
L{MAX_PAYLOAD} bytes and two short strings.

Until a connection has logged in, its decoder knows only this type (see
L{loginRegistry}) and runs under L{PRE_LOGIN_LIMITS}: a few KiB per object,
no nesting, and no references or streams, because their types are not in
the registry.
"""

from __future__ import annotations

from typing import Any

from zope.interface import implementer

from framing import Limits, Registry
from framing._errors import InvalidValue, KindRefused, TooManyItems, short_repr
from framing.slicing._builtin import BudgetedUnslicer
from framing.slicing._interfaces import ISlicer
from framing.wire import BYTES, KIND_NAMES, STRING

OPEN_TYPE = "login"
"""The open-type name of every login message."""

START, CONTINUE = "start", "continue"
"""The verbs a client sends."""

CHALLENGE, ACCEPTED, REFUSED = "challenge", "accepted", "refused"
"""The verbs a server sends."""

SCRAM, TOKEN, ANONYMOUS, CERTIFICATE, NAME = "SCRAM-SHA-256", "TOKEN", "ANONYMOUS", "CERTIFICATE", "NAME"
"""The mechanism names."""

VERBS = frozenset({START, CONTINUE, CHALLENGE, ACCEPTED, REFUSED})

MAX_MECHANISM = 32
"""Longest mechanism name, in characters."""

MAX_PAYLOAD = 2048
"""Longest payload, in bytes: a SCRAM message, a token or an object name fits with room to spare."""

PRE_LOGIN_LIMITS = Limits(
    max_bytes_length=MAX_PAYLOAD,
    max_string_length=MAX_MECHANISM,
    max_bigint_length=8,
    max_open_name_length=16,
    max_error_length=64,
    max_buffered_bytes=8 * 1024,
    max_depth=1,
    max_items=3,
    max_object_items=3,
    max_object_memory=4 * 1024,
    max_hash_collisions=1,
)
"""What a connection receives before it has logged in: one login message at a time, at most a few KiB."""


class LoginMessage(tuple):  # type: ignore[type-arg]
    """C{(verb, mechanism, payload)}: one login message, as sent and as received."""

    __slots__ = ()

    @classmethod
    def of(cls, verb: str, mechanism: str, payload: bytes = b"") -> LoginMessage:
        """A message with these fields."""
        return cls((verb, mechanism, payload))

    @property
    def verb(self) -> str:
        return str(self[0])

    @property
    def mechanism(self) -> str:
        return str(self[1])

    @property
    def payload(self) -> bytes:
        return bytes(self[2])

    def __repr__(self) -> str:
        # A payload may be a token or a name: never shown.
        return f"LoginMessage({self[0]!r}, {self[1]!r}, <{len(self[2])} bytes>)"


@implementer(ISlicer)
class LoginSlicer:
    """Writes a L{LoginMessage} as OPEN C{"login"}, its three fields, CLOSE."""

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(OPEN_TYPE, obj, obj)


_KINDS = (STRING, STRING, BYTES)


def _verb(value: Any) -> None:
    if value not in VERBS:
        raise InvalidValue(f"unknown login verb {short_repr(value)}")


def _mechanism(value: Any) -> None:
    if not value or len(value) > MAX_MECHANISM:
        raise InvalidValue(f"a mechanism name has 1 to {MAX_MECHANISM} characters, got {short_repr(value)}")


def _payload(value: Any) -> None:
    if len(value) > MAX_PAYLOAD:
        raise InvalidValue(f"a login payload has at most {MAX_PAYLOAD} bytes")


_CHECKS = (_verb, _mechanism, _payload)


class LoginUnslicer(BudgetedUnslicer):
    """Builds a L{LoginMessage}, checking each field's kind at its header and its value once decoded."""

    open_type = OPEN_TYPE

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.max_length = self.cap = len(_KINDS)
        self.items: list[Any] = []

    def check_token(self, kind: int, size: int) -> None:
        index = len(self.items)
        if index >= len(_KINDS):
            raise TooManyItems(f"a login message has {len(_KINDS)} fields")
        if kind != _KINDS[index]:
            raise KindRefused(f"login field {index} cannot be {KIND_NAMES.get(kind, kind)}")

    def receive_child(self, obj: Any) -> None:
        index = len(self.items)
        if index >= self.cap:
            self.full()
        _CHECKS[index](obj)
        self.items.append(obj)

    def finish(self) -> LoginMessage:
        if len(self.items) != len(_KINDS):
            raise InvalidValue(f"a login message needs {len(_KINDS)} fields, got {len(self.items)}")
        return LoginMessage(self.items)

    def child_where(self) -> str:
        return ("verb", "mechanism", "payload")[min(len(self.items), 2)]


def addLoginTypes(registry: Registry) -> None:
    """Let C{registry} send and receive L{LoginMessage}s."""
    registry.add_slicer(LoginMessage, LoginSlicer())
    registry.add_unslicer(OPEN_TYPE, LoginUnslicer)


def loginRegistry() -> Registry:
    """A registry holding only the login type (no references, no streams, no application types)."""
    registry = Registry()
    addLoginTypes(registry)
    return registry
