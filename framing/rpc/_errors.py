# -*- test-case-name: tests.protocols.rpc.test_named_errors,tests.protocols.rpc.test_call_errors -*-
"""How a remote call fails: the error classes, and the exception types that travel as themselves.

Each error says whose fault it is and who sees it: raised here at once,
nothing sent (L{DeadReferenceError}, L{TooManyPendingCalls}); raised here
later on the call (L{CallTimedOut}, a local L{framing.Violation},
L{callLost}'s reason); made by the peer and rebuilt here (L{rebuild}:
L{RemoteError}, L{NoSuchMethod}, L{NoSuchObject}, L{RemoteViolation}, or a
type registered with L{registerError}, as itself); the peer's fault, which
drops the connection (L{RuleBroken}: L{UnexpectedAnswer},
L{UnreadableRequestId}, L{NotAnRpcMessage}, L{DuplicateRequestId}); and
internal ones neither side sees (L{MessageRefused}, L{MessageWithoutId}).

Cost: L{describe} and L{rebuild} are one dict lookup plus a walk of the
raised type's MRO, on the failure path only.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from typing import Any

from framing import ProtocolError, Violation
from framing._errors import short_repr
from framing._ledger import OverBudget

MAX_TYPE_NAME = 256
"""Longest FAIL type name, in characters (wire format 6.3)."""

_TYPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def isTypeName(name: object) -> bool:
    """
    Whether C{name} is a FAIL's (or a stream ERROR's) type name by the
    grammar of wire format 6.3: dot-separated ASCII identifiers, 1 to
    L{MAX_TYPE_NAME} characters.  Costs one regular-expression match.
    """
    return type(name) is str and 0 < len(name) <= MAX_TYPE_NAME and _TYPE_NAME.match(name) is not None


VIOLATION = "Violation"
"""The wire type name of a refused call: a L{RemoteViolation}."""
NO_SUCH_METHOD = "NoSuchMethod"
"""The wire type name of a call to a method that is not marked L{remote}."""
NO_SUCH_OBJECT = "NoSuchObject"
"""The wire type name of a call to an object the other side does not export."""

_MAX_MESSAGE = 16 * 1024
_MAX_TRACEBACK = 256 * 1024


class RemoteError(Exception):
    """
    The other side of the connection raised an exception while running the
    call, or refused it.  Exception types that both sides registered with
    L{registerError} arrive as themselves instead.

    @ivar remoteType: the name of the type raised remotely: C{"KeyError"} for
        a built-in exception, C{"package.module.Class"} otherwise, or one of
        C{"NoSuchMethod"}, C{"NoSuchObject"}, C{"Violation"} (see the
        subclasses).
    @ivar message: C{str()} of the remote exception.
    @ivar remoteTraceback: the remote traceback as text, only if the other
        side opted in (C{ServerOptions(tracebacks=True)}); otherwise C{None}.
    """

    def __init__(self, remoteType: str, message: str, remoteTraceback: str | None = None) -> None:
        super().__init__(remoteType, message)
        self.remoteType = remoteType
        self.message = message
        self.remoteTraceback = remoteTraceback

    def __str__(self) -> str:
        return f"{self.remoteType}: {self.message}"


class NoSuchMethod(RemoteError):
    """The target object has no method of that name marked with L{remote}."""

    def __init__(self, message: str, remoteTraceback: str | None = None) -> None:
        super().__init__(NO_SUCH_METHOD, message, remoteTraceback)


class WrongArguments(Violation):
    """
    A call gave a remote method arguments its signature cannot take: too
    many or too few, or a keyword it does not have.  Refused before the
    method runs; the caller sees a L{RemoteViolation} naming the method.
    """

    code = "wrong-arguments"


class NoSuchObject(RemoteError):
    """The target is not (or no longer) exported by the other side."""

    def __init__(self, message: str, remoteTraceback: str | None = None) -> None:
        super().__init__(NO_SUCH_OBJECT, message, remoteTraceback)


class RemoteViolation(RemoteError):
    """
    The other side refused the call: an argument broke the method's
    constraint, went over the other side's L{framing.Limits}, named a type it
    does not register, or the result could not be sent.  The connection stays
    up.

    @ivar code: the L{framing.Violation} code, e.g. C{"body-too-large"}.
    @ivar where: where in the call, e.g. C{"args[1]['name']"},
        C{"kwargs['key']"}, C{"result[3]"}.
    """

    def __init__(self, message: str, code: str, where: str, remoteTraceback: str | None = None) -> None:
        super().__init__(VIOLATION, message, remoteTraceback)
        self.code = code
        self.where = where

    def __str__(self) -> str:
        where = f" (at {self.where})" if self.where else ""
        return f"{VIOLATION}: {self.code}: {self.message}{where}"


class RuleBroken(ProtocolError):
    """
    The peer broke a rule of the RPC conventions so that calls cannot be
    matched to answers any more: the connection is dropped.  The text
    begins with the code (C{"unexpected-answer: ..."}), so the ERROR token
    the peer is sent names it.
    """

    def __init__(self, detail: str) -> None:
        """@param detail: what happened, after the code."""
        super().__init__(f"{self.code}: {detail}")


class UnexpectedAnswer(RuleBroken):
    """
    The peer answered a call this side never made, or answered one call
    twice: a confused or hostile peer, whose answers cannot be matched to
    calls any more, so the connection is dropped.
    """

    code = "unexpected-answer"


class UnreadableRequestId(RuleBroken):
    """
    A CALL, ANSWER or FAIL was refused before its request id arrived: the
    call cannot be answered (or the answer matched to its call), so its
    caller would wait for ever.  An ERROR and a close are better than a
    silent hang.
    """

    code = "unreadable-request-id"


class NotAnRpcMessage(RuleBroken):
    """A top-level object on an RPC connection is no RPC message (nor a control object an extension takes)."""

    code = "not-an-rpc-message"


class DuplicateRequestId(RuleBroken):
    """
    A CALL reuses the request id of a call still running here: the two
    answers could not be told apart, and one call would go unanswered.
    """

    code = "duplicate-request-id"


class DeadReferenceError(Exception):
    """
    The call was not sent: the connection of this reference is not up (it was
    lost, or a reconnecting client is between connections).
    """


class TooManyPendingCalls(Exception):
    """
    The call was not sent: this side already has C{CallLimits.maxPending}
    calls waiting for the peer's answers on this connection.
    """


class CallTimedOut(TimeoutError):
    """
    The peer did not answer within C{CallLimits.callTimeout} seconds: the
    call was cancelled (the peer was told), its request id forgotten, and a
    late answer is ignored.

    @ivar name: the method called.
    @ivar seconds: the timeout that passed.
    """

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(f"no answer to {short_repr(name)} within {seconds:g} s")
        self.name = name
        self.seconds = seconds


class DeadlineExceeded(TimeoutError):
    """
    A call's deadline passed (L{protocols.rpc._context}): before it was sent,
    before it ran at the peer, or while it waited or ran.  It travels as
    itself (C{"chunkwire.DeadlineExceeded"}): a server whose method ran out
    of time answers with it, and the caller fails with it at its deadline.

    @ivar name: the method called.
    """

    def __init__(self, message: str, name: str = "?") -> None:
        super().__init__(message, name)
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class ConnectTimedOut(TimeoutError):
    """No TCP connection to the server within the connect timeout (the clients without Twisted)."""


class ServerSilent(TimeoutError):
    """
    The server said nothing for too long: no preamble after connecting, or
    neither an answer nor a PONG while a call waited the client's
    C{silenceTimeout}, or it read nothing this side sent for that long.  The
    connection is closed (the clients without Twisted).
    """


class ConnectionLost(ConnectionError):
    """
    The server closed the connection, or the socket failed; a call waiting
    then fails with it, naming the call (the clients without Twisted).
    """


class ClosedBeforePreamble(ConnectionLost):
    """
    The server closed the connection cleanly before a byte of its preamble
    came, which is what a TLS server does to a plain client (the client's
    preamble is no TLS record): connect with C{tls=}.  The Twisted client's
    is L{protocols._mismatch.ClosedBeforePreamble}.
    """

    code = "closed-before-preamble"

    def __init__(self, peer: str) -> None:
        super().__init__(
            f"{peer} closed the connection before sending anything; a TLS server does this to a plain client:"
            " if the server listens with ssl:, connect with ClientOptions(tls=True) (or tls=tlsContext(...))"
        )
        self.peer = peer


class ConnectionOverBudget(ConnectionLost, OverBudget):
    """
    This side held more for the server than the connection's budget allows
    (C{Limits.max_connection_memory}, counted by its
    L{framing._ledger.Ledger}): most often the replies the server's own
    messages asked for (PONGs, the FAILs of its calls) piling up unsent
    because it reads nothing.  The connection is closed and every waiting
    call fails with it (the clients without Twisted); C{code} is
    C{"over-budget"}.
    """


class CallLost:
    """
    Mixed into the type of the reason a connection was lost, for each call
    that was then waiting for its answer (L{callLost}): the error is still
    of that type (C{ConnectionDone}, a L{framing.ProtocolError}...), so code
    that traps it is unchanged, and its message names the call and the peer
    too.

    @ivar reason: the exception that ended the connection.
    @ivar method: the name of the method called.
    @ivar peer: the peer it was called on.
    """

    reason: BaseException
    method: str
    peer: str

    def __str__(self) -> str:
        return f"{self.reason} (while calling {short_repr(self.method)} on {self.peer})"


_CALL_LOST_TYPES: dict[type, Any] = {}
"""One L{CallLost} type per type of reason, made when first needed (reasons
come from this process, not the peer, so there are few)."""


def callLost(reason: BaseException, method: str, peer: str) -> BaseException:
    """
    The error a call waiting for its answer fails with when the connection
    is lost with C{reason}: a copy of C{reason} that also names C{method}
    and C{peer} (a L{CallLost}), or C{reason} itself if its type cannot be
    extended so.
    """
    base = type(reason)
    try:
        lost: Any = _CALL_LOST_TYPES.get(base)
        if lost is None:
            namespace = {"__module__": base.__module__, "__qualname__": base.__qualname__}
            lost = _CALL_LOST_TYPES[base] = type(base.__name__, (CallLost, base), namespace)
        error: Any = lost.__new__(lost)
        error.__dict__.update(vars(reason))
        error.args = reason.args
    except Exception:
        return reason
    error.reason, error.method, error.peer = reason, method, peer
    error.__cause__ = reason
    made: BaseException = error
    return made


class TooManyRunningCalls(Violation):
    """A call past the most the peer may have running on this side at once (C{maxRunning}): refused before it runs."""

    code = "too-many-running-calls"

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} calls running on this connection")


class TooManyReferences(Violation):
    """A message would make this side hold more of the peer's references than C{CallLimits.maxImports}."""

    code = "too-many-references"


