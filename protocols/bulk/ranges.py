"""Byte ranges held: the name as the Twisted layer has always imported it.

L{RangeSet} lives in the sans-IO bulk core, L{framing.bulk.ranges}, which
the clients without Twisted share; this module re-exports it unchanged.
"""

from __future__ import annotations

from framing.bulk.ranges import (
    RangeSet,
)

__all__ = [
    "RangeSet",
]
