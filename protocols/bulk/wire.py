"""The bulk layer on the wire: the names as the Twisted layer has always imported them.

Data frames, control messages and stream announcements, with their slicers
and checking unslicers, live in the sans-IO bulk core, L{framing.bulk.wire},
which the clients without Twisted share; this module re-exports them unchanged.
"""

from __future__ import annotations

from framing.bulk.wire import (
    ABORT,
    CANCEL,
    CONTROL_OPEN_TYPE,
    DATA_OPEN_TYPE,
    DONE,
    END,
    GRANT,
    HELLO,
    MAX_DIGEST,
    MAX_MESSAGE,
    MAX_TEXT,
    OP_NAMES,
    STREAM_OPEN_TYPE,
    AnnouncementUnslicer,
    Control,
    ControlSlicer,
    ControlUnslicer,
    DataUnslicer,
    StreamAnnouncement,
    controlMessage,
    dataFramePieces,
)

__all__ = [
    "ABORT",
    "AnnouncementUnslicer",
    "CANCEL",
    "CONTROL_OPEN_TYPE",
    "Control",
    "ControlSlicer",
    "ControlUnslicer",
    "DATA_OPEN_TYPE",
    "DONE",
    "DataUnslicer",
    "END",
    "GRANT",
    "HELLO",
    "MAX_DIGEST",
    "MAX_MESSAGE",
    "MAX_TEXT",
    "OP_NAMES",
    "STREAM_OPEN_TYPE",
    "StreamAnnouncement",
    "controlMessage",
    "dataFramePieces",
]