class MessageRefused(Violation):
    """
    The decoder refused an RPC message whose kind and request id had
    already arrived: what L{framing.rpc._wire.MessageUnslicer} reports in
    its place, so that the broker fails or refuses that very call by id.
    It never reaches the application: the caller (a refused answer) or the
    peer (a refused call) is given L{violation} itself.

    @ivar violation: the refusal, as the decoder made it (its C{code} and
        C{where}, e.g. C{"args[2]"}, are this one's too).
    @ivar tag: the message kind (C{CALL}, C{ANSWER}, ... of
        L{framing.rpc._wire}).
    @ivar requestId: the request id of the refused message (the export id
        of a RELEASE).
    """

    def __init__(self, violation: Violation, tag: int, requestId: int) -> None:
        super().__init__(str(violation), violation.where)
        self.code = violation.code
        self.violation = violation
        self.tag = tag
        self.requestId = requestId


class MessageWithoutId(Violation):
    """
    The decoder refused a CALL, ANSWER or FAIL before its request id
    arrived: what L{framing.rpc._wire.MessageUnslicer} reports in its
    place, for the broker to drop the connection with an
    L{UnreadableRequestId}.

    @ivar violation: the refusal, as the decoder made it (its C{code} and
        C{where} are this one's too).
    @ivar tag: the message kind (C{CALL}, C{ANSWER} or C{FAIL} of
        L{framing.rpc._wire}).
    """

    def __init__(self, violation: Violation, tag: int) -> None:
        super().__init__(str(violation), violation.where)
        self.code = violation.code
        self.violation = violation
        self.tag = tag


