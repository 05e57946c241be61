"""How a bulk transfer fails: the names as the Twisted layer has always imported them.

The errors and the strategy (which is raised where, what each side sees)
live in the sans-IO bulk core, L{framing.bulk.errors}, which the clients
without Twisted share; this module re-exports them unchanged.
"""

from __future__ import annotations

from framing.bulk.errors import (
    DigestRefused,
    DigestUnavailable,
    FlowControlError,
    IllegalTransition,
    IntegrityError,
    StreamIdReused,
    StreamReset,
    TooManyStreams,
    peerText,
)

__all__ = [
    "DigestRefused",
    "DigestUnavailable",
    "FlowControlError",
    "IllegalTransition",
    "IntegrityError",
    "StreamIdReused",
    "StreamReset",
    "TooManyStreams",
    "peerText",
]
