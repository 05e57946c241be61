# -*- test-case-name: tests.test_exports,tests.protocols.test_hold_and_direct,tests.protocols.test_base -*-
"""chunkwire's Twisted layer: protocols, transports and services on top of L{framing}.

L{TokenProtocol} puts a L{framing.Decoder} and L{framing.Encoder} on a
connection; L{CoalescingTransport} makes each message one write.  The echo
service is in L{protocols.echo}, test helpers in L{protocols.testing}.

The two names are loaded when first used (PEP 562), not when the package
is imported: so L{protocols.blocking}, the client without Twisted, can
live here and still load no Twisted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import TokenProtocol
    from ._coalescing import CoalescingTransport

__all__ = ["CoalescingTransport", "TokenProtocol"]


def __getattr__(name: str) -> Any:
    """C{TokenProtocol} and C{CoalescingTransport}, imported (with Twisted) the first time one is asked for."""
    if name == "TokenProtocol":
        from ._base import TokenProtocol

        return TokenProtocol
    if name == "CoalescingTransport":
        from ._coalescing import CoalescingTransport

        return CoalescingTransport
    raise AttributeError(f"module 'protocols' has no attribute {name!r}")