class ErrorRegistry:
    """
    Exception types that travel as themselves: a registered exception is
    sent as its name and its C{args}, and rebuilt as C{cls(*args)} on a side
    that registered the same name.  A side that did not sees a
    L{RemoteError} with that name as C{remoteType}.
    """

    _reserved = frozenset({VIOLATION, NO_SUCH_METHOD, NO_SUCH_OBJECT})

    def __init__(self) -> None:
        self._byName: dict[str, type[BaseException]] = {}
        self._byType: dict[type[BaseException], str] = {}

    def register(self, cls: type[BaseException], name: str) -> None:
        """
        Send instances of C{cls} (and of its subclasses that are not
        registered themselves) as C{name}, and rebuild C{name} as C{cls}.
        Their C{args} must be values chunkwire can send.

        @raise ValueError: C{name} is reserved, or registered for another type.
        @raise TypeError: C{cls} is not an exception type.
        """
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise TypeError(f"{cls!r} is not an Exception subclass")
        if name in self._reserved or not isTypeName(name):
            raise ValueError(f"{name!r} cannot be registered as an error name (wire format 6.3's grammar)")
        known = self._byName.get(name)
        if known is not None and known is not cls:
            raise ValueError(f"{name!r} is already registered for {known!r}")
        self._byName[name] = cls
        self._byType[cls] = name

    def nameFor(self, cls: type[BaseException]) -> str | None:
        """The registered name of C{cls} or of its nearest registered base, or C{None}."""
        byType = self._byType
        for base in cls.__mro__:
            name = byType.get(base)
            if name is not None:
                return name
        return None

    def typeFor(self, name: str) -> type[BaseException] | None:
        """The type registered as C{name}, or C{None}."""
        return self._byName.get(name)


ERRORS = ErrorRegistry()
"""The process-wide table used by every connection."""

