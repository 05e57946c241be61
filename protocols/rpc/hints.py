"""Constraints from type hints: L{framing.rpc.signatures}, under the name the Twisted layer has always had.

The conversion is sans-IO, shared with the clients without Twisted; this
module re-exports it and tells it what Twisted adds: a result hint of
C{Deferred[X]} means C{X}.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from framing.rpc.signatures import (
    UNBOUNDED,
    MaxLength,
    MinLength,
    Pattern,
    Range,
    UnsupportedHint,
    constraintFor,
    methodConstraints,
    registerAwaited,
    registerHint,
)

__all__ = [
    "UNBOUNDED",
    "MaxLength",
    "MinLength",
    "Pattern",
    "Range",
    "UnsupportedHint",
    "constraintFor",
    "methodConstraints",
    "registerHint",
]

registerAwaited(Deferred)
