"""The HELLO of a bulk connection: the name as the Twisted layer has always imported it.

L{Hello} lives in the sans-IO bulk core, L{framing.bulk.hello}, which the
clients without Twisted share; this module re-exports it unchanged.
"""

from __future__ import annotations

from framing.bulk.hello import (
    Hello,
)

__all__ = [
    "Hello",
]
