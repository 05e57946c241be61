"""Old commit against new, side by side in one run: chunkwire's own figures from two trees, rounds interleaved.

    PYTHONPATH=. python -m tests.benchmarks.compare_commits --base 256bf17 --rounds 5 rpc
    PYTHONPATH=. python -m tests.benchmarks.compare_commits --base 256bf17 --rounds 3 bulk
    PYTHONPATH=. python -m tests.benchmarks.compare_commits --base 256bf17 --rounds 3 flatness

The base commit is checked out once into a temporary git worktree, and if
this tree runs on the compiled core, the base's is built there from its own
C{framing/_speedups.c} (else the base would run on the pure-Python core;
with C{CHUNKWIRE_PURE=1} both do).  Each round runs the benchmark once in
each tree (the order alternates from round to round, so drift in the
machine's load falls on both), and a figure's ratio is the median of the
per-round ratios new / base, printed with the medians of both.  A ratio
of 1.00 means no change; the machines are shared, so read the spread
before reading a few percent into it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framing import _core

ROOT = Path(__file__).resolve().parents[2]


def _rpc(tree: Path, out: Path, duration: float) -> dict[str, float]:
    command = ["-m", "tests.benchmarks.bench_rpc", "--runs", "1", "--duration", str(duration)]
    command += ["--peers", "chunkwire", "--no-strace", "--out", str(out)]
    _run(tree, command)
    cells = json.loads((out / "rpc.json").read_text())["summary"]["cells"]["chunkwire"]
    figures = {f"rpc {name} calls/s": cell["calls_per_s"] for name, cell in cells.items()}
    # CPU per call moves less than calls/s when other work shares the machine.
    figures.update({f"rpc {name} server CPU us/call": cell["server_cpu_us"] for name, cell in cells.items()})
    figures.update({f"rpc {name} client CPU us/call": cell["client_cpu_us"] for name, cell in cells.items()})
    return figures


def _bulk(tree: Path, out: Path, duration: float) -> dict[str, float]:
    path = out / "bulk.json"
    _run(tree, ["-m", "tests.benchmarks.bench_bulk", "--quick", "--json", str(path)])
    cases = json.loads(path.read_text())["cases"]
    # The raw Twisted producer is the same code in both trees: its rate shows
    # the machine's drift, and each case's rate over it (same run) removes it.
    figures = {f"bulk {case} MB/s": float(summary["mb_s"]) for case, summary in cases.items()}
    figures.update({f"bulk {case} / raw": float(summary["vs_raw"]) for case, summary in cases.items() if case != "raw"})
    # A CLI case is timed from the command's start to its exit since issue 42, from the transfer's start to
    # its end before (the CLI's own figure, kept as transfer_seconds since): this compares like with like.
    transfers = json.loads(path.read_text())["runs"]["transfer"]
    for case, measured in transfers.items():
        if case.startswith("cli"):
            figures[f"bulk {case} transfer MB/s"] = statistics.median(_transferRate(run) for run in measured)
    return figures


def _streams(tree: Path, out: Path, duration: float) -> dict[str, float]:
    _run(tree, ["-m", "tests.benchmarks.bench_streams", "--quick"])
    # (bench_streams writes into its own tree's bench-results/)
    results = json.loads((tree / "bench-results" / "streams.json").read_text())
    return {
        f"streams {where} {how} items/s": rate for where in ("memory", "tcp") for how, rate in results[where].items()
    }


def _transferRate(run: dict[str, Any]) -> float:
    """A CLI run's MB/s over its transfer's own time (C{transfer_seconds}); a base's C{mb_s} was timed so."""
    sent = run.get("send")
    seconds = sent.get("transfer_seconds") if isinstance(sent, dict) else None
    return float(run["size"] / seconds / 1e6) if seconds else float(run["mb_s"])


def _flatness(tree: Path, out: Path, duration: float) -> dict[str, float]:
    command = ["-m", "tests.benchmarks.bench_flatness", "--quick", "--runs", "1", "--peers", "chunkwire"]
    _run(tree, [*command, "--out", str(out)])
    windows = json.loads((out / "flatness.json").read_text())["summary"]["chunkwire"]
    figures = {f"flatness w{window} calls/s": cell["calls_per_s"] for window, cell in windows.items()}
    # Flatness itself: the ninth tenth of a long connection's calls against the second.
    figures.update({f"flatness w{window} tenth 9 / tenth 2": cell["d9_over_d2"] for window, cell in windows.items()})
    return figures


