"""One measured run, in a fresh interpreter.

Usage (by the harness): C{python -m tests.benchmarks._worker MODULE PARAMS_JSON time|mem}.

C{MODULE.prepare(params)} builds the input (untimed) and returns C{(run,
check)}: C{run()} is the measured work, receiver or buffer construction
included, and returns what it produced; C{check(result)} verifies it after
the clock has stopped.  Between the two, freed memory is returned to the OS
(C{malloc_trim}), so that every implementation starts from the same heap.
In C{time} mode tracemalloc is off and the peak RSS growth is read from
C{/proc/self/status}; in C{mem} mode the tracemalloc peak during C{run()} is
reported (its timing is not used).  The last line of
stdout is the JSON result.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import sys
import time
import tracemalloc
from typing import Any


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def _release_free_memory() -> None:
    # Hand the set-up's freed memory back to the OS, so that no
    # implementation finds its pages already faulted in by the set-up.
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure(module: str, params: dict[str, Any], mode: str) -> dict[str, Any]:
    bench = importlib.import_module(f"tests.benchmarks.{module}")
    run, check = bench.prepare(params)
    gc.collect()
    _release_free_memory()
    result: dict[str, Any] = {"mode": mode}
    if mode == "mem":
        tracemalloc.start()
        start = time.perf_counter()
        produced = run()
        result["seconds"] = time.perf_counter() - start
        result["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        rss_before = _status_kib("VmRSS")
        can_reset = _reset_peak_rss()
        start = time.perf_counter()
        produced = run()
        result["seconds"] = time.perf_counter() - start
        peak = _status_kib("VmHWM")
        if can_reset and rss_before is not None and peak is not None:
            result["rss_delta_bytes"] = (peak - rss_before) * 1024
    check(produced)
    return result


def main(argv: list[str]) -> None:
    module, params, mode = argv
    if mode not in ("time", "mem"):
        raise SystemExit(f"mode must be time or mem, not {mode!r}")
    print(json.dumps(measure(module, json.loads(params), mode)))


if __name__ == "__main__":
    main(sys.argv[1:])
