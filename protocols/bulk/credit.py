"""The sender's side of a stream's flow control: the name as the Twisted layer has always imported it.

L{SendCredit} lives in the sans-IO bulk core, L{framing.bulk.credit}, which
the clients without Twisted share; this module re-exports it unchanged.
"""

from __future__ import annotations

from framing.bulk.credit import (
    SendCredit,
    StreamSource,
)

__all__ = [
    "SendCredit",
    "StreamSource",
]
