# -*- test-case-name: tests.framing.test_arrays,tests.framing.test_hooks,tests.framing.test_constraints -*-
"""
The pluggable slicer/unslicer layer: objects to tokens and back.

Public here: the constraints a remote method's arguments are checked
against (L{Text}, L{Integer}, L{ListOf}, ...), L{DEFAULT_REGISTRY} (the
built-in types every connection sends), and L{Unslicer} and
L{BudgetedUnslicer}, the bases of an unslicer of one's own.  L{framing}
exports L{framing.Registry}, L{framing.register}, L{framing.ISlicer} and
L{framing.IUnslicer}.
"""

from __future__ import annotations

from ._builtin import BudgetedUnslicer, Unslicer
from ._constraints import (
    ANY,
    Boolean,
    ByteString,
    ChoiceOf,
    Constraint,
    DictOf,
    Float,
    InstanceOf,
    Integer,
    IsNone,
    ListOf,
    OneOf,
    Optional,
    SequenceOf,
    SetOf,
    Text,
    TupleOf,
)
from ._registry import DEFAULT_REGISTRY

__all__ = [
    "ANY",
    "DEFAULT_REGISTRY",
    "Boolean",
    "BudgetedUnslicer",
    "ByteString",
    "ChoiceOf",
    "Constraint",
    "DictOf",
    "Float",
    "InstanceOf",
    "Integer",
    "IsNone",
    "ListOf",
    "OneOf",
    "Optional",
    "SequenceOf",
    "SetOf",
    "Text",
    "TupleOf",
    "Unslicer",
]
