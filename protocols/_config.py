# -*- test-case-name: tests.protocols.test_drop,tests.protocols.test_receiver,tests.attack.test_twisted_drop -*-
"""ConnectionConfig: how one chunkwire connection is set up, in one frozen value.

Contract: every setting a L{protocols.TokenProtocol} reads when its
connection is made lives here, with its default and the reason for it, so
factories and helpers pass one value instead of repeating keyword lists.
A field left at C{None} means "the protocol class's own default", so a
subclass (or C{TokenProtocol.trace = True} for a whole process) still sets
defaults the usual Twisted way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from framing import Decoder, Limits, Registry

DROP_GRACE = 10.0
"""
Seconds a dropped connection (L{protocols.TokenProtocol.dropConnection})
may take to send what it holds, its ERROR last, before it is aborted
(L{ConnectionConfig.dropGrace}): far more than a peer that reads takes to
read a buffer's worth, and a peer that reads nothing cannot keep the
connection, its socket and its send buffer, for good.  The asyncio
client's C{CLOSE_GRACE} is the same wait for the same reason.
"""


@dataclass(frozen=True)
class ConnectionConfig:
    """
    The settings of one connection.

    @ivar limits: the L{Limits} for what is received; C{None} for the defaults.
    @ivar registry: the L{Registry} to encode and decode with; C{None} for
        the built-in types.
    @ivar trace: log every token both ways (see L{protocols._tracing}); C{None}
        for the protocol class's C{trace}.
    @ivar sendBackPressure: stop reading while more than
        C{Limits.send_high_water} bytes wait for the peer; C{None} for the
        protocol class's C{sendBackPressure} (on: a server's sends are caused
        by what it reads; client helpers turn it off, since what a client
        sends comes from its own application).
    @ivar holdPreamble: keep the preamble until the first message or the end
        of the reactor turn, so the first message shares its write (the RPC
        broker does: one packet less on a latent link).
    @ivar clock: the C{IReactorTime} for ping round trips, the held
        preamble and a dropped connection's grace; C{None} for the global reactor, looked up when first needed.
    @ivar decoderFactory: makes the connection's decoder from C{(limits,
        registry)}; C{None} for L{framing.Decoder}.  The one place where
        another decoder (a compiled core, a test double) is chosen.
    @ivar dropGrace: seconds a dropped connection may take to close politely
        (sending what it holds) before it is aborted; L{DROP_GRACE} (10 s).
    """

    limits: Limits | None = None
    registry: Registry | None = None
    trace: bool | None = None
    sendBackPressure: bool | None = None
    holdPreamble: bool = False
    clock: Any = None
    decoderFactory: Callable[[Limits | None, Registry | None], Decoder] | None = None
    dropGrace: float = DROP_GRACE

    def replace(self, **changes: Any) -> ConnectionConfig:
        """A copy with C{changes} made."""
        return replace(self, **changes)

    def overriddenBy(
        self, limits: Limits | None = None, registry: Registry | None = None, trace: bool | None = None
    ) -> ConnectionConfig:
        """This config with each of C{limits}, C{registry} and C{trace} that is not C{None} put in."""
        changes: dict[str, Any] = {"limits": limits, "registry": registry, "trace": trace}
        given = {name: value for name, value in changes.items() if value is not None}
        return replace(self, **given) if given else self

    def reactor(self) -> Any:
        """The C{clock}, or the global reactor if it is C{None}."""
        if self.clock is not None:
            return self.clock
        from twisted.internet import reactor

        return reactor


DEFAULT_CONFIG = ConnectionConfig()
