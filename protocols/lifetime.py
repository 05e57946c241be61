"""What a closed connection leaves behind: nothing that needs the garbage collector.

Contract: after L{breakCycles}, a protocol, its transport wrapper, decoder
and encoder are freed by reference counting as soon as the last outside
reference goes, instead of waiting for a cyclic garbage collection (which,
after a flood, kept a gigabyte of half-built objects alive).  It runs at the
end of C{TokenProtocol.connectionLost} and costs O(1) plus the objects it
frees.  A spent decoder or encoder must not be used again.
"""

from __future__ import annotations

from typing import Any


def breakCycles(protocol: Any) -> None:
    """
    Drop the references that make a closed connection's objects a cycle:
    the instance-level shadows of C{connectionLost} (set by
    C{failConnection}) and C{dataReceived}, which are closures over the
    protocol; its config (whose registry's slicers may refer to the receiver); the transport's reading observer (a bound
    method of the protocol); and the decoder's and encoder's state, whose parts refer to each other (the
    scanner's sink is its decoder, and each keeps tables of its own bound
    methods).
    """
    shadows = vars(protocol)
    shadows.pop("connectionLost", None)
    shadows.pop("dataReceived", None)
    # The config may hold a registry whose slicers refer back to the connection's receiver.
    shadows.pop("config", None)
    shadows.pop("registry", None)
    transport = getattr(protocol, "transport", None)
    if transport is not None and getattr(transport, "readingObserver", None) is not None:
        transport.readingObserver = None
    for name in ("decoder", "encoder"):
        spent = shadows.get(name)
        if spent is not None:
            vars(spent).clear()
