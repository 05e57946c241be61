"""Receive many small tokens: values per second for chunkwire and its peers.

2**20 small integers (zero) are sent either as separate top-level values or
as lists of 1024, encoded by each implementation's own encoder, and fed in
2 KiB chunks (one chunk per feed, as a socket delivers them) and in 64 KiB
chunks.  Token sizes differ (chunkwire and msgpack: 1 byte per small int;
both banana dialects: 2), so a 2 KiB chunk holds a different number of
values for each; what is compared is values per second.  Int32StringReceiver
carries one 1-byte value per frame; AMP one value per key of a 4-key box
(box parsing only, no command dispatch).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import _peers
from ._harness import (
    CONTENDED_NOTE,
    BenchResult,
    Criterion,
    KiB,
    Options,
    Series,
    any_contended,
    contended,
    contention_note,
    markdown_table,
    measure_series,
    rate,
    ratio,
    sig,
    write_results,
)

NAME = "small"
VALUES = 1 << 20
QUICK_VALUES = 1 << 16
CHUNKS = [2 * KiB, 64 * KiB]
LIST_LENGTH = 1024
BLOCK = 1024  # separate values are encoded BLOCK at a time and the block repeated
AMP_KEYS = 4


@dataclass(frozen=True)
class Row:
    """One implementation and shape: how to encode C{values} values and how to receive them."""

    label: str
    wire: Callable[[int], bytes]
    receiver: Callable[[list[Any]], _peers.Feed]
    modules: tuple[str, ...]
    objects_per_value: float  # top-level objects delivered per value


def _separate(encode: Callable[[Sequence[Any]], bytes], head: int = 0) -> Callable[[int], bytes]:
    """Encode C{BLOCK} zeros with the peer's own encoder; repeat the block (the tokens are stateless)."""

    def wire(values: int) -> bytes:
        block = encode([0] * BLOCK)
        return block[:head] + block[head:] * (values // BLOCK)

    return wire


def _lists(encode: Callable[[Sequence[Any]], bytes]) -> Callable[[int], bytes]:
    def wire(values: int) -> bytes:
        return encode([[0] * LIST_LENGTH for _ in range(values // LIST_LENGTH)])

    return wire


def _int32_wire(values: int) -> bytes:
    return _peers.int32_wire([b"\x00"] * BLOCK) * (values // BLOCK)


def _amp_wire(values: int) -> bytes:
    box = {bytes([97 + i]): b"0" for i in range(AMP_KEYS)}
    return _peers.amp_wire([box] * BLOCK) * (values // (BLOCK * AMP_KEYS))


_PREAMBLE_LENGTH = 9

ROWS = {
    "chunkwire-ints": Row(
        "chunkwire, separate small ints",
        _separate(_peers.chunkwire_wire, head=_PREAMBLE_LENGTH),
        _peers.chunkwire_receiver,
        _peers.CHUNKWIRE,
        1,
    ),
    "chunkwire-lists": Row(
        "chunkwire, lists of 1024 zeros",
        _lists(_peers.chunkwire_wire),
        _peers.chunkwire_receiver,
        _peers.CHUNKWIRE,
        1 / LIST_LENGTH,
    ),
    "tbanana-ints": Row(
        "twisted banana, separate INT tokens",
        _separate(_peers.twisted_banana_wire),
        _peers.twisted_banana_receiver,
        _peers.TWISTED_BANANA,
        1,
    ),
    "tbanana-lists": Row(
        "twisted banana, lists of 1024 zeros",
        _lists(_peers.twisted_banana_wire),
        _peers.twisted_banana_receiver,
        _peers.TWISTED_BANANA,
        1 / LIST_LENGTH,
    ),
    "foolscap-ints": Row(
        "foolscap, separate INT tokens",
        _separate(_peers.foolscap_wire),
        _peers.foolscap_receiver,
        _peers.FOOLSCAP,
        1,
    ),
    "foolscap-lists": Row(
        "foolscap, lists of 1024 zeros",
        _lists(_peers.foolscap_wire),
        _peers.foolscap_receiver,
        _peers.FOOLSCAP,
        1 / LIST_LENGTH,
    ),
    "msgpack-ints": Row(
        "msgpack (C), separate fixints",
        _separate(_peers.msgpack_wire),
        _peers.msgpack_receiver,
        _peers.MSGPACK,
        1,
    ),
    "msgpack-lists": Row(
        "msgpack (C), arrays of 1024 zeros",
        _lists(_peers.msgpack_wire),
        _peers.msgpack_receiver,
        _peers.MSGPACK,
        1 / LIST_LENGTH,
    ),
    "int32": Row(
        "Int32StringReceiver, 1 frame per value",
        _int32_wire,
        lambda results: _peers.int32_receiver(results, 99999),
        _peers.INT32,
        1,
    ),
    "amp": Row(
        f"AMP BinaryBoxProtocol, {AMP_KEYS} keys per box",
        _amp_wire,
        _peers.amp_receiver,
        _peers.AMP,
        1 / AMP_KEYS,
    ),
}


# -- worker side --------------------------------------------------------


def prepare(params: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    row = ROWS[params["impl"]]
    values, chunk = params["values"], params["chunk"]
    wire = row.wire(values)
    for module in row.modules:
        importlib.import_module(module)
    feed_chunks = _peers.feed_chunks

    def run() -> list[Any]:
        results: list[Any] = []
        feed_chunks(row.receiver(results), wire, chunk)
        return results

    def check(results: list[Any]) -> None:
        expected = round(values * row.objects_per_value)
        if len(results) != expected:
            raise AssertionError(f"{params['impl']}: {len(results)} objects, expected {expected}")
        if row.objects_per_value == 1 / LIST_LENGTH and any(len(r) != LIST_LENGTH for r in results):
            raise AssertionError(f"{params['impl']}: a list was not {LIST_LENGTH} long")

    return run, check


def wire_size(key: str, values: int) -> int:
    return len(ROWS[key].wire(values))


# -- parent side --------------------------------------------------------


def run(opts: Options) -> BenchResult:
    values = QUICK_VALUES if opts.quick else VALUES
    cells: dict[str, dict[int, dict[str, Any]]] = {}
    for key in ROWS:
        cells[key] = {}
        for chunk in CHUNKS:
            series = Series(
                __name__.rsplit(".", 1)[1], {"impl": key, "chunk": chunk}, [values], size_key="values", memory=False
            )
            (cells[key][chunk],) = measure_series(series, opts, progress=f"[{NAME}]")
    sizes = {key: wire_size(key, values) for key in ROWS}
    criteria = _criteria(cells, values)
    report = _report(cells, values, sizes, criteria)
    path = write_results(
        NAME,
        opts,
        {
            "values": values,
            "chunks": CHUNKS,
            "labels": {k: v.label for k, v in ROWS.items()},
            "wire_bytes": sizes,
            "cells": cells,
            "criteria": criteria,
        },
    )
    return BenchResult(NAME, report, criteria, path)


def _values_per_second(cell: dict[str, Any], values: int) -> float | None:
    if cell.get("status") != "ok":
        return None
    return float(values / cell["median_s"])


def _ratios(cells: dict[str, dict[int, dict[str, Any]]], values: int, chunk: int) -> list[Criterion]:
    out = []
    for shape, name in (("ints", "separate ints"), ("lists", "lists of 1024")):
        mine = cells[f"chunkwire-{shape}"][chunk]
        ours = _values_per_second(mine, values)
        for peer, label in (("tbanana", "twisted banana"), ("foolscap", "foolscap")):
            other = cells[f"{peer}-{shape}"][chunk]
            out.append(
                Criterion(
                    f"small tokens, {name}, {chunk // KiB} KiB chunks: chunkwire / {label} values/s",
                    ratio(ours, _values_per_second(other, values)),
                    ">=",
                    3.0,
                    contention_note(mine, other),
                )
            )
    return out


def _criteria(cells: dict[str, dict[int, dict[str, Any]]], values: int) -> list[Criterion]:
    """The target is set for 2 KiB chunks; the 64 KiB ratios are reported alongside, for information."""
    return _ratios(cells, values, CHUNKS[0])


def _report(
    cells: dict[str, dict[int, dict[str, Any]]], values: int, sizes: dict[str, int], criteria: list[Criterion]
) -> str:
    header = ["implementation", "B/value", "values per 2 KiB", *(f"chunk {c}" for c in CHUNKS)]
    rows = []
    for key, row in ROWS.items():
        per_value = sizes[key] / values
        figures = []
        for chunk in CHUNKS:
            cell = cells[key][chunk]
            vps = _values_per_second(cell, values)
            if vps is None:
                figures.append(cell.get("status", "?"))
                continue
            objects = vps * row.objects_per_value
            mark = "*" if contended(cell) else ""
            figures.append(f"{rate(vps)}{mark} ({rate(objects)} obj/s) [{sig(1e9 / vps)} ns]")
        rows.append([row.label, f"{per_value:.2f}", f"{2 * KiB / per_value:.0f}", *figures])
    return "\n".join(
        [
            f"\n## Many small tokens ({values} values, fed in chunks)\n",
            "values/s (top-level objects/s) [ns per value]:\n",
            markdown_table(header, rows),
            *(["\n" + CONTENDED_NOTE] if any_contended(c for by in cells.values() for c in by.values()) else []),
            "\nAcceptance ratios (2 KiB chunks):\n",
            *(c.line() for c in criteria),
            "\nFor information, the same ratios with 64 KiB chunks:\n",
            *(c.line() for c in _ratios(cells, values, CHUNKS[1])),
        ]
    )
