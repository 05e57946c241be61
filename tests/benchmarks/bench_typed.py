"""Typed RPC: calls/s with constraints derived from type hints against the same constraints written by hand.

One process, a client and a server broker joined in memory (no sockets: the
figure is the CPU cost of a call, both ends included).  Each service has one
method, C{put(key, value, count)}, checked as: nothing (C{unchecked}),
explicit C{@remote(args=..., result=...)} (C{explicit}), the same bounds as
type hints (C{derived}), the hints on a remote interface the server class
implements (C{interface}), and that interface called through the client's
typed proxy, which checks the arguments and the result on the client too
(C{typed proxy}).  Batches of 64 calls are issued, then delivered; the cells
take turns, batch by batch, so that drift in the machine's speed touches
them alike; each cell is the median of its batches.

    python -m tests.benchmarks typed [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Annotated, Any, Protocol

from framing.slicing._constraints import ByteString, Integer, Text
from protocols.rpc import MaxLength, Range, Referenceable, RemoteInterface, remote

from ..protocols.rpc.services import RpcPair
from ._harness import BenchResult, Criterion, Options, markdown_table, print_result, write_results

NAME = "typed"
WINDOW = 64
ARGUMENTS = ("user:42:profile", bytes(100), 7)

Key = Annotated[str, MaxLength(1024)]
Value = Annotated[bytes, MaxLength(1 << 20)]
Count = Annotated[int, Range(0, 1000)]


class Unchecked(Referenceable):
    @remote
    def put(self, key, value, count):  # type: ignore[no-untyped-def]
        return count


class Explicit(Referenceable):
    @remote(args={"key": Text(1024), "value": ByteString(1 << 20), "count": Integer(0, 1000)}, result=Integer())
    def put(self, key, value, count):  # type: ignore[no-untyped-def]
        return count


class Derived(Referenceable):
    @remote
    def put(self, key: Key, value: Value, count: Count) -> int:
        return count


class IPut(RemoteInterface, Protocol, name="bench.IPut"):
    async def put(self, key: Key, value: Value, count: Count) -> int: ...


class Implemented(Referenceable, IPut):
    # Not async, so that it is timed like the others (mypy would want async).
    def put(self, key, value, count):  # type: ignore[no-untyped-def, override]
        return count


CELLS: dict[str, tuple[type[Referenceable], bool]] = {
    "unchecked": (Unchecked, False),
    "explicit": (Explicit, False),
    "derived": (Derived, False),
    "interface": (Implemented, False),
    "typed proxy": (Implemented, True),
}


def caller(cell: str) -> tuple[Any, RpcPair]:
    """A C{put} callable for C{cell}'s service, and its pair."""
    service, typed = CELLS[cell]
    pair = RpcPair(service())
    pair.flush()
    if typed:
        return pair.root.typed(IPut).put, pair
    root = pair.root
    return (lambda *args: root.callRemote("put", *args)), pair


def batch(put: Any, pair: RpcPair) -> float:
    """Seconds for WINDOW calls, sent and answered."""
    answers: list[Any] = []
    start = time.perf_counter()
    for _ in range(WINDOW):
        put(*ARGUMENTS).addCallback(answers.append)
    pair.flush()
    elapsed = time.perf_counter() - start
    assert answers == [ARGUMENTS[2]] * WINDOW, answers[:3]
    return elapsed


def measure(quick: bool) -> dict[str, float]:
    """Calls per second of each cell: the median over interleaved batches."""
    callers = {cell: caller(cell) for cell in CELLS}
    for put, pair in callers.values():
        for _ in range(20):
            batch(put, pair)  # warm up
    times: dict[str, list[float]] = {cell: [] for cell in CELLS}
    rounds = 60 if quick else 400
    for _ in range(rounds):
        for cell, (put, pair) in callers.items():
            times[cell].append(batch(put, pair))
    return {cell: WINDOW / statistics.median(samples) for cell, samples in times.items()}


def _report(rates: dict[str, float]) -> str:
    explicit = rates["explicit"]
    rows = [[cell, f"{rate:,.0f}", f"{rate / explicit:.3f}"] for cell, rate in rates.items()]
    return "## Typed RPC: derived against explicit constraints (calls/s, in memory, both ends)\n\n" + markdown_table(
        ["checks", "calls/s", "/ explicit"], rows
    )


def run(opts: Options) -> BenchResult:
    rates = measure(opts.quick)
    criteria = [
        Criterion(
            "derived / explicit calls/s", rates["derived"] / rates["explicit"], ">=", 0.95, "issue 18: within 5%"
        ),
        Criterion(
            "interface / explicit calls/s", rates["interface"] / rates["explicit"], ">=", 0.95, "issue 18: within 5%"
        ),
    ]
    path = write_results(NAME, opts, {"rates": rates, "criteria": criteria})
    return BenchResult(NAME, _report(rates), criteria, path)


if __name__ == "__main__":
    sys.exit(print_result(run(Options(quick="--quick" in sys.argv[1:]))))
