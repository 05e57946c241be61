"""Run chunkwire's benchmarks: C{python -m tests.benchmarks [receive|small|output ...] [--quick]}.

Each benchmark prints its tables (Markdown) on stdout, progress on stderr,
and writes C{bench-results/<name>.json}; at the end the acceptance ratios are
summarised: PASS, or BELOW with the figure and "below target on this
machine (target set on ...)", since the targets were set on one reference
machine.  The exit status is 1 if any target was missed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from ._harness import BenchResult, Options, machine_info, machine_line

BENCHMARKS = {
    "receive": "bench_receive",
    "small": "bench_small_tokens",
    "output": "bench_output",
    "ring": "bench_ring",
    "mixed": "bench_mixed",
    "echo": "bench_echo",
    "rpc": "bench_rpc",
    "flatness": "bench_flatness",
    "latency": "bench_latency",
    "bulk": "bench_bulk",
    "cores": "bench_cores",
    "serving": "bench_serving",
    "typed": "bench_typed",
    "streams": "bench_streams",
}


def parse(argv: list[str]) -> tuple[list[str], Options]:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks", description=__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(BENCHMARKS)} (default: all)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats: a sanity run")
    parser.add_argument("--timeout", type=float, default=None, help="seconds before one run is killed (60; quick 30)")
    parser.add_argument("--skip-over", type=float, default=60.0, help="skip runs predicted to take longer (60 s)")
    parser.add_argument("--out", type=Path, default=None, help="directory for the JSON results (bench-results/)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    opts = Options(quick=args.quick, skip_over=args.skip_over)
    opts.timeout = args.timeout if args.timeout is not None else (30.0 if args.quick else 60.0)
    if args.out is not None:
        opts.out_dir = args.out
    names = list(dict.fromkeys(args.names)) or list(BENCHMARKS)
    return names, opts


def main(argv: list[str]) -> int:
    names, opts = parse(argv)
    print(machine_line(machine_info()))
    print(
        "Each cell: median of N timed runs (N = 5 below 3 s a run, 3 below 20 s, else 1), each in a fresh "
        "process; a run under 10 s during which other work kept > 0.5 CPU busy is redone (once per cell); "
        "memory from one extra tracemalloc run.  Sizes are binary."
        + ("  QUICK MODE: fewer sizes and repeats." if opts.quick else "")
    )
    results: list[BenchResult] = []
    started = time.monotonic()
    for name in names:
        module = importlib.import_module(f"{__package__}.{BENCHMARKS[name]}")
        t0 = time.monotonic()
        result: BenchResult = module.run(opts)
        print(result.report)
        print(f"\n({name}: {time.monotonic() - t0:.0f} s; results in {result.path})", flush=True)
        results.append(result)
    print(f"\n## Acceptance summary (total {time.monotonic() - started:.0f} s)\n")
    failed = False
    for result in results:
        for criterion in result.criteria:
            print(criterion.line())
            failed = failed or criterion.passed is False
    if failed:
        print("\nSome targets were missed on this machine: exit status 1.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
