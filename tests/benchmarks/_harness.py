"""The benchmarks' shared machinery: fresh-process runs, prediction, tables, JSON.

Contract: every measured run happens in a fresh interpreter
(C{python -m tests.benchmarks._worker}), one at a time, with a timeout.  A
cell is the median of its timed runs plus one extra run under tracemalloc for
memory (its timing is discarded); a short timed run during which other work
kept the machine busy is redone.  A run predicted to take longer than
L{Options.skip_over} seconds is not started: the cell shows an estimate
extrapolated from the largest size measured.  A run that outlives its timeout
is killed and the larger sizes of that series are skipped.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
KiB = 1024
MiB = 1024 * KiB


@dataclass
class Options:
    """
    How a benchmark run is carried out.

    @ivar quick: fewer sizes and repeats, for a fast sanity run.
    @ivar timeout: seconds before one run is killed.
    @ivar skip_over: a run predicted to take longer than this is skipped.
    @ivar out_dir: where C{<name>.json} is written.
    """

    quick: bool = False
    timeout: float = 60.0
    skip_over: float = 60.0
    out_dir: Path = field(default_factory=lambda: REPO_ROOT / "bench-results")

    def runs_for(self, first: float) -> int:
        """How many timed runs a cell gets, from how long its first one took."""
        if self.quick:
            return 3 if first < 0.5 else 1
        if first < 3:
            return 5
        return 3 if first < 20 else 1

    def wants_memory_run(self, first: float) -> bool:
        """The tracemalloc run is dropped only for runs so slow that it would dominate the budget."""
        return first < 30


class RunFailed(Exception):
    """A worker run exited with an error."""


class RunTimedOut(Exception):
    """A worker run was killed at its timeout."""


def median_of(runs: int) -> str:
    """C{"median of 1 run"}, C{"median of 5 runs"}: how a table says what its cells are."""
    return f"median of {runs} run{'' if runs == 1 else 's'}"


def run_worker(module: str, params: dict[str, Any], mode: str, timeout: float) -> dict[str, Any]:
    """
    Run one measurement of C{params} with C{module} in a fresh interpreter.

    @param mode: C{"time"} (no tracemalloc; peak RSS is recorded) or
        C{"mem"} (tracemalloc on).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONHASHSEED", "0")
    command = [sys.executable, "-m", "tests.benchmarks._worker", module, json.dumps(params), mode]
    before = _cpu_sample()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env)
    except subprocess.TimeoutExpired:
        raise RunTimedOut(f"killed after {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RunFailed(f"exit {proc.returncode}: " + " | ".join(tail))
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(_others_cpu(before, _cpu_sample()))
    return result


def _cpu_sample() -> tuple[float, float, float, float] | None:
    """(wall clock, machine-wide busy CPU seconds, steal seconds, CPU seconds of our finished children)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.monotonic(),
        (user + nice + system + irq + softirq) / tick,
        steal / tick,
        children.ru_utime + children.ru_stime,
    )


def _others_cpu(before: tuple[float, ...] | None, after: tuple[float, ...] | None) -> dict[str, float]:
    """
    How many CPUs, on average over a run's whole process, were busy with
    anything but that process (other programs, or the hypervisor's steal).
    """
    if before is None or after is None or after[0] <= before[0]:
        return {}
    wall = after[0] - before[0]
    busy, steal, ours = (a - b for a, b in zip(after[1:], before[1:], strict=True))
    return {"others_cpu": max(busy - ours, 0.0) / wall, "steal_cpu": steal / wall}


@dataclass
class Series:
    """
    One implementation measured at growing sizes.

    @ivar module: the benchmark module the worker imports.
    @ivar params: the fixed parameters; C{size_key} is added per cell.
    @ivar exponent: how run time grows with the size (2 for the quadratic
        peers), used to predict the next size from the last one measured.
    @ivar memory: whether cells get a tracemalloc run.
    """

    module: str
    params: dict[str, Any]
    sizes: Sequence[int]
    size_key: str = "size"
    exponent: float = 1.0
    memory: bool = True


def measure_series(series: Series, opts: Options, progress: str = "") -> list[dict[str, Any]]:
    """Measure C{series} at each size, in increasing order; return one cell per size."""
    cells: list[dict[str, Any]] = []
    last: tuple[int, float] | None = None  # (size, seconds of one run)
    stopped: str | None = None
    for size in series.sizes:
        params = {**series.params, series.size_key: size}
        cell: dict[str, Any] = {"params": params, "size": size}
        cells.append(cell)
        if last is None and series.exponent > 1 and size >= MiB:
            last = _probe(series, params, size, opts, cell)
        predicted = None if last is None else last[1] * (size / last[0]) ** series.exponent
        cell["predicted_s"] = predicted
        if stopped is not None:
            cell.update(status="skip", reason=stopped)
            _estimate(cell, last, series.exponent, size)
            continue
        if predicted is not None and predicted > opts.skip_over:
            cell.update(status="skip", reason=f"predicted {predicted:.0f} s > {opts.skip_over:.0f} s")
            _estimate(cell, last, series.exponent, size)
            continue
        _say(f"{progress} {_describe(params)}", end="")
        _measure_cell(series, params, opts, cell)
        _say(f"  -> {cell['status']} {_short(cell)}")
        if cell["status"] == "ok":
            last = (size, cell["median_s"])
        elif cell["status"] == "killed":
            stopped = "a smaller size was killed at its timeout"
            cell["lower_bound_s"] = opts.timeout
        else:
            stopped = "a smaller size failed"
    return cells


def measure_grid(
    module: str, axis: str, values: Sequence[int], impls: dict[str, Any], sizes: list[int], opts: Options, name: str
) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """
    Measure every implementation in C{impls} (objects with an C{exponent})
    at every size, once per value of the parameter C{axis} (a chunk or piece
    size): C{cells[value][impl]} is that series' list of cells.
    """
    cells: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for value in values:
        cells[value] = {}
        for key, impl in impls.items():
            series = Series(module.rsplit(".", 1)[1], {"impl": key, axis: value}, sizes, exponent=impl.exponent)
            cells[value][key] = measure_series(series, opts, progress=f"[{name}]")
    return cells


def ns_per_byte(cell: dict[str, Any]) -> float | None:
    """The median time of a measured cell per byte of its size, in ns (C{None} if not measured)."""
    if cell.get("status") != "ok":
        return None
    return float(cell["median_s"] * 1e9 / cell["size"])


def peak_ratio(cell: dict[str, Any]) -> float | None:
    """A cell's tracemalloc peak over its size (C{None} if not measured)."""
    peak = cell.get("peak_bytes")
    return None if peak is None else float(peak / cell["size"])


def _probe(series: Series, params: dict[str, Any], size: int, opts: Options, cell: dict[str, Any]) -> tuple[int, float]:
    """Time a quadratic implementation once at 1/16 of its first size, to predict that size."""
    small = max(size // 16, KiB)
    try:
        result = run_worker(series.module, {**params, series.size_key: small}, "time", opts.timeout)
    except (RunFailed, RunTimedOut) as error:
        cell["probe"] = {"size": small, "error": str(error)}
        return small, opts.timeout
    cell["probe"] = {"size": small, "seconds": result["seconds"]}
    return small, result["seconds"]


def _measure_cell(series: Series, params: dict[str, Any], opts: Options, cell: dict[str, Any]) -> None:
    runs: list[dict[str, Any]] = []
    cell["runs"] = runs
    try:
        runs.append(_timed_run(series, params, opts, cell))
        first = runs[0]["seconds"]
        for _ in range(opts.runs_for(first) - 1):
            runs.append(_timed_run(series, params, opts, cell))
        cell["median_s"] = statistics.median(r["seconds"] for r in runs)
        if series.memory and opts.wants_memory_run(first):
            cell["memory_run"] = run_worker(series.module, params, "mem", opts.timeout)
            cell["peak_bytes"] = cell["memory_run"]["peak_bytes"]
        cell["status"] = "ok"
    except RunTimedOut as error:
        cell.update(status="killed", reason=str(error))
    except RunFailed as error:
        cell.update(status="error", reason=str(error))
    rss = [r["rss_delta_bytes"] for r in runs if r.get("rss_delta_bytes") is not None]
    if rss:
        cell["rss_delta_bytes_median"] = statistics.median(rss)
    others = [r["others_cpu"] + r.get("steal_cpu", 0.0) for r in runs if "others_cpu" in r]
    if others:
        cell["others_cpu_median"] = statistics.median(others)


CONTENDED = 0.5
"""A cell whose timed runs shared the machine with more than this many CPUs' worth of other work."""


def contended(cell: dict[str, Any]) -> bool:
    """True when other work on the machine may have inflated this cell's timings."""
    return bool(cell.get("others_cpu_median", 0.0) > CONTENDED)


CONTENDED_NOTE = (
    f"'*': while this cell ran, other processes (or hypervisor steal) kept more than {CONTENDED} CPU busy on "
    "average; its time may be inflated.  Rerun on a quiet machine before drawing conclusions from it."
)


RETRIES = 1
"""How many timed runs of one cell may be redone because other work shared the machine while they ran."""


def _timed_run(series: Series, params: dict[str, Any], opts: Options, cell: dict[str, Any]) -> dict[str, Any]:
    """One timed run; a short one that ran on a busy machine is set aside and redone once per cell."""
    result = run_worker(series.module, params, "time", opts.timeout)
    discarded = cell.setdefault("discarded_runs", [])
    if _busy(result) and result["seconds"] < 10 and len(discarded) < RETRIES:
        discarded.append(result)
        time.sleep(1.0)
        result = run_worker(series.module, params, "time", opts.timeout)
    return result


def _busy(run: dict[str, Any]) -> bool:
    return bool(run.get("others_cpu", 0.0) + run.get("steal_cpu", 0.0) > CONTENDED)


def _estimate(cell: dict[str, Any], last: tuple[int, float] | None, exponent: float, size: int) -> None:
    if last is not None:
        cell["estimated_s"] = last[1] * (size / last[0]) ** exponent


def _describe(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={_human(v) if isinstance(v, int) and v >= KiB else v}" for k, v in params.items())


def _short(cell: dict[str, Any]) -> str:
    if cell["status"] == "ok":
        return f"{len(cell['runs'])} runs, median {cell['median_s']:.3f} s"
    return cell.get("reason", "")


def _say(text: str, end: str = "\n") -> None:
    print(text, end=end, file=sys.stderr, flush=True)


# -- formatting ---------------------------------------------------------


def _human(n: int) -> str:
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


human_size = _human


def sig(x: float) -> str:
    """Three significant digits, as the anchors print them."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 120:
        return f"{seconds / 60:.0f}min"
    return f"{seconds:.0f}s"


def rate(per_second: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if per_second >= scale:
            return f"{per_second / scale:.2f}{unit}" if unit == "M" else f"{per_second / scale:.0f}{unit}"
    return f"{per_second:.0f}"


def per_byte_cell(cell: dict[str, Any], nbytes: int, memory: bool = True) -> str:
    """C{ns/B, peak/S} for a measured cell, or why it has no figure."""
    status = cell.get("status")
    if status == "ok":
        text = f"{sig(cell['median_s'] * 1e9 / nbytes)}{'*' if contended(cell) else ''} ns/B"
        if memory:
            peak = cell.get("peak_bytes")
            text += f", {peak / nbytes:.2f}x" if peak is not None else ", mem n/a"
        return text
    if status == "skip":
        est = cell.get("estimated_s")
        if est is None:
            return "skip"
        return f"skip (est. {sig(est * 1e9 / nbytes)} ns/B, ~{duration(est)})"
    if status == "killed":
        bound = cell.get("lower_bound_s", 0.0)
        return f"killed at {duration(bound)} (> {sig(bound * 1e9 / nbytes)} ns/B)"
    return f"error: {cell.get('reason', '?')[:60]}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# -- acceptance ---------------------------------------------------------


@dataclass
class Criterion:
    """One acceptance ratio: C{value op threshold}, with a note saying where it was read."""

    label: str
    value: float | None
    op: str
    threshold: float
    note: str = ""

    @property
    def passed(self) -> bool | None:
        if self.value is None:
            return None
        return self.value <= self.threshold if self.op == "<=" else self.value >= self.threshold

    def line(self) -> str:
        return targetLine(self.label, self.value, self.op, self.threshold, self.note)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "value": self.value,
            "op": self.op,
            "threshold": self.threshold,
            "passed": self.passed,
            "note": self.note,
        }


TARGETS_SET_ON = "a 2-vCPU Linux VM, CPython 3.11, loopback (the project's reference machine)"
"""Where the acceptance targets were set; a missed target is reported as below target on this machine."""


def targetLine(label: str, value: float | None, op: str, threshold: float, note: str = "") -> str:
    """
    One acceptance line: C{PASS}, C{N/A}, or, for a missed target, the
    figure and "below target on this machine (target set on ...)": the
    targets were set on one reference machine and another may miss them.
    """
    passed = None if value is None else (value <= threshold if op == "<=" else value >= threshold)
    shown = "n/a" if value is None else f"{value:.3f}"
    notes = [note] if note else []
    if passed is False:
        notes.insert(0, f"below target on this machine (target set on {TARGETS_SET_ON})")
    verdict = {True: "PASS", False: "BELOW", None: "N/A "}[passed]
    tail = "".join(f"  ({text})" for text in notes)
    return f"{verdict}  {label}: {shown} (target {op} {threshold}){tail}"


def contention_note(*cells: dict[str, Any]) -> str:
    """A criterion's note when one of the cells it reads was measured on a busy machine."""
    busy = [c for c in cells if contended(c)]
    if not busy:
        return ""
    worst = max(c["others_cpu_median"] for c in busy)
    return f"* measured while other work used up to {worst:.1f} CPU: may be noise"


def any_contended(cells: Iterable[dict[str, Any]]) -> bool:
    return any(contended(c) for c in cells)


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


# -- machine and results ------------------------------------------------


@functools.cache
def machine_info() -> dict[str, Any]:
    """The machine, the versions and the chunkwire commit, as found at the first call (the run's start)."""
    import msgpack  # type: ignore[import-untyped]

    import twisted

    try:
        import foolscap  # type: ignore[import-untyped]

        foolscap_version = foolscap.__version__
    except ImportError:
        foolscap_version = None
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "twisted": twisted.__version__,
        "foolscap": foolscap_version,
        "msgpack": ".".join(map(str, msgpack.version)),
        "platform": platform.platform(),
        "cpu": cpu or platform.processor(),
        "nproc": os.cpu_count(),
        "chunkwire_commit": _git("rev-parse", "HEAD"),
        "framing_uncommitted_changes": bool(_git("status", "--porcelain", "--", "framing")),
    }


def _git(*args: str) -> str | None:
    """Output of a read-only git command, or None outside a checkout."""
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() or None


def machine_line(info: dict[str, Any]) -> str:
    return (
        f"Machine: {info['python']}, Twisted {info['twisted']}, foolscap {info['foolscap']}, "
        f"msgpack {info['msgpack']}; nproc = {info['nproc']}; CPU: {info['cpu']}; {info['platform']}; {info['date']}"
    )


def write_results(name: str, opts: Options, payload: dict[str, Any]) -> Path:
    """Write C{payload} with the machine description to C{<out_dir>/<name>.json}."""
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    path = opts.out_dir / f"{name}.json"
    document = {
        "benchmark": name,
        "machine": machine_info(),
        "options": {"quick": opts.quick, "timeout_s": opts.timeout, "skip_over_s": opts.skip_over},
        **payload,
    }
    path.write_text(json.dumps(document, indent=1, default=_jsonable) + "\n")
    return path


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Criterion):
        return obj.as_dict()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


@dataclass
class BenchResult:
    """What one benchmark hands back to C{__main__}: its printed report and its criteria."""

    name: str
    report: str
    criteria: list[Criterion]
    path: Path


def print_result(result: BenchResult) -> int:
    """Print a benchmark run on its own: machine, report, acceptance lines; return the exit status (1 if one failed)."""
    print(machine_line(machine_info()))
    print(result.report)
    print("\n## Acceptance\n")
    for criterion in result.criteria:
        print(criterion.line())
    print(f"\nResults in {result.path}")
    return 1 if any(c.passed is False for c in result.criteria) else 0


Runner = Callable[[Options], BenchResult]
