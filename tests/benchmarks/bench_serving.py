"""Serving costs: what an interceptor costs per call, and calls/s with 1 and 2 worker processes.

    python -m tests.benchmarks.bench_serving [--quick] [--rounds N] [--duration S] [--baseline DIR]

Part 1, interceptors: one server process per variant answers C{echo(42)}
from one client process (one connection, 32 calls in flight), over loopback
TCP.  Variants: C{none} (no interceptor: today's path), C{prometheus}
(L{protocols.serving.metrics.PrometheusInterceptor}), and, with
C{--baseline DIR} (a checkout of the commit before interceptors existed,
e.g. C{git worktree add /tmp/base 6c3c1bf}), C{baseline}: that commit's
server.  The variants take turns, C{--rounds} times, each measurement a
fresh server and client and C{--duration} seconds after a warm-up, so the
ratios compare figures taken seconds apart.  A ratio is the median of the
per-round ratios.

Part 2, workers: C{serve(..., workers=N)}'s supervisor
(L{protocols.serving._workers.Supervisor}) with 1 and 2 workers, loaded by 2
separate client processes with 4 connections each (32 calls in flight
each).  Reported: calls/s, and CPU seconds per call of the server
processes (workers) and of the clients, read from C{/proc} over the
measured window.  On a 2-core machine the clients compete with the workers
for the cores: see the note printed with the table.

Processes::

    python -c SERVER VARIANT                                    # prints {"port", "pid"}
    python -m tests.benchmarks.bench_serving supervise N        # prints {"port", "pids"}
    python -m tests.benchmarks.bench_serving worker --adopt FD:FAMILY
    python -m tests.benchmarks.bench_serving load PORT SECONDS CONNECTIONS INFLIGHT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..processes import stop
from ._harness import REPO_ROOT, BenchResult, Criterion, Options, markdown_table, print_result, write_results

NAME = "serving"
VARIANTS = ("none", "prometheus")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _env(root: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(root))


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process C{pid}."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


# -- the processes ----------------------------------------------------------------


def _echoRoot() -> Any:
    from protocols import rpc

    class Echo(rpc.Referenceable):
        @rpc.remote
        def echo(self, value: Any) -> Any:
            return value

    return Echo()


SERVER = """
import json, os, sys
from twisted.internet import reactor
from protocols import rpc

class Echo(rpc.Referenceable):
    @rpc.remote
    def echo(self, value):
        return value

variant = sys.argv[1]
options = {}
if variant == "prometheus":
    from prometheus_client import CollectorRegistry
    from protocols.serving.metrics import PrometheusInterceptor
    options["interceptors"] = [PrometheusInterceptor(CollectorRegistry())]
factory = rpc.serverFactory(Echo(), clock=reactor, **options)
port = reactor.listenTCP(0, factory, interface="127.0.0.1")
print(json.dumps({"port": port.getHost().port, "pid": os.getpid()}), flush=True)
reactor.run()
"""
"""One variant's server, run with C{python -c} against a tree's packages (this one's, or the baseline's)."""


def worker(adopt: list[str]) -> None:
    """One worker of the supervisor: serves echo on the adopted sockets."""
    from twisted.internet import reactor

    from protocols import rpc
    from protocols.serving import DrainingService, adoptedEndpoint

    factory = rpc.serverFactory(_echoRoot(), clock=reactor)
    for spec in adopt:
        service = DrainingService(adoptedEndpoint(reactor, spec), factory, 1.0)
        service.startService()
        reactor.addSystemEventTrigger("before", "shutdown", service.stopService)  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]


def supervise(count: int) -> None:
    """A supervisor of C{count} workers on one port: prints the port and the workers' pids, runs until killed."""
    from twisted.internet import reactor

    from protocols.serving._workers import Supervisor

    command = [sys.executable, "-m", "tests.benchmarks.bench_serving", "worker"]
    supervisor = Supervisor(reactor, ["tcp:0:interface=127.0.0.1"], lambda adopt: command + adopt, count, grace=1.0)
    supervisor.startService()
    reactor.addSystemEventTrigger("before", "shutdown", supervisor.stopService)  # type: ignore[attr-defined]
    port = supervisor.listeners[0].address[1]
    pids = [process.pid for process in supervisor.workers.values()]
    print(json.dumps({"port": port, "pids": pids, "pid": os.getpid()}), flush=True)
    reactor.run()  # type: ignore[attr-defined]


