"""The Swift ring (seed 001): large C{array.array}s inside a small dict.

Swift's ring file is C{{"devs": [...], "replica2part2dev": [3 x array('H')],
"part_shift": ...}}.  Pickle protocol 2 (Python 2.7's, and still Python 3's
protocol 2) turns each array into one token per element, which made loading a
2**18-partition ring take seconds.  This benchmark encodes and decodes such a
ring with 2**18 and 2**20 partitions through chunkwire (arrays as one body
token), pickle protocols 2 and 5, json and msgpack with the arrays as lists
(the portable per-element way), msgpack with the arrays as bytes (Swift's
eventual fix), Foolscap's Banana (lists: it cannot carry an array), and a
memcpy baseline (copying the three arrays' bytes once).  Every decoder must
hand back real C{array.array}s, so rebuilding them from lists is timed too.

Run: C{python -m tests.benchmarks.bench_ring [--quick]}.  Each figure is the
median of several timed runs in this process (5 when a run is under 3 s,
3 under 20 s, else 1), each run looping the call for at least 0.2 s after a
warm-up call.  Foolscap is first timed at 2**14 and 2**16 partitions; a size
it is predicted to need more than 60 s for is skipped and shown as an
estimate.
"""

from __future__ import annotations

import argparse
import array
import functools
import gc
import json
import math
import pickle
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._harness import (
    BenchResult,
    Criterion,
    Options,
    markdown_table,
    print_result,
    ratio,
    write_results,
)

NAME = "ring"
SIZES = [2**18, 2**20]
QUICK_SIZES = [2**18]
PROBE_SIZES = [2**14, 2**16]
RUN_SECONDS = 0.2
TYPECODE = "H"

Ring = dict[str, Any]


@functools.lru_cache(maxsize=1)
def make_ring(partitions: int, seed: int = 1) -> Ring:
    """A ring like Swift's: 10 devices, 3 replicas of C{partitions} device ids, a part shift (never mutated)."""
    rng = random.Random(seed)
    devs = [
        {"id": i, "zone": i % 3, "ip": f"10.0.{i // 4}.{i}", "port": 6200 + i, "weight": 100.0 + i} for i in range(10)
    ]
    replicas = [array.array(TYPECODE, rng.choices(range(len(devs)), k=partitions)) for _ in range(3)]
    return {"devs": devs, "replica2part2dev": replicas, "part_shift": 12}


def _with_lists(ring: Ring) -> Ring:
    return {**ring, "replica2part2dev": [a.tolist() for a in ring["replica2part2dev"]]}


def _with_arrays(ring: Ring) -> Ring:
    ring["replica2part2dev"] = [array.array(TYPECODE, ids) for ids in ring["replica2part2dev"]]
    return ring


# -- the implementations -----------------------------------------------


@dataclass(frozen=True)
class Impl:
    """One way to store a ring: C{encode(ring) -> bytes}, C{decode(bytes) -> ring}."""

    label: str
    encode: Callable[[Ring], Any]
    decode: Callable[[Any], Any]
    per_element: bool
    note: str = ""
    probe: bool = False  # time at PROBE_SIZES first and skip sizes predicted too slow


def _chunkwire() -> Impl:
    from framing import dumps, loads

    return Impl("chunkwire", dumps, loads, False, "framing.dumps/loads; each array one BYTES token")


def _pickle(protocol: int) -> Impl:
    per_element = protocol < 3
    how = "a list per array (array.__reduce_ex__ < 3)" if per_element else "bytes per array"
    return Impl(
        f"pickle {protocol}",
        lambda ring: pickle.dumps(ring, protocol),
        pickle.loads,
        per_element,
        how,
    )


def _json() -> Impl:
    return Impl(
        "json (lists)",
        lambda ring: json.dumps(_with_lists(ring)).encode(),
        lambda data: _with_arrays(json.loads(data)),
        True,
        "arrays as lists, rebuilt into arrays",
    )


def _msgpack_lists() -> Impl:
    import msgpack  # type: ignore[import-untyped]

    return Impl(
        "msgpack (lists)",
        lambda ring: msgpack.packb(_with_lists(ring)),
        lambda data: _with_arrays(msgpack.unpackb(data)),
        True,
        "arrays as lists, rebuilt into arrays",
    )


def _msgpack_bytes() -> Impl:
    import msgpack

    def encode(ring: Ring) -> bytes:
        return msgpack.packb({**ring, "replica2part2dev": [a.tobytes() for a in ring["replica2part2dev"]]})

    def decode(data: bytes) -> Ring:
        ring = msgpack.unpackb(data)
        replicas = []
        for body in ring["replica2part2dev"]:
            a = array.array(TYPECODE)
            a.frombytes(body)
            replicas.append(a)
        ring["replica2part2dev"] = replicas
        return ring

    return Impl("msgpack (bytes)", encode, decode, False, "arr.tobytes() / frombytes: machine byte order")


