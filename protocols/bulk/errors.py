"""How a bulk transfer fails.

Contract: a transfer either completes verified or fails with one of these
(or with the reason its connection was lost).  L{IntegrityError} and
L{StreamReset} are registered with L{protocols.rpc.register_error}, so a
remote method that fails with one reaches its caller as the same type.
A peer that breaks flow control breaks the connection: L{FlowControlError}
is a L{framing.ProtocolError}, and so are a stream id announced twice
(L{StreamIdReused}) and streams past the connection's cap (L{TooManyStreams}).
"""

from __future__ import annotations

from framing import ProtocolError

from ..rpc import register_error
from .integrity import IntegrityError


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


class FlowControlError(ProtocolError):
    """The peer sent more stream data than it was granted credit for."""

    code = "flow-control"


class StreamIdReused(ProtocolError):
    """The peer announced a stream id it had already used on the connection (ids must increase)."""

    code = "stream-id-reused"


class TooManyStreams(ProtocolError):
    """The peer has more incoming streams live than L{protocols.bulk.BulkOptions.maxStreams}."""

    code = "too-many-streams"


register_error(IntegrityError, "chunkwire.bulk.IntegrityError")
register_error(StreamReset, "chunkwire.bulk.StreamReset")

__all__ = ["FlowControlError", "IntegrityError", "StreamIdReused", "StreamReset", "TooManyStreams"]