def load(port: int, seconds: float, connections: int, inflight: int) -> None:
    """Keep C{inflight} calls in flight on each of C{connections}; print calls made in C{seconds} after a warm-up."""
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred, gatherResults

    from protocols import rpc

    state = {"count": 0, "counting": False, "stop": False}

    def keep(root: Any) -> None:
        def answered(_: Any) -> None:
            if state["counting"]:
                state["count"] += 1
            if not state["stop"]:
                root.callRemote("echo", 42).addCallbacks(answered, _ignore)

        for _ in range(inflight):
            root.callRemote("echo", 42).addCallbacks(answered, _ignore)

    async def main() -> None:
        for _ in range(200):
            try:
                roots = [await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}") for _ in range(connections)]
                break
            except Exception:
                waited: Deferred[None] = Deferred()
                reactor.callLater(0.05, waited.callback, None)  # type: ignore[attr-defined]
                await waited
        for root in roots:
            keep(root)
        warm: Deferred[None] = Deferred()
        reactor.callLater(0.5, warm.callback, None)  # type: ignore[attr-defined]
        await warm
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
        state["counting"] = True
        cpu0, t0 = time.process_time(), time.perf_counter()
        done: Deferred[None] = Deferred()
        reactor.callLater(seconds, done.callback, None)  # type: ignore[attr-defined]
        await done
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        state["counting"] = False
        state["stop"] = True
        print(json.dumps({"calls": state["count"], "seconds": elapsed, "cpu": cpu}), flush=True)
        await gatherResults([root.broker.disconnect() for root in roots])

    def stop(_: Any) -> None:
        # The measuring side may have stopped it already (SIGTERM) once the figures were read.
        if reactor.running:  # type: ignore[attr-defined]
            reactor.stop()  # type: ignore[attr-defined]

    Deferred.fromCoroutine(main()).addBoth(stop)
    reactor.run()  # type: ignore[attr-defined]


def _ignore(_: Any) -> None:
    """Calls still in flight when the load stops fail as the connection closes: expected."""


# -- measuring ----------------------------------------------------------------------


def _start(args: list[str], root: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.benchmarks.bench_serving", *args],
        cwd=root,
        env=_env(root),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, json.loads(process.stdout.readline())


def _measure(port: int, serverPids: list[int], clients: int, connections: int, seconds: float) -> dict[str, Any]:
    """Run C{clients} load processes against C{port} together; calls/s and CPU per call over the window."""
    loads = [_start(["load", str(port), str(seconds), str(connections), "32"], REPO_ROOT)[0] for _ in range(clients)]
    try:
        before = sum(_cpu(pid) for pid in serverPids)
        for process in loads:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in loads:
            assert process.stdout is not None
            results.append(json.loads(process.stdout.readline()))
        server = sum(_cpu(pid) for pid in serverPids) - before
    finally:
        for process in loads:
            # It stops by itself once it has reported (terminating it then would race its own stop).
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                stop(process)
    calls = sum(r["calls"] for r in results)
    elapsed = max(r["seconds"] for r in results)
    return {
        "calls_per_s": calls / elapsed,
        "server_cpu_us_per_call": 1e6 * server / calls,
        "client_cpu_us_per_call": 1e6 * sum(r["cpu"] for r in results) / calls,
        "calls": calls,
    }


def measureVariant(variant: str, seconds: float, baseline: Path | None) -> dict[str, Any]:
    root = baseline if variant == "baseline" and baseline is not None else REPO_ROOT
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, variant], cwd=root, env=_env(root), stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    info = json.loads(server.stdout.readline())
    try:
        return _measure(info["port"], [info["pid"]], 1, 1, seconds)
    finally:
        stop(server)


def measureWorkers(count: int, seconds: float) -> dict[str, Any]:
    supervisor, info = _start(["supervise", str(count)], REPO_ROOT)
    try:
        time.sleep(1.0)  # the workers import and adopt
        return _measure(info["port"], info["pids"], 2, 4, seconds)
    finally:
        stop(supervisor)


