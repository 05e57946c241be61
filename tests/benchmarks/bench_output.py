"""Build output from many pieces: framing.BlockBuffer against the usual idioms.

S bytes (1, 16, 256 MiB) are built from 16-byte or 64 KiB pieces, each a
fresh C{bytes} sliced off a small source inside the timed loop.  BlockBuffer
is driven as the encoder drives it: C{bb.write(piece)} for small pieces with
C{bb.seal_if_full()} every 1024 pieces (once per container), and
C{bb.write_piece(piece)} for 64 KiB pieces, then C{take_blocks()}.
Reported: ns per output byte and the tracemalloc peak during the loop / S.
C{bytes +=} is quadratic; its large sizes are skipped by prediction.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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

NAME = "output"
SIZES = [1 * MiB, 16 * MiB, 256 * MiB]
QUICK_SIZES = [1 * MiB, 16 * MiB]
PIECES = [16, 64 * KiB]
GROUP = 1024  # pieces between two seal_if_full() calls: one container's worth
SOURCE_BYTES = 1 * MiB  # largest source the pieces are sliced from

Build = Callable[[bytes, list[int], int, int], Any]


def _floor(src: bytes, offsets: list[int], piece: int, groups: int) -> None:
    for _ in range(groups):
        for off in offsets:
            _ = src[off : off + piece]


def _bytes_concat(src: bytes, offsets: list[int], piece: int, groups: int) -> bytes:
    out = b""
    for _ in range(groups):
        for off in offsets:
            out += src[off : off + piece]
    return out


def _bytearray(src: bytes, offsets: list[int], piece: int, groups: int) -> bytearray:
    out = bytearray()
    for _ in range(groups):
        for off in offsets:
            out += src[off : off + piece]
    return out


def _bytearray_bytes(src: bytes, offsets: list[int], piece: int, groups: int) -> bytes:
    return bytes(_bytearray(src, offsets, piece, groups))


def _list_join(src: bytes, offsets: list[int], piece: int, groups: int) -> bytes:
    parts: list[bytes] = []
    append = parts.append
    for _ in range(groups):
        for off in offsets:
            append(src[off : off + piece])
    return b"".join(parts)


def _bytesio(src: bytes, offsets: list[int], piece: int, groups: int) -> bytes:
    out = io.BytesIO()
    write = out.write
    for _ in range(groups):
        for off in offsets:
            write(src[off : off + piece])
    return out.getvalue()


def _block_buffer(src: bytes, offsets: list[int], piece: int, groups: int) -> list[bytes]:
    from framing import BlockBuffer

    bb = BlockBuffer()
    if piece >= 32 * KiB:
        for _ in range(groups):
            for off in offsets:
                bb.write_piece(src[off : off + piece])
    else:
        for _ in range(groups):
            for off in offsets:
                bb.write(src[off : off + piece])
            bb.seal_if_full()
    return bb.take_blocks()


@dataclass(frozen=True)
class Impl:
    label: str
    build: Build
    exponent: float = 1.0


IMPLS = {
    "floor": Impl("floor: create piece, discard", _floor),
    "bytes_concat": Impl("bytes += piece", _bytes_concat, exponent=2),
    "bytearray": Impl("bytearray += piece (result: bytearray)", _bytearray),
    "bytearray_bytes": Impl("bytearray += piece, then bytes(ba)", _bytearray_bytes),
    "list_join": Impl("list.append + b''.join", _list_join),
    "bytesio": Impl("BytesIO.write + getvalue()", _bytesio),
    "blockbuffer": Impl("chunkwire BlockBuffer (write/write_piece + take_blocks)", _block_buffer),
}


def _layout(piece: int, size: int) -> tuple[int, int]:
    """Pieces per group and groups, so that a group's source fits in L{SOURCE_BYTES}."""
    per_group = min(GROUP, SOURCE_BYTES // piece, size // piece)
    return per_group, size // (per_group * piece)


# -- worker side --------------------------------------------------------


def prepare(params: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    impl = IMPLS[params["impl"]]
    piece, size = params["piece"], params["size"]
    per_group, groups = _layout(piece, size)
    pattern = bytes(range(256))
    src = (pattern * (per_group * piece // 256 + 1))[: per_group * piece]
    offsets = list(range(0, per_group * piece, piece))
    import framing  # noqa: F401  (imported before the measurement)

    def run() -> Any:
        return impl.build(src, offsets, piece, groups)

    def check(result: Any) -> None:
        if result is None:
            return
        if isinstance(result, list):
            result = b"".join(result)
        if len(result) != size or result != src * groups:
            raise AssertionError(f"{params['impl']} built {len(result)} bytes, not the expected {size}")

    return run, check


# -- parent side --------------------------------------------------------


def run(opts: Options) -> BenchResult:
    sizes = QUICK_SIZES if opts.quick else SIZES
    cells = measure_grid(__name__, "piece", PIECES, IMPLS, sizes, opts, NAME)
    criteria = _criteria(cells, sizes)
    report = _report(cells, sizes, criteria)
    path = write_results(
        NAME,
        opts,
        {
            "sizes": sizes,
            "pieces": PIECES,
            "labels": {k: v.label for k, v in IMPLS.items()},
            "cells": {str(p): v for p, v in cells.items()},
            "criteria": criteria,
        },
    )
    return BenchResult(NAME, report, criteria, path)


def _criteria(cells: dict[int, dict[str, list[dict[str, Any]]]], sizes: list[int]) -> list[Criterion]:
    out: list[Criterion] = []
    for piece, by_impl in cells.items():
        for i, size in enumerate(sizes):
            bb, ba = by_impl["blockbuffer"][i], by_impl["bytearray"][i]
            where = f"{human_size(piece)} pieces, {human_size(size)}"
            out.append(
                Criterion(
                    f"output {where}: BlockBuffer / bytearray ns/B",
                    ratio(ns_per_byte(bb), ns_per_byte(ba)),
                    "<=",
                    1.2,
                    contention_note(bb, ba),
                )
            )
            out.append(Criterion(f"output {where}: BlockBuffer peak / output", peak_ratio(bb), "<=", 1.1))
    return out


def _report(cells: dict[int, dict[str, list[dict[str, Any]]]], sizes: list[int], criteria: list[Criterion]) -> str:
    header = ["method", *(human_size(s) for s in sizes)]
    parts = []
    for piece, by_impl in cells.items():
        parts.append(f"\n## Output building, {piece}-byte pieces (fresh bytes objects)\n")
        parts.append("ns per output byte, tracemalloc peak / S:\n")
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
