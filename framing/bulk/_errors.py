# -*- test-case-name: tests.framing.bulk.test_connection,tests.framing.bulk.test_streams,tests.protocols.test_base -*-
"""How a bulk transfer fails: which error is raised where, and what each side sees.

 - The peer broke the bulk protocol: a L{framing.ProtocolError}
   (L{FlowControlError}, L{StreamIdReused}, L{TooManyStreams}); that
   connection is dropped, others unharmed.
 - One stream is abandoned by either side: L{StreamReset} (its C{code} says
   why) at both ends; the connection goes on.
 - No digest in common: L{DigestUnavailable} on the sender, L{DigestRefused}
   (a L{framing.Violation}) on the receiver.
 - The bytes do not match the digest: L{IntegrityError} at both ends.
 - A bug on this side: L{IllegalTransition}, raised to its caller; nothing
   is sent.

A transfer either completes verified or fails with one of these (or with
the reason its connection was lost); L{StreamReset} and L{IntegrityError}
cross a remote call as themselves.  What the peer is told of a local failure
names no local file (L{peerText}).

Design: docs/design/bulk.md
"""

from __future__ import annotations

import errno as _errno
import os

from .._errors import ProtocolError, Violation
from ..rpc._errors import registerError
from ._digests import DigestUnavailable, IntegrityError


class StreamReset(Exception):
    """
    The stream was abandoned by one side before it completed.

    @ivar code: why, in a word: C{"cancelled"} (the receiver gave up or
        dropped the stream unread), C{"source-failed"} (the sender's source
        raised), C{"sink-failed"} (the receiver's sink raised),
        C{"out-of-order"} (data out of order for a sink that needs order),
        C{"size"} (more or fewer bytes than announced).
    @ivar message: the details.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def peerText(error: BaseException) -> str:
    """
    What the peer is told of C{error}, the local failure that abandons a
    stream (the message of a CANCEL or an ABORT).  Its text, except for an
    C{OSError}, whose text names the files it failed on: where this side
    keeps its files is none of the peer's business, so the peer gets the
    errno's name and text only (C{"ENOSPC (No space left on device)"}),
    or, without an errno, the error's type.  The local caller still gets
    the error itself, paths and all.
    """
    if isinstance(error, OSError):
        if error.errno is None:
            return type(error).__name__
        return f"{_errno.errorcode.get(error.errno, str(error.errno))} ({os.strerror(error.errno)})"
    return str(error)


class IllegalTransition(RuntimeError):
    """
    A stream was asked to do what its state does not allow: a bug in the
    caller (sending a L{protocols.bulk.Stream} twice is one), never the
    peer's doing.

    @ivar machine: which side (C{"sending"}, C{"receiving"}).
    @ivar state: the state's name.
    @ivar event: the event's name.
    """

    def __init__(self, machine: str, state: str, event: str) -> None:
        super().__init__(f"{machine} stream: {event} is not allowed in state {state}")
        self.machine = machine
        self.state = state
        self.event = event


class FlowControlError(ProtocolError):
    """The peer sent more stream data than it was granted credit for."""

    code = "flow-control"


class StreamIdReused(ProtocolError):
    """The peer announced a stream id it had already used on the connection (ids must increase)."""

    code = "stream-id-reused"


class TooManyStreams(ProtocolError):
    """The peer has more incoming streams live than L{protocols.bulk.BulkOptions.maxStreams}."""

    code = "too-many-streams"


class DigestRefused(Violation):
    """
    The peer announced a stream checked with a digest this side does not
    accept (L{protocols.bulk.BulkOptions.digests}), or, asking for the
    negotiated one, shares none with it: the message carrying the stream
    is refused, before any of its data is taken.
    """

    code = "digest-unavailable"


class HelloMissing(Violation):
    """
    The peer announced a stream before its HELLO arrived (wire format 5.5: a
    side sends its HELLO before its first C{bulk.stream}): the message
    carrying the stream is refused (a call gets a FAIL), before any of its
    data is taken; the connection stays up.
    """

    code = "hello-missing"


registerError(DigestUnavailable, "chunkwire.bulk.DigestUnavailable")
registerError(IntegrityError, "chunkwire.bulk.IntegrityError")
registerError(StreamReset, "chunkwire.bulk.StreamReset")
