"""The codec cores side by side: chunkwire's pure-Python and compiled cores and msgpack, in one process.

C{loads} and C{dumps} of three payloads (issue 17's): a list of C{range(1024)},
an RPC-like dict (id, method, key, a 100-byte value, 3 tags, a float, a
nested dict) and 1000 records C{{"id", "name", "score", "ok"}}; then loads
of 1000 such records each holding a registered type, on the pure core, on
the compiled core that handed such objects back whole, and on the one that
runs the type's unslicer where it sits.  Each cell
is the median of several timed batches, in microseconds per call; the
ratios are to msgpack's time.  The pure core is the one a process gets with
C{CHUNKWIRE_PURE=1}; both are timed here by switching L{framing._core}.

    python -m tests.benchmarks cores [--quick]
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from framing import Registry, _core, dumps, loads
from framing.slicing._registry import DEFAULT_REGISTRY

from ._harness import BenchResult, Criterion, Options, markdown_table, print_result, write_results

NAME = "cores"
PAYLOADS: dict[str, Any] = {
    "list of range(1024)": list(range(1024)),
    "RPC-like dict": {
        "id": 12345,
        "method": "store",
        "key": "user:42:profile",
        "value": bytes(range(100)),
        "tags": ["alpha", "beta", "gamma"],
        "ratio": 0.75,
        "meta": {"retries": 3, "ttl": 60, "origin": "eu-west"},
    },
    "1000 records": [{"id": i, "name": f"user{i}", "score": i * 1.5, "ok": i % 2 == 0} for i in range(1000)],
}
VALUES: dict[str, list[Any]] = {
    "10,000 small ints": [i % 200 for i in range(10_000)],
    "10,000 floats": [i * 0.37 for i in range(10_000)],
}
"""Lists whose values/s (loads plus dumps of each value) issue 17 asks to be 10 M or more."""


def per_call(action: Callable[[], Any], quick: bool) -> float:
    """Median microseconds per call of C{action}, over batches of about 20 ms each."""
    action()
    count, elapsed = 1, 0.0
    while elapsed < 0.02:
        count *= 2
        start = time.perf_counter()
        for _ in range(count):
            action()
        elapsed = time.perf_counter() - start
    batches = []
    for _ in range(3 if quick else 7):
        start = time.perf_counter()
        for _ in range(count):
            action()
        batches.append((time.perf_counter() - start) / count)
    return statistics.median(batches) * 1e6


def measure(quick: bool) -> dict[str, dict[str, float | None]]:
    """Per payload, microseconds per loads and dumps for each core and for msgpack (None: not available)."""
    try:
        import msgpack
    except ImportError:
        msgpack = None
    compiled = _core.speedups
    cells: dict[str, dict[str, float | None]] = {}
    for label, value in PAYLOADS.items():
        row: dict[str, float | None] = {}
        for core, module in (("pure", None), ("compiled", compiled)):
            if core == "compiled" and module is None:
                row["compiled loads"] = row["compiled dumps"] = None
                continue
            saved, _core.speedups = _core.speedups, module
            try:
                stream = dumps(value)
                assert loads(stream) == value
                row[f"{core} loads"] = per_call(lambda stream=stream: loads(stream), quick)
                row[f"{core} dumps"] = per_call(lambda value=value: dumps(value), quick)
            finally:
                _core.speedups = saved
        if msgpack is not None:
            packed = msgpack.packb(value)
            row["msgpack loads"] = per_call(lambda packed=packed: msgpack.unpackb(packed), quick)
            row["msgpack dumps"] = per_call(lambda value=value: msgpack.packb(value), quick)
        else:
            row["msgpack loads"] = row["msgpack dumps"] = None
        cells[label] = row
    return cells


@dataclasses.dataclass
class Place:
    """A registered type (its fields travel as a dict) for L{registered_types}."""

    city: str
    zone: int
    corners: list[int]


PLACES = Registry(DEFAULT_REGISTRY)
PLACES.register(Place, "bench.Place")
RECORDS_WITH_TYPE = [
    {"id": i, "name": f"user{i}", "score": i * 1.5, "ok": i % 2 == 0, "place": Place(f"c{i}", i % 7, [i, i + 1])}
    for i in range(1000)
]
"""1000 records each holding one registered type: what the compiled reader used to hand back whole."""


def registered_types(quick: bool) -> dict[str, float]:
    """
    Microseconds per loads of L{RECORDS_WITH_TYPE}: the pure core, the
    compiled core as it was (an object holding an open type it does not
    build handed back whole to Python: no nested types), and as it is.
    """
    stream = dumps(RECORDS_WITH_TYPE, PLACES)
    found: dict[str, float] = {}
    saved, nested = _core.speedups, _core.nested_types
    modes = (("pure", None, nested), ("compiled, handed back", saved, lambda registry: ()), ("compiled", saved, nested))
    try:
        for label, module, table in modes:
            if module is None and label != "pure":
                continue
            _core.speedups, _core.nested_types = module, table
            PLACES.codec_cache.clear()
            assert loads(stream, registry=PLACES) == RECORDS_WITH_TYPE
            found[label] = per_call(lambda: loads(stream, registry=PLACES), quick)
    finally:
        _core.speedups, _core.nested_types = saved, nested
        PLACES.codec_cache.clear()
    return found


def _registered_report(found: dict[str, float]) -> str:
    rows = [[label, _fmt(value), f"{found['pure'] / value:.1f}x"] for label, value in found.items()]
    return "\n\nloads of 1000 records each holding a registered type:\n\n" + markdown_table(
        ["core", "loads", "pure/this"], rows
    )


def values_per_second(quick: bool) -> dict[str, dict[str, float]]:
    """Per list of L{VALUES} and per core: values per second through dumps then loads."""
    rates: dict[str, dict[str, float]] = {}
    for label, value in VALUES.items():
        rates[label] = {}
        for core, module in (("pure", None), ("compiled", _core.speedups)):
            if core == "compiled" and module is None:
                continue
            saved, _core.speedups = _core.speedups, module
            try:
                assert loads(dumps(value)) == value
                rates[label][core] = len(value) / per_call(lambda value=value: loads(dumps(value)), quick) * 1e6
            finally:
                _core.speedups = saved
    return rates


def _values_report(rates: dict[str, dict[str, float]]) -> str:
    rows = [
        [label, *(f"{row[core] / 1e6:.2f} M/s" if core in row else "n/a" for core in ("pure", "compiled"))]
        for label, row in rates.items()
    ]
    return "\n\nValues per second, dumps then loads of the whole list:\n\n" + markdown_table(
        ["list", "pure", "compiled"], rows
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g} µs" if value < 1000 else f"{value / 1000:.3g} ms"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not b else a / b


def _report(cells: dict[str, dict[str, float | None]]) -> str:
    header = ["payload", "op", "pure", "compiled", "msgpack", "pure/compiled", "compiled/msgpack"]
    rows = []
    for label, row in cells.items():
        for op in ("loads", "dumps"):
            pure, compiled, packed = row[f"pure {op}"], row[f"compiled {op}"], row[f"msgpack {op}"]
            speedup, versus = _ratio(pure, compiled), _ratio(compiled, packed)
            rows.append(
                [
                    label,
                    op,
                    _fmt(pure),
                    _fmt(compiled),
                    _fmt(packed),
                    "n/a" if speedup is None else f"{speedup:.1f}x",
                    "n/a" if versus is None else f"{versus:.2f}x",
                ]
            )
    return f"## Codec cores (compiled core: {'built' if _core.speedups else 'not built'})\n\n" + markdown_table(
        header, rows
    )


def run(opts: Options) -> BenchResult:
    cells = measure(opts.quick)
    rates = values_per_second(opts.quick)
    registered = registered_types(opts.quick)
    criteria = [
        Criterion(f"{label}: compiled values/s (dumps + loads)", rates[label].get("compiled"), ">=", 10e6, "issue 17")
        for label in VALUES
    ] + [
        Criterion(
            f"{label}: compiled {op} / msgpack {op}",
            _ratio(cells[label][f"compiled {op}"], cells[label][f"msgpack {op}"]),
            "<=",
            2.0,
            "issue 17's target",
        )
        for label in ("RPC-like dict", "1000 records")
        for op in ("loads", "dumps")
    ]
    results = {"cells": cells, "values_per_second": rates, "registered_types": registered, "criteria": criteria}
    path = write_results(NAME, opts, results)
    report = _report(cells) + _values_report(rates) + _registered_report(registered)
    return BenchResult(NAME, report, criteria, path)


if __name__ == "__main__":
    sys.exit(print_result(run(Options(quick="--quick" in sys.argv[1:]))))