def _foolscap() -> Impl:
    from foolscap.storage import serialize, unserialize  # type: ignore[import-untyped]

    def encode(ring: Ring) -> bytes:
        return serialize(_with_lists(ring)).result  # type: ignore[no-any-return]

    def decode(data: bytes) -> Ring:
        return _with_arrays(unserialize(data).result)

    return Impl(
        "foolscap (lists)",
        encode,
        decode,
        True,
        "foolscap.storage serialize/unserialize (Deferreds fire at once); no array slicer, so lists",
        probe=True,
    )


def _memcpy() -> Impl:
    def copy(ring: Ring) -> list[bytes]:
        return [bytes(memoryview(a)) for a in ring["replica2part2dev"]]

    def copy_back(copies: list[bytes]) -> list[bytes]:
        return [bytes(memoryview(b)) for b in copies]

    return Impl("memcpy baseline", copy, copy_back, False, "bytes(memoryview(a)) for each array: one copy")


def implementations() -> list[Impl]:
    return [
        _chunkwire(),
        _pickle(5),
        _pickle(2),
        _json(),
        _msgpack_lists(),
        _msgpack_bytes(),
        _foolscap(),
        _memcpy(),
    ]


# -- timing ---------------------------------------------------------------


def time_per_call(fn: Callable[[], Any], opts: Options, run_seconds: float = RUN_SECONDS) -> tuple[dict[str, Any], Any]:
    """
    Median seconds per call of C{fn()}, and what its first call returned.

    One warm-up call, a calibration that doubles the loop count until a run
    lasts a tenth of C{run_seconds}, then several runs (as many as
    L{Options.runs_for} gives) each looping the call for about
    C{run_seconds}.  A call slower than 1 s is its own warm-up and counts as
    the first run.
    """
    gc.collect()
    started = time.perf_counter()
    produced = fn()
    first = time.perf_counter() - started
    per_call: list[float] = []
    loops = 1
    if first >= 1.0:
        per_call.append(first)
        one_run = first
    else:
        while (elapsed := _timed(fn, loops)) < run_seconds / 10:
            loops *= 2
        one_call = elapsed / loops
        loops = max(1, math.ceil(run_seconds / one_call))
        one_run = loops * one_call
    runs = opts.runs_for(one_run)
    while len(per_call) < runs:
        gc.collect()
        per_call.append(_timed(fn, loops) / loops)
    return {"median_s": statistics.median(per_call), "runs_s": per_call, "loops": loops}, produced


def _timed(fn: Callable[[], Any], loops: int) -> float:
    started = time.perf_counter()
    for _ in range(loops):
        fn()
    return time.perf_counter() - started


def _same_ring(a: Ring, b: Ring) -> bool:
    ra, rb = a["replica2part2dev"], b["replica2part2dev"]
    return (
        a["devs"] == b["devs"]
        and a["part_shift"] == b["part_shift"]
        and len(ra) == len(rb)
        and all(type(x) is array.array and x.typecode == y.typecode and x == y for x, y in zip(ra, rb, strict=True))
    )


def measure(impl: Impl, partitions: int, opts: Options) -> dict[str, Any]:
    """Time C{impl} encoding and decoding a ring of C{partitions}; check what it decodes (untimed)."""
    ring = make_ring(partitions)
    cell: dict[str, Any] = {"status": "ok"}
    cell["encode"], data = time_per_call(lambda: impl.encode(ring), opts)
    cell["decode"], back = time_per_call(lambda: impl.decode(data), opts)
    if impl.label.startswith("memcpy"):
        ok = [bytes(b) for b in back] == [a.tobytes() for a in ring["replica2part2dev"]]
        cell["size_bytes"] = sum(len(b) for b in data)
    else:
        ok = _same_ring(back, ring)
        cell["size_bytes"] = len(data)
    if not ok:
        raise AssertionError(f"{impl.label} did not round trip the ring")
    return cell


def measure_probed(impl: Impl, sizes: list[int], opts: Options) -> dict[int, dict[str, Any]]:
    """Measure a slow implementation at growing sizes, skipping a size predicted to exceed opts.skip_over."""
    cells: dict[int, dict[str, Any]] = {}
    history: list[tuple[int, float]] = []  # (size, slower of encode/decode per call)
    for size in PROBE_SIZES + sizes:
        predicted = _predict(history, size)
        if predicted is not None and predicted > opts.skip_over:
            cells[size] = {"status": "skip", "estimated_s": predicted, "reason": _skip_reason(history, predicted, opts)}
            _say(f"  {impl.label} {size}: skip, predicted {predicted:.0f} s")
            continue
        _say(f"  {impl.label} {size} ...")
        try:
            cell = measure(impl, size, opts)
        except Exception as error:  # e.g. a peer that cannot carry the value
            cells[size] = {"status": "error", "reason": f"{type(error).__name__}: {error}"[:200]}
            break
        cells[size] = cell
        history.append((size, max(cell["encode"]["median_s"], cell["decode"]["median_s"])))
    return cells


