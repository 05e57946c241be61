"""A mixed RPC-like message, encoded and decoded many times.

The message is a dict of 20 fields: small ints (one negative, one above
2**32), short strings, a float, bools, None, and one 1 KiB bytes value: what
an RPC call's arguments or a result typically look like.  Reported: calls per
second to encode and to decode one message, for

  - chunkwire C{dumps}/C{loads}: a fresh Encoder/Decoder (and the preamble)
    per call, the like-for-like peer of Foolscap's per-call API;
  - chunkwire steady state: one C{Encoder().encode} and one
    C{Decoder(preamble=False).feed} reused for every message, as a
    connection does;
  - Foolscap's Banana through C{foolscap.storage.serialize}/C{unserialize}:
    each call builds a StorageBanana and returns a Deferred, which has always
    fired by the time it is returned (we read C{.result}; no reactor runs), so
    the Deferred's cost is included, as a Foolscap user pays it;
  - msgpack C{packb}/C{unpackb} and pickle (highest protocol)
    C{dumps}/C{loads}, both C extensions, for scale.

Run: C{python -m tests.benchmarks.bench_mixed [--quick]}.  Each figure is the
median of several runs (5; 3 in quick mode), each looping the call for at
least 0.2 s after a warm-up call.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._harness import BenchResult, Criterion, Options, markdown_table, print_result, ratio, write_results
from .bench_ring import time_per_call

NAME = "mixed"
RUN_SECONDS = 0.2


def make_message() -> dict[str, Any]:
    """The 20-field message: 19 small fields and one 1 KiB bytes value."""
    return {
        "request_id": 48213,
        "method": "put_object",
        "account": "AUTH_test",
        "container": "photos",
        "object": "2024/07/cat.jpg",
        "offset": 0,
        "length": 1024,
        "deadline": 1_720_000_123,
        "big_counter": 2**40 + 7,
        "delta": -17,
        "retries": 3,
        "priority": 5,
        "ratio": 0.375,
        "replicate": True,
        "compressed": False,
        "durable": True,
        "etag": None,
        "content_type": "image/jpeg",
        "user": "alice",
        "body": bytes(range(256)) * 4,
    }


@dataclass(frozen=True)
class Impl:
    """One codec: C{encode(msg) -> data} and C{decode(data) -> msg}, each set up once by C{make}."""

    label: str
    make: Callable[[], tuple[Callable[[Any], Any], Callable[[Any], Any]]]
    note: str


def _chunkwire() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    from framing import dumps, loads

    return dumps, loads


def _chunkwire_steady() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    from framing import Decoder, Encoder

    encode = Encoder().encode
    feed = Decoder(preamble=False).feed

    def decode(data: bytes) -> Any:
        (obj,) = feed(data)
        return obj

    return encode, decode


def _foolscap() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    from foolscap.storage import serialize, unserialize  # type: ignore[import-untyped]

    def encode(obj: Any) -> bytes:
        d = serialize(obj)
        assert d.called, "foolscap serialize did not fire synchronously"
        return d.result  # type: ignore[no-any-return]

    def decode(data: bytes) -> Any:
        d = unserialize(data)
        assert d.called, "foolscap unserialize did not fire synchronously"
        return d.result

    return encode, decode


def _msgpack() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    import msgpack  # type: ignore[import-untyped]

    return msgpack.packb, msgpack.unpackb


def _pickle() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    return (lambda obj: pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)), pickle.loads


IMPLS = [
    Impl("chunkwire dumps/loads", _chunkwire, "fresh Encoder/Decoder and preamble per call"),
    Impl(
        "chunkwire steady state",
        _chunkwire_steady,
        "one Encoder().encode and one Decoder(preamble=False).feed for all messages",
    ),
    Impl(
        "foolscap serialize/unserialize",
        _foolscap,
        "foolscap.storage; new StorageBanana per call; returns an already-fired Deferred (read .result)",
    ),
    Impl("msgpack", _msgpack, "packb/unpackb (C extension)"),
    Impl("pickle", _pickle, f"protocol {pickle.HIGHEST_PROTOCOL} (C extension)"),
]


def measure(impl: Impl, opts: Options) -> dict[str, Any]:
    encode, decode = impl.make()
    message = make_message()
    enc, data = time_per_call(lambda: encode(message), opts, RUN_SECONDS)
    dec, back = time_per_call(lambda: decode(data), opts, RUN_SECONDS)
    if back != message:
        raise AssertionError(f"{impl.label} did not round trip the message")
    return {"encode": enc, "decode": dec, "size_bytes": len(data)}


def _ops(seconds: float) -> str:
    per_second = 1 / seconds
    return f"{per_second / 1000:.1f}k/s ({seconds * 1e6:.1f} µs)"


def run(opts: Options) -> BenchResult:
    cells: dict[str, dict[str, Any]] = {}
    for impl in IMPLS:
        print(f"  {impl.label} ...", file=sys.stderr, flush=True)
        cells[impl.label] = measure(impl, opts)
    rows = [
        [impl.label, _ops(c["encode"]["median_s"]), _ops(c["decode"]["median_s"]), str(c["size_bytes"])]
        for impl, c in ((impl, cells[impl.label]) for impl in IMPLS)
    ]
    table = markdown_table(["implementation", "encode", "decode", "bytes"], rows)
    criteria = _criteria(cells)
    notes = "\n".join(f"- {impl.label}: {impl.note}" for impl in IMPLS)
    text = f"## Mixed RPC-like message (20 fields, one 1 KiB bytes)\n\n{table}\n\nHow each was driven:\n{notes}"
    path = write_results(
        NAME,
        opts,
        {
            "message_fields": len(make_message()),
            "run_seconds": RUN_SECONDS,
            "notes": {impl.label: impl.note for impl in IMPLS},
            "cells": cells,
            "criteria": criteria,
        },
    )
    return BenchResult(NAME, text, criteria, path)


def _criteria(cells: dict[str, dict[str, Any]]) -> list[Criterion]:
    fool = cells["foolscap serialize/unserialize"]
    out = []
    for label, note in [
        ("chunkwire dumps/loads", "per-call API against per-call API"),
        ("chunkwire steady state", "reused Encoder/Decoder against Foolscap's per-call API"),
    ]:
        for op in ("encode", "decode"):
            speedup = ratio(fool[op]["median_s"], cells[label][op]["median_s"])
            out.append(Criterion(f"mixed: {label} / foolscap, {op} ops/s", speedup, ">=", 2.0, note))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_mixed", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    opts = Options(quick=parser.parse_args(argv).quick)
    return print_result(run(opts))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
