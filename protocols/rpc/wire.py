"""The RPC messages on the wire: the names as the Twisted layer has always imported them.

The message table (L{MESSAGES}), the message type, its slicer and its
checking unslicer live in the sans-IO RPC core, L{framing.rpc.wire}, which
every client shares (the Twisted broker and the blocking client of
L{protocols.blocking}); this module re-exports them unchanged.
"""

from __future__ import annotations

from framing.rpc.wire import (
    ANSWER,
    CALL,
    CANCEL,
    FAIL,
    GOAWAY,
    MAX_NAME,
    MESSAGES,
    NO_ANSWER,
    OPEN_TYPE,
    RELEASE,
    ROOT_ID,
    Field,
    Kind,
    Message,
    MessageSlicer,
    MessageUnslicer,
    addMessageTypes,
    buildMessage,
)

__all__ = [
    "ANSWER",
    "CALL",
    "CANCEL",
    "FAIL",
    "GOAWAY",
    "MAX_NAME",
    "MESSAGES",
    "NO_ANSWER",
    "OPEN_TYPE",
    "RELEASE",
    "ROOT_ID",
    "Field",
    "Kind",
    "Message",
    "MessageSlicer",
    "MessageUnslicer",
    "addMessageTypes",
    "buildMessage",
]