def _exponent(history: list[tuple[int, float]]) -> float:
    if len(history) < 2:
        return 2.0
    (n1, t1), (n2, t2) = history[-2:]
    return max(1.0, math.log(t2 / t1) / math.log(n2 / n1))


def _predict(history: list[tuple[int, float]], size: int) -> float | None:
    if not history:
        return None
    last_size, last = history[-1]
    return last * (size / last_size) ** _exponent(history)


def _skip_reason(history: list[tuple[int, float]], predicted: float, opts: Options) -> str:
    size, seconds = history[-1]
    return (
        f"predicted {predicted:.0f} s per call (> {opts.skip_over:.0f} s) from {seconds:.2f} s at {size} "
        f"partitions, growth exponent {_exponent(history):.2f}"
    )


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- report -------------------------------------------------------------


def _ms(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _cell_text(cell: dict[str, Any], op: str) -> str:
    if cell["status"] == "ok":
        return _ms(cell[op]["median_s"])
    if cell["status"] == "skip":
        return f"skip (est. ~{_ms(cell['estimated_s'])} slower op)"
    return "error"


def report(cells: dict[int, dict[str, dict[str, Any]]], impls: list[Impl]) -> tuple[str, list[Criterion]]:
    lines: list[str] = []
    criteria: list[Criterion] = []
    for size, row in cells.items():
        lines.append(f"\n### Ring of 2**{size.bit_length() - 1} = {size} partitions (3 replicas, 'H' arrays)\n")
        base = row["chunkwire"]["decode"]["median_s"]
        table = []
        for impl in impls:
            cell = row[impl.label]
            versus = f"{cell['decode']['median_s'] / base:.1f}x" if cell["status"] == "ok" else "-"
            size_text = f"{cell['size_bytes']:,}" if cell["status"] == "ok" else "-"
            table.append([impl.label, _cell_text(cell, "encode"), _cell_text(cell, "decode"), size_text, versus])
        lines.append(markdown_table(["implementation", "encode", "decode", "bytes", "decode / chunkwire"], table))
        for impl in impls:
            cell = row[impl.label]
            if cell["status"] != "ok":
                lines.append(f"\n{impl.label}: {cell['status']}: {cell.get('reason', '')}")
        criteria += _criteria(size, row, impls)
    notes = [f"- {impl.label}: {impl.note}" for impl in impls if impl.note]
    lines.append("\nHow each was driven:\n" + "\n".join(notes))
    return "\n".join(lines), criteria


def _criteria(size: int, row: dict[str, dict[str, Any]], impls: list[Impl]) -> list[Criterion]:
    chunkwire = row["chunkwire"]["decode"]["median_s"]
    memcpy = row["memcpy baseline"]["decode"]["median_s"]
    per_element = [
        (row[i.label]["decode"]["median_s"], i.label) for i in impls if i.per_element and row[i.label]["status"] == "ok"
    ]
    fastest, fastest_label = min(per_element) if per_element else (None, "none measured")
    power = f"2**{size.bit_length() - 1}"
    return [
        Criterion(f"ring {power}: chunkwire decode / memcpy", ratio(chunkwire, memcpy), "<=", 3.0),
        Criterion(
            f"ring {power}: fastest per-element decode / chunkwire decode",
            ratio(fastest, chunkwire),
            ">=",
            100.0,
            f"fastest per-element: {fastest_label}",
        ),
    ]


def run(opts: Options) -> BenchResult:
    sizes = QUICK_SIZES if opts.quick else SIZES
    impls = implementations()
    cells: dict[int, dict[str, dict[str, Any]]] = {size: {} for size in sizes}
    probes: dict[str, dict[int, dict[str, Any]]] = {}
    for impl in impls:
        if impl.probe:
            measured = measure_probed(impl, sizes, opts)
            probes[impl.label] = {s: c for s, c in measured.items() if s in PROBE_SIZES}
            for size in sizes:
                cells[size][impl.label] = measured.get(size, {"status": "skip", "reason": "an earlier size failed"})
            continue
        for size in sizes:
            _say(f"  {impl.label} {size} ...")
            cells[size][impl.label] = measure(impl, size, opts)
    text, criteria = report(cells, impls)
    path = write_results(
        NAME,
        opts,
        {
            "sizes": sizes,
            "run_seconds": RUN_SECONDS,
            "implementations": {i.label: {"note": i.note, "per_element": i.per_element} for i in impls},
            "cells": {str(size): row for size, row in cells.items()},
            "probes": {label: {str(s): c for s, c in p.items()} for label, p in probes.items()},
            "criteria": criteria,
        },
    )
    return BenchResult(NAME, "## Swift ring: encode and decode\n" + text, criteria, path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_ring", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2**18 partitions only, fewer runs")
    parser.add_argument("--skip-over", type=float, default=60.0, help="skip a call predicted to take longer (60 s)")
    args = parser.parse_args(argv)
    opts = Options(quick=args.quick, skip_over=args.skip_over)
    return print_result(run(opts))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
