"""Streams: what a sender sends (L{Stream}) and what a receiver receives (L{IncomingStream}).

Contract: this module only gathers the public stream names in one place;
the sending side lives in L{protocols.bulk.sending}, the receiving side in
L{protocols.bulk.receiving}, each with its own transition table.
"""

from __future__ import annotations

from .outcome import TransferResult
from .receiving import IncomingStream, Receiver
from .sending import Stream

__all__ = ["IncomingStream", "Receiver", "Stream", "TransferResult"]
