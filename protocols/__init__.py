"""chunkwire's Twisted layer: protocols, transports and services on top of L{framing}.

L{TokenProtocol} puts a L{framing.Decoder} and L{framing.Encoder} on a
connection; L{CoalescingTransport} makes each message one write.  The echo
service is in L{protocols.echo}, test helpers in L{protocols.testing}.
"""

from .base import TokenProtocol
from .coalescing import CoalescingTransport

__all__ = ["CoalescingTransport", "TokenProtocol"]
