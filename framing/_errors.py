# -*- test-case-name: tests.protocols.rpc.test_call_errors,tests.protocols.rpc.test_named_errors -*-
"""The two ways decoding can fail, and the specific reasons under each.

Contract: every failure the framing layer reports for bytes from the wire is
an instance of L{ProtocolError} (the stream is no longer trustworthy: drop the
connection) or of L{Violation} (one object was refused; the stream is still in
sync and the next object decodes normally).  Each carries a short
machine-readable C{code} and C{where}, the path inside the object being built
at which it happened (C{"[3]['name']"}; empty at the top level).
"""

from __future__ import annotations


def short_repr(value: object, limit: int = 60) -> str:
    """
    A repr of a value from the wire for an error message: cut to C{limit}
    characters, and never raising (a huge int has no decimal repr).
    """
    try:
        text = repr(value)
    except ValueError:
        text = f"<{type(value).__name__} of {getattr(value, 'bit_length', lambda: '?')()} bits>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ChunkwireError(Exception):
    """
    Base class of every error the framing layer raises for wire input.

    @ivar code: a short machine-readable reason, stable across releases.
    @ivar where: the path inside the object being decoded, e.g. C{"[2]['k']"}.
    """

    code = "error"

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        if self.where:
            return f"{self.message} (at {self.where})"
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, where={self.where!r})"

    def __eq__(self, other: object) -> bool:
        # Equal errors make decoded result lists comparable in tests and logs.
        return (
            type(other) is type(self)
            and isinstance(other, ChunkwireError)
            and (other.message, other.where) == (self.message, self.where)
        )

    def __hash__(self) -> int:
        return hash((type(self), self.message, self.where))


class ProtocolError(ChunkwireError):
    """
    The byte stream broke the wire format; nothing after this point can be
    trusted, so the connection must be dropped.  A L{Decoder} that raised one
    refuses all further input.
    """

    code = "protocol-error"

    results: list[object] | tuple[()] = ()
    """Objects (and Violations) completed by the same C{feed} before the
    error: they were whole and valid, so a caller may still deliver them."""


def error_token_text(error: ChunkwireError) -> str:
    """
    The text of the ERROR token that tells a peer why C{error} ends its
    connection (wire format, sections 4.8 and 6): the error's code, a colon
    and a space, then its text for people (C{"stream-id-reused: stream id 3
    announced after stream id 5"}), so that another implementation can match
    the code whatever the rest says.  An error whose text already begins so
    (the RPC layer's, L{framing.rpc._errors.RuleBroken}) is not prefixed twice.
    Costs one string format.
    """
    text = str(error)
    if text.startswith(f"{error.code}: "):
        return text
    return f"{error.code}: {text}"


class BadPreamble(ProtocolError):
    """The stream did not start with chunkwire's magic; the message says what it resembles (see describe_foreign)."""

    code = "bad-preamble"


class UnsupportedVersion(ProtocolError):
    """The peer speaks a wire-format version this implementation does not."""

    code = "unsupported-version"


class MalformedHeader(ProtocolError):
    """A token header is invalid: a reserved kind, or a non-canonical length."""

    code = "malformed-header"


class BufferLimitExceeded(ProtocolError):
    """More unprocessed bytes are held for one stream than L{Limits} allows."""

    code = "buffer-limit"


class UnexpectedToken(ProtocolError):
    """A token arrived where the token grammar allows none of its kind (e.g. a stray CLOSE)."""

    code = "unexpected-token"


class PeerError(ProtocolError):
    """The peer sent an ERROR token: it reports a fatal problem and will hang up."""

    code = "peer-error"


class TruncatedStream(ProtocolError):
    """The input ended inside a token or an unfinished object."""

    code = "truncated"


class Violation(ChunkwireError):
    """
    One object was refused (too big, wrong kind, unknown type, bad UTF-8...).
    Only that top-level object is dropped; the stream stays in sync.
    """

    code = "violation"


class BodyTooLarge(Violation):
    """A token announced a body longer than the limit for its kind."""

    code = "body-too-large"


class TooDeep(Violation):
    """Containers were nested deeper than L{Limits.max_depth}."""

    code = "too-deep"


class TooManyItems(Violation):
    """A container, or a whole top-level object, held more items than its limit."""

    code = "too-many-items"


class ObjectTooCostly(Violation):
    """
    One top-level object would take more memory than
    L{Limits.max_object_memory} beyond its wire bytes, by the decoder's
    estimate as it is built (many small containers in few bytes).
    """

    code = "object-too-costly"


class ResourceExhausted(Violation):
    """
    The receiver has no room for the object now: what it would hold of it
    while it arrives passes what its connection may still hold (its
    budget, C{Limits.max_connection_memory}, or the budget its listener's
    connections share).  Unlike L{ObjectTooCostly} the object is not too
    large in itself: the same object may pass once the receiver holds less.
    """

    code = "resource-exhausted"


class HashCollisions(Violation):
    """
    The members of a set or the keys of a dict share hashes so often that
    building it would cost more than L{Limits.max_hash_collisions} equality
    probes (values chosen to collide, e.g. ints that are multiples of
    C{2**61 - 1}).
    """

    code = "hash-collisions"


class KindRefused(Violation):
    """A token of a kind the current unslicer does not accept (e.g. a list as a dict key)."""

    code = "kind-refused"


class UnknownType(Violation):
    """An OPEN named a type that no registry entry builds, or an object has no slicer."""

    code = "unknown-type"


class InvalidValue(Violation):
    """A body was the right size but its content is invalid (bad UTF-8, bad float length)."""

    code = "invalid-value"


class Aborted(Violation):
    """The sender abandoned the object it was sending (an ABORT token)."""

    code = "aborted"


class EncodingError(Violation, TypeError):
    """An object cannot be encoded (no slicer for its type, a cycle, too deep)."""

    code = "encoding-error"
