# -*- test-case-name: tests.framing.test_key_vectors,tests.framing.test_cores,tests.framing.test_cores_nested -*-
"""Which codec core runs: the compiled fast path, or only the pure-Python one.

Contract: the pure-Python core (the decoder, the encoder and the unslicers)
is the reference and is always complete.  When the C extension
C{framing._speedups} was built and C{CHUNKWIRE_PURE} is not set to a true
value, decoders and encoders also use it for what it covers (whole objects
made only of built-in kinds and types); it hands everything else back to
the Python code, so both cores give the same objects, the same Violations
with the same C{where}, and the same bytes.  A hand-back costs the C pass
over the object so far, which committed nothing; the Python core then
decodes the object from its first byte.

Design: docs/design/c-fast-path.md
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ._budget import DEFAULT_ITEM_COST, DEFAULT_OPEN_COST
from ._limits import DEFAULT_LIMITS, Limits
from .slicing._builtin import (
    _RANDOMIZED,
    TRACKED_KEY_COST,
    DictUnslicer,
    FrozenSetUnslicer,
    ListUnslicer,
    SetUnslicer,
    TupleUnslicer,
)
from .slicing._interfaces import NOTHING
from .slicing._registry import DEFAULT_REGISTRY, Registry


def _load() -> ModuleType | None:
    if os.environ.get("CHUNKWIRE_PURE", "").strip() not in ("", "0"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


speedups: ModuleType | None = _load()
"""The compiled module in use, or C{None}; tests set it to compare the cores."""
implementation = "compiled" if speedups is not None else "pure"
"""C{"compiled"} or C{"pure"}: the core this process chose at import."""

_MAX = 2**64 - 1
_BUILT_INS = (ListUnslicer, TupleUnslicer, DictUnslicer, SetUnslicer, FrozenSetUnslicer)


def reader(limits: Limits, registry: Registry, results: list[Any] | None = None, stack: list[Any] | None = None) -> Any:
    """
    A compiled reader of built-in objects under C{limits}, building
    containers only where C{registry} builds them with the built-in
    unslicers, appending to C{results} while C{stack} is empty; or C{None}
    for the pure core.
    """
    if speedups is None:
        return None
    limited, builds, costs, found, nested = _reader_arguments(limits, registry)
    return speedups.Reader(limited, builds, costs, _RANDOMIZED, results, stack, found, nested)


_MAX_KEPT_LIMITS = 16


def _reader_arguments(limits: Limits, registry: Registry) -> tuple[Any, ...]:
    """
    What a reader for C{limits} and C{registry} is made from, kept in the
    registry's C{codec_cache} per C{limits} (a decoder is made per
    connection, and working this out costs more than the rest of it).
    """
    kept: dict[Limits, tuple[Any, ...]] = registry.codec_cache.setdefault("reader_arguments", {})
    arguments = kept.get(limits)
    if arguments is None:
        if len(kept) >= _MAX_KEPT_LIMITS:
            kept.clear()  # (a few Limits are the rule; made afresh per connection, they are not kept)
        arguments = kept[limits] = _work_out_arguments(limits, registry)
    return arguments


def _work_out_arguments(limits: Limits, registry: Registry) -> tuple[Any, ...]:
    numbers = (
        limits.max_header_length,
        limits.max_bytes_length,
        limits.max_string_length,
        limits.max_open_name_length,
        limits.max_depth,
        limits.max_items,
        limits.max_object_items,
        limits.max_object_memory,
        limits.max_bigint_length,
    )
    builds = tuple(registry.unslicer_for(cls.open_type) is cls for cls in _BUILT_INS)
    costs = (*(cost for cls in _BUILT_INS for cost in (cls.open_cost, cls.item_cost)), TRACKED_KEY_COST)
    limited = tuple(min(n, _MAX) for n in numbers)
    nested = (limits, NOTHING, DEFAULT_ITEM_COST, nested_types(registry))
    return limited, builds, costs, records(registry), nested


_MAX_RECORDS = 8


Record = tuple[bytes, Callable[[list[Any]], Any], int, int, int, tuple[type, int] | None]
"""A record type as the compiled reader takes it: name, builder, open cost, item cost, extra items, rpc."""


def records(registry: Registry) -> tuple[Record, ...]:
    """
    The open types of C{registry} whose unslicer declares a C{record_builder}
    (see L{framing.slicing._interfaces.IUnslicer}), as the compiled reader
    takes them: name, builder, open cost, item cost, extra items, and its
    C{record_rpc} (or C{None}): the RPC message type and longest method
    name, when the reader builds the commonest RPC messages itself.
    """
    found: list[Record] = []
    for name, factory in registry.unslicers().items():
        builder = getattr(factory, "record_builder", None)
        # (only budgeted unslicers: the reader charges a record as such a container)
        if builder is None or not getattr(factory, "budgeted", False) or len(found) == _MAX_RECORDS:
            continue
        costs = (factory.open_cost, factory.item_cost)  # type: ignore[attr-defined]
        extra, rpc = getattr(factory, "record_extra_items", 0), getattr(factory, "record_rpc", None)
        found.append((name.encode("ascii"), builder, *costs, extra, rpc))
    return tuple(found)


_MAX_NESTED = 64


def nested_types(registry: Registry) -> tuple[tuple[bytes, type, int, bool], ...]:
    """
    The open types of C{registry} whose unslicer the compiled reader runs
    where they sit (it builds what is around and inside them), as it takes
    them: name, unslicer class, open cost, whether it checks tokens.  These
    are the unslicer classes declared C{rebuildable} (see
    L{framing.slicing._interfaces.IUnslicer}) that count their children one
    by one (not budgeted) and take no streamed bodies.  Kept in the
    registry's C{codec_cache} (a decoder is made per connection).
    """
    kept: tuple[tuple[bytes, type, int, bool], ...] | None = registry.codec_cache.get("nested")
    if kept is None:
        kept = registry.codec_cache["nested"] = _nested_types(registry)
    return kept


def _nested_types(registry: Registry) -> tuple[tuple[bytes, type, int, bool], ...]:
    found: list[tuple[bytes, type, int, bool]] = []
    for name, factory in registry.unslicers().items():
        if not (isinstance(factory, type) and getattr(factory, "rebuildable", False)):
            continue
        if getattr(factory, "budgeted", False) or getattr(factory, "begin_body", None) is not None:
            continue
        if not name.isascii() or len(found) == _MAX_NESTED:
            continue
        cost = getattr(factory, "open_cost", DEFAULT_OPEN_COST)
        found.append((name.encode("ascii"), factory, cost, bool(getattr(factory, "checks_tokens", True))))
    return tuple(found)


def loads_reader(limits: Limits | None, registry: Registry | None) -> Callable[[bytes, int], Any] | None:
    """
    C{loads}' compiled reader, C{one(data, pos) -> (obj, end) | None}, or
    C{None}; the one for the default limits is kept in the registry's
    C{codec_cache} (which each registration empties).
    """
    if speedups is None:
        return None
    registry = registry or DEFAULT_REGISTRY
    if limits is not None and limits is not DEFAULT_LIMITS:
        one: Callable[[bytes, int], Any] = reader(limits, registry).one
        return one
    # (written out: this runs for every loads)
    kept: Callable[[bytes, int], Any] | None = registry.codec_cache.get("loads")
    if kept is None:
        kept = registry.codec_cache["loads"] = reader(DEFAULT_LIMITS, registry).one
    return kept


def encoder() -> Callable[..., bytes | None] | None:
    """The compiled encoder of built-in objects, C{encode(obj, max_depth, prefix=b"")}, or C{None}."""
    return None if speedups is None else speedups.encode


def parts_encoder() -> Callable[[Any, int, bytes], bytes | None] | None:
    """The compiled writer of a slicer's container, C{encode_parts(parts, max_depth, opening)}, or C{None}."""
    return None if speedups is None else speedups.encode_parts


def whole_body() -> Any:
    """A compiled L{framing._scanner.WholeBody} (its per-chunk C{take} is one C call), or C{None}."""
    return None if speedups is None else speedups.WholeBody()
