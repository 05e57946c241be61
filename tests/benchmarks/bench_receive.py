"""Receive one large byte string, chunk by chunk: chunkwire against its peers.

One value of S bytes (40 KiB to 64 MiB) is encoded by each implementation's
own encoder and fed in 4 KiB or 64 KiB chunks, each chunk a fresh C{bytes}
sliced off the wire inside the timed loop, as a socket delivers them.
Reported: ns per payload byte (wall time of the loop / S) and the tracemalloc
peak during the loop / S.  The two baselines say what is possible in pure
Python: append the chunks and join once (two copies), and copy each chunk
into a preallocated C{bytearray} (one copy: the limit).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _peers
from ._harness import (
    CONTENDED_NOTE,
    BenchResult,
    Criterion,
    KiB,
    MiB,
    Options,
    any_contended,
    contention_note,
    human_size,
    markdown_table,
    measure_grid,
    ns_per_byte,
    peak_ratio,
    per_byte_cell,
    ratio,
    write_results,
)

NAME = "receive"
SIZES = [40 * KiB, 512 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB]
QUICK_SIZES = [40 * KiB, 1 * MiB, 4 * MiB]
CHUNKS = [4 * KiB, 64 * KiB]

Setup = Callable[[bytes], tuple[bytes, Callable[[list[Any]], _peers.Feed]]]


@dataclass(frozen=True)
class Impl:
    label: str
    setup: Setup
    exponent: float = 1.0
    delivers: bool = True
    modules: tuple[str, ...] = ()


def _chunkwire(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    return _peers.chunkwire_wire([payload]), _peers.chunkwire_receiver


def _int32(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    return _peers.int32_wire([payload]), lambda results: _peers.int32_receiver(results, len(payload) + 1)


def _twisted_banana(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    size = len(payload)
    wire = _peers.twisted_banana_wire([payload], size)
    return wire, lambda results: _peers.twisted_banana_receiver(results, size)


def _foolscap(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    return _peers.foolscap_wire([payload]), _peers.foolscap_receiver


def _msgpack(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    size = len(payload)
    return _peers.msgpack_wire([payload]), lambda results: _peers.msgpack_receiver(results, size)


def _list_join(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    size = len(payload)

    def receiver(results: list[Any]) -> _peers.Feed:
        parts: list[bytes] = []
        got = 0

        def feed(chunk: bytes) -> None:
            nonlocal got
            parts.append(chunk)
            got += len(chunk)
            if got == size:
                results.append(b"".join(parts))
                parts.clear()

        return feed

    return payload, receiver


def _prealloc(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    size = len(payload)

    def receiver(results: list[Any]) -> _peers.Feed:
        # The length is known up front (as from a header): one copy per byte.
        buffer = bytearray(size)
        view = memoryview(buffer)
        pos = 0

        def feed(chunk: bytes) -> None:
            nonlocal pos
            end = pos + len(chunk)
            view[pos:end] = chunk
            pos = end
            if end == size:
                results.append(buffer)

        return feed

    return payload, receiver


def _floor(payload: bytes) -> tuple[bytes, Callable[[list[Any]], _peers.Feed]]:
    def receiver(results: list[Any]) -> _peers.Feed:
        def feed(chunk: bytes) -> None:
            pass

        return feed

    return payload, receiver


IMPLS = {
    "chunkwire": Impl("chunkwire Decoder", _chunkwire, modules=_peers.CHUNKWIRE),
    "int32": Impl("Twisted Int32StringReceiver", _int32, exponent=2, modules=_peers.INT32),
    "tbanana": Impl("twisted.spread.banana", _twisted_banana, exponent=2, modules=_peers.TWISTED_BANANA),
    "foolscap": Impl("Foolscap Banana (StorageBanana)", _foolscap, modules=_peers.FOOLSCAP),
    "msgpack": Impl("msgpack.Unpacker (C)", _msgpack, modules=_peers.MSGPACK),
    "list_join": Impl("baseline: list.append + b''.join", _list_join),
    "prealloc": Impl("baseline: prealloc bytearray + memoryview copy", _prealloc),
    "floor": Impl("floor: slice chunk + no-op call", _floor, delivers=False),
}


def make_payload(size: int) -> bytes:
    pattern = bytes(range(256))
    return (pattern * (size // 256 + 1))[:size]


# -- worker side --------------------------------------------------------


def prepare(params: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    impl = IMPLS[params["impl"]]
    chunk = params["chunk"]
    payload = make_payload(params["size"])
    wire, make_receiver = impl.setup(payload)
    for module in impl.modules:  # import now, outside the measurement
        importlib.import_module(module)
    feed_chunks = _peers.feed_chunks

    def run() -> list[Any]:
        results: list[Any] = []
        feed_chunks(make_receiver(results), wire, chunk)
        return results

    def check(results: list[Any]) -> None:
        if impl.delivers and (len(results) != 1 or results[0] != payload):
            raise AssertionError(f"{params['impl']} delivered {len(results)} objects, not the payload")

    return run, check


# -- parent side --------------------------------------------------------


def run(opts: Options) -> BenchResult:
    sizes = QUICK_SIZES if opts.quick else SIZES
    cells = measure_grid(__name__, "chunk", CHUNKS, IMPLS, sizes, opts, NAME)
    criteria = _criteria(cells, sizes)
    report = _report(cells, sizes, criteria)
    path = write_results(
        NAME,
        opts,
        {
            "sizes": sizes,
            "chunks": CHUNKS,
            "labels": {k: v.label for k, v in IMPLS.items()},
            "cells": {str(c): v for c, v in cells.items()},
            "criteria": criteria,
        },
    )
    return BenchResult(NAME, report, criteria, path)


def _criteria(cells: dict[int, dict[str, list[dict[str, Any]]]], sizes: list[int]) -> list[Criterion]:
    top = len(sizes) - 1
    mid = sizes.index(1 * MiB)
    at = human_size(sizes[top])
    out: list[Criterion] = []
    for chunk, by_impl in cells.items():
        cw, pre = by_impl["chunkwire"], by_impl["prealloc"]
        c = human_size(chunk)
        out.append(
            Criterion(
                f"receive {c} chunks: chunkwire / prealloc ns/B at {at}",
                ratio(ns_per_byte(cw[top]), ns_per_byte(pre[top])),
                "<=",
                1.5,
                contention_note(cw[top], pre[top]),
            )
        )
        out.append(
            Criterion(
                f"receive {c} chunks: chunkwire ns/B at {at} / at 1MiB",
                ratio(ns_per_byte(cw[top]), ns_per_byte(cw[mid])),
                "<=",
                1.25,
                contention_note(cw[top], cw[mid]),
            )
        )
        out.append(Criterion(f"receive {c} chunks: chunkwire peak / payload at {at}", peak_ratio(cw[top]), "<=", 1.15))
        if chunk == 4 * KiB:
            # Issue 17's line: a value of middling size, where a per-chunk cost in Python shows most.
            out.append(
                Criterion(
                    f"receive {c} chunks: chunkwire / prealloc ns/B at 1MiB",
                    ratio(ns_per_byte(cw[mid]), ns_per_byte(pre[mid])),
                    "<=",
                    1.5,
                    contention_note(cw[mid], pre[mid]),
                )
            )
    return out


def _report(cells: dict[int, dict[str, list[dict[str, Any]]]], sizes: list[int], criteria: list[Criterion]) -> str:
    header = ["implementation", *(human_size(s) for s in sizes)]
    parts = []
    for chunk, by_impl in cells.items():
        parts.append(f"\n## Receive one large string, chunk = {chunk} bytes\n")
        parts.append("ns per payload byte, tracemalloc peak / S:\n")
        rows = [[IMPLS[k].label, *(per_byte_cell(cell, cell["size"]) for cell in row)] for k, row in by_impl.items()]
        parts.append(markdown_table(header, rows))
        parts.append("\nPeak RSS delta / S (timed runs, median):\n")
        rss_rows = [[IMPLS[k].label, *(_rss(cell) for cell in row)] for k, row in by_impl.items()]
        parts.append(markdown_table(header, rss_rows))
    if any_contended(cell for by_impl in cells.values() for row in by_impl.values() for cell in row):
        parts.append("\n" + CONTENDED_NOTE)
    parts.append("\nAcceptance ratios:\n")
    parts.extend(c.line() for c in criteria)
    return "\n".join(parts)


def _rss(cell: dict[str, Any]) -> str:
    rss = cell.get("rss_delta_bytes_median")
    return "-" if rss is None else f"{rss / cell['size']:.2f}x"
