"""The open-types the unslicer fuzz target picks from, and the registry that builds them."""

from __future__ import annotations

from functools import cache
from typing import Any

from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import OPEN, PREAMBLE, encode_header

BUILTIN_NAMES = sorted(DEFAULT_REGISTRY._unslicers)
RPC_NAMES = ["rpc", "rpc.ref", "rpc.yourref"]
OPEN_NAMES = BUILTIN_NAMES + RPC_NAMES + ["echo.refused", "no.such.type"]


def prefix_for(name: str) -> bytes:
    """The preamble and the OPEN token of C{name}."""
    body = name.encode("ascii")
    return PREAMBLE + encode_header(OPEN, len(body)) + body


@cache
def registry() -> Any:
    """A server connection's registry: the built-ins, RPC messages and references, echo refusals."""
    from twisted.internet.task import Clock

    from protocols.echo import ECHO_REGISTRY
    from protocols.rpc._broker import Broker

    return Broker(None, clock=Clock(), registry=ECHO_REGISTRY).connection.registry


def check_unslicer_input(data: bytes) -> list[Any]:
    """The unslicer target's check: byte 0 picks the open-type, the rest is fed after its OPEN."""
    from fuzz.common import check

    if not data:
        return []
    name = OPEN_NAMES[data[0] % len(OPEN_NAMES)]
    return check(data[1:], prefix_for(name), registry())