ERRORS.register(DeadlineExceeded, "chunkwire.DeadlineExceeded")


def registerError(cls: type[BaseException], name: str) -> None:
    """Register an exception type to travel as itself: C{registerError(cls, name)} on both sides."""
    ERRORS.register(cls, name)


def _deprecatedRegisterError(cls: type[BaseException], name: str) -> None:
    """
    Deprecated: L{registerError}, under its name from before protocols/
    took one naming rule (camelCase).  It registers as L{registerError}
    does and warns, so that code written for it keeps working while it
    moves to the one name the documentation uses.
    """
    warnings.warn(
        "protocols.rpc.register_error is deprecated: use protocols.rpc.registerError (same arguments)",
        DeprecationWarning,
        stacklevel=2,
    )
    registerError(cls, name)


register_error = _deprecatedRegisterError
"""Deprecated: L{registerError}'s old name, kept for code written for it; each call warns (C{DeprecationWarning})."""


def qualifiedName(cls: type) -> str:
    """
    C{"KeyError"} for built-in types, C{"package.module.Class"} for the
    rest, made to fit the type-name grammar (L{isTypeName}): parts that are
    no ASCII identifier (C{<locals>}) are left out, and a name too long keeps
    its last parts; C{"Exception"} if nothing is left.
    """
    full = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    if isTypeName(full):
        return full
    parts = [part for part in full.split(".") if part.isascii() and part.isidentifier()]
    while parts and len(".".join(parts)) > MAX_TYPE_NAME:
        parts.pop(0)
    return ".".join(parts) or "Exception"


def _text(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:
        text = f"<unprintable {type(error).__name__}>"
    return text[:_MAX_MESSAGE]


def describe(error: BaseException) -> tuple[str, str, tuple[Any, ...] | None]:
    """
    Describe C{error} for a FAIL message: C{(type name, message, details)}.

    C{details} is C{(code, where)} for a violation, the C{args} of a
    registered exception, and C{None} otherwise.  A L{RemoteError} passing
    through (a method that forwards a call) keeps its remote type.
    """
    if isinstance(error, RemoteViolation):
        return VIOLATION, error.message, (error.code, error.where)
    if isinstance(error, RemoteError):
        return error.remoteType, error.message, None
    if isinstance(error, Violation):
        return VIOLATION, error.message[:_MAX_MESSAGE], (error.code, error.where)
    name = ERRORS.nameFor(type(error))
    if name is not None:
        return name, _text(error), tuple(error.args)
    return qualifiedName(type(error)), _text(error), None


def clipTraceback(text: str | None) -> str | None:
    """Keep a traceback's last part if it is very long: the innermost frames matter most."""
    if text is None or len(text) <= _MAX_TRACEBACK:
        return text
    return "...\n" + text[-_MAX_TRACEBACK:]


def rebuild(typeName: str, message: str, traceback: str | None, details: Any) -> BaseException:
    """
    The exception a caller sees for a FAIL message: the registered type
    rebuilt from its C{args}, or a L{RemoteError} (or one of its subclasses).
    """
    if typeName == VIOLATION:
        code, where = details if _isPair(details) else ("violation", "")
        return RemoteViolation(message, code, where, traceback)
    if typeName == NO_SUCH_METHOD:
        return NoSuchMethod(message, traceback)
    if typeName == NO_SUCH_OBJECT:
        return NoSuchObject(message, traceback)
    cls = ERRORS.typeFor(typeName)
    if cls is not None and details is not None:
        try:
            error = cls(*details)
        except Exception:
            # A registered type whose constructor does not take its own args
            # back: still report the failure, as a RemoteError.
            return RemoteError(typeName, message, traceback)
        try:
            error.remoteTraceback = traceback  # type: ignore[attr-defined]
        except AttributeError:
            pass
        return error
    return RemoteError(typeName, message, traceback)


def _isPair(details: Any) -> bool:
    return type(details) is tuple and len(details) == 2 and type(details[0]) is str and type(details[1]) is str


def noSuchMethod(name: object, methods: Iterable[str] = ()) -> NoSuchMethod:
    """
    The error for a call to C{name}, which is not a remote method of its
    target: it suggests the closest of C{methods} (the target's remote
    method names), or lists them when none is close.
    """
    message = f"{short_repr(name)} is not a remote method of this object"
    import difflib  # (only when a call names no method: an error path)

    names = sorted(methods)
    close = difflib.get_close_matches(name, names, n=1) if isinstance(name, str) else []
    if close:
        message += f"; did you mean {close[0]!r}?"
    elif names:
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        message += f"; its remote methods are: {shown}"
    return NoSuchMethod(message)


def noSuchObject(target: int) -> NoSuchObject:
    """The error for a call to an export id the callee does not know."""
    return NoSuchObject(f"no object is exported as {target} on this connection")