def run(
    opts: Options, rounds: int | None = None, duration: float | None = None, baseline: Path | None = None
) -> BenchResult:
    rounds = rounds or (2 if opts.quick else 5)
    duration = duration or (1.0 if opts.quick else 3.0)
    variants = (("baseline",) if baseline is not None else ()) + VARIANTS
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    for index in range(rounds):
        order = variants[index % len(variants) :] + variants[: index % len(variants)]
        for variant in order:
            print(f"  interceptors: round {index + 1}/{rounds} {variant}", file=sys.stderr, flush=True)
            runs[variant].append(measureVariant(variant, duration, baseline))
    workerRuns: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for index in range(max(1, rounds // 2)):
        for count in (1, 2) if index % 2 == 0 else (2, 1):
            print(f"  workers: round {index + 1} with {count}", file=sys.stderr, flush=True)
            workerRuns[count].append(measureWorkers(count, duration))
    return _report(opts, runs, workerRuns, variants, duration)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _report(
    opts: Options,
    runs: dict[str, list[dict[str, Any]]],
    workerRuns: dict[int, list[dict[str, Any]]],
    variants: tuple[str, ...],
    duration: float,
) -> BenchResult:
    def ratioTo(variant: str, reference: str, key: str, invert: bool = False) -> float | None:
        pairs = zip(runs[variant], runs[reference], strict=True)
        values = [(b[key] / a[key]) if invert else (a[key] / b[key]) for a, b in pairs]
        return _median(values) if values else None

    rows = []
    for variant in variants:
        cells = runs[variant]
        rows.append(
            [
                variant,
                f"{_median([c['calls_per_s'] for c in cells]):,.0f}",
                f"{max(c['calls_per_s'] for c in cells):,.0f}",
                f"{_median([c['server_cpu_us_per_call'] for c in cells]):.2f}",
                f"{_median([c['client_cpu_us_per_call'] for c in cells]):.2f}",
            ]
        )
    lines = [
        f"## Interceptors: one client, one connection, 32 calls in flight, echo(42), {duration:g} s each, "
        f"{len(runs[variants[0]])} rounds",
        "",
        markdown_table(
            ["server", "calls/s (median)", "calls/s (best)", "server CPU µs/call", "client CPU µs/call"], rows
        ),
        "",
        "The cost is read from the server's CPU time per call: the calls/s a server can sustain is the inverse, "
        "and unlike the calls/s measured here it does not swing when other work shares the machine's cores.",
    ]
    criteria = []
    pairs = [("prometheus", "none", 0.85, "the Prometheus interceptor / none")]
    if "baseline" in runs:
        pairs.insert(0, ("none", "baseline", 0.95, "no interceptor / before interceptors"))
    for variant, reference, threshold, label in pairs:
        capacity = ratioTo(variant, reference, "server_cpu_us_per_call", invert=True)
        measured = ratioTo(variant, reference, "calls_per_s")
        lines.append(
            f"\n{label}: server calls/s per CPU second {capacity:.3f}; measured calls/s {measured:.3f} "
            "(medians of per-round ratios)"
        )
        criteria.append(Criterion(f"serving: server capacity with {label}", capacity, ">=", threshold))
    rows = []
    for count, cells in workerRuns.items():
        rows.append(
            [
                str(count),
                f"{_median([c['calls_per_s'] for c in cells]):,.0f}",
                f"{max(c['calls_per_s'] for c in cells):,.0f}",
                f"{_median([c['server_cpu_us_per_call'] for c in cells]):.2f}",
                f"{_median([c['client_cpu_us_per_call'] for c in cells]):.2f}",
            ]
        )
    lines += [
        "",
        f"## Workers: 2 client processes × 4 connections × 32 in flight, echo(42), {duration:g} s each (medians)",
        "",
        markdown_table(
            ["workers", "calls/s (median)", "calls/s (best)", "server CPU µs/call (all workers)", "client CPU µs/call"],
            rows,
        ),
        "",
        f"What this can show: on this {os.cpu_count()}-core machine, the server CPU time per call with 2 workers "
        "against 1 (sharing one listening socket adds no work per call), and that 2 workers serve the calls of "
        "2 client processes.  What it cannot show: how calls/s scales with workers given a core each.  The 2 "
        "client processes need about as much CPU per call as the server, and they, the workers and whatever "
        "else runs share the cores, so the calls/s columns measure the machine at that moment as much as the "
        "workers (their spread from run to run shows it).  With a core per worker and the load coming from other "
        "machines, calls/s would be bounded by cores / (server CPU µs per call).  Loopback TCP only: no "
        "network latency or bandwidth, no HAProxy in the path.",
    ]
    report = "\n".join(lines)
    path = write_results(NAME, opts, {"interceptors": runs, "workers": workerRuns, "duration_s": duration})
    return BenchResult(NAME, report, criteria, path)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("supervise", "worker", "load"):
        command, rest = argv[0], argv[1:]
        if command == "supervise":
            supervise(int(rest[0]))
        elif command == "worker":
            worker([rest[i + 1] for i, arg in enumerate(rest) if arg == "--adopt"])
        else:
            load(int(rest[0]), float(rest[1]), int(rest[2]), int(rest[3]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_serving", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout of the commit before interceptors")
    args = parser.parse_args(argv)
    result = run(Options(quick=args.quick), args.rounds, args.duration, args.baseline)
    return print_result(result)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