BENCHMARKS: dict[str, Callable[[Path, Path, float], dict[str, float]]] = {
    "rpc": _rpc,
    "bulk": _bulk,
    "flatness": _flatness,
    "streams": _streams,
}

_BUILD = (
    "from setuptools import Extension, setup; "
    "setup(name='base-core', ext_modules=[Extension('framing._speedups', ['framing/_speedups.c'])],"
    " script_args=['build_ext', '--inplace', '--quiet'])"
)


def buildCore(tree: Path) -> None:
    """
    Compile C{tree}'s C{framing/_speedups.c} into its C{framing/}, as the
    editable install compiled the new tree's.  Built in a scratch folder
    from the C file alone: an old commit's C{pyproject.toml} may not parse
    with today's setuptools.

    @raise RuntimeError: it did not compile (the comparison would be of two cores).
    """
    source = tree / "framing" / "_speedups.c"
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "framing").mkdir()
        shutil.copy(source, Path(scratch) / "framing" / source.name)
        done = subprocess.run([sys.executable, "-c", _BUILD], cwd=scratch, capture_output=True, text=True, check=False)
        built = sorted((Path(scratch) / "framing").glob("_speedups*.so"))
        if done.returncode != 0 or not built:
            raise RuntimeError(f"the base's compiled core did not build:\n{done.stderr[-3000:]}")
        shutil.copy(built[0], tree / "framing" / built[0].name)


def _run(tree: Path, command: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, *command], cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode not in (0, 1):  # 1: a benchmark's target missed, the figures are still written
        raise RuntimeError(f"{command} in {tree} failed:\n{done.stderr[-3000:]}")


def compare(base: str, name: str, rounds: int, duration: float) -> list[dict[str, Any]]:
    """Run benchmark C{name} C{rounds} times in each tree; one row per figure."""
    measure = BENCHMARKS[name]
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "base"
        add = ["git", "worktree", "add", "--detach", str(old), base]
        subprocess.run(add, cwd=ROOT, check=True, capture_output=True)
        try:
            if _core.speedups is not None:  # (this tree's core, as CHUNKWIRE_PURE and the build left it)
                buildCore(old)
            runs: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
            for index in range(rounds):
                order = [("base", old), ("new", ROOT)] if index % 2 == 0 else [("new", ROOT), ("base", old)]
                for label, tree in order:
                    out = Path(scratch) / f"{label}-{index}"
                    out.mkdir()
                    runs[label].append(measure(tree, out, duration))
                    print(f"round {index + 1}/{rounds} {label}: {runs[label][-1]}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    rows = []
    # A figure one tree does not measure (a case added since the base) has no ratio: left out.
    common = set.intersection(*(set(run) for run in runs["base"] + runs["new"]))
    for figure in [name for name in runs["new"][0] if name in common]:
        olds = [run[figure] for run in runs["base"]]
        news = [run[figure] for run in runs["new"]]
        ratios = [new / old for new, old in zip(news, olds, strict=True) if old]
        rows.append(
            {
                "figure": figure,
                "base": statistics.median(olds),
                "new": statistics.median(news),
                "ratio": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
        )
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmark", choices=sorted(BENCHMARKS))
    parser.add_argument("--base", required=True, help="the commit to compare against (any git revision)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=1.5, help="seconds per RPC column")
    args = parser.parse_args(argv)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    rows = compare(args.base, args.benchmark, args.rounds, args.duration)
    print(f"\n{args.benchmark}: base {args.base} against the working tree at {head.strip()}, {args.rounds} rounds\n")
    print("| figure | base (median) | new (median) | new / base (median of rounds) | range |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['figure']} | {row['base']:,.3g} | {row['new']:,.3g} | {row['ratio']:.3f} "
            f"| {row['ratio_min']:.3f}-{row['ratio_max']:.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
