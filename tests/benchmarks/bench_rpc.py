"""RPC calls per second over loopback TCP: chunkwire, AMP, PB, Foolscap, thriftpy2, grpc.aio and a hand-rolled baseline.

chunkwire is measured three times: with its Twisted client, with its blocking
client (C{protocols.blocking}, no reactor; N in flight is N threads), and with
its asyncio client (C{protocols.asyncioclient}, the standard asyncio loop; N
in flight is N coroutines), all against the same Twisted server.  Beside
them, the two peers whose users need no reactor either (issue 32):
thriftpy2 (blocking, Cython binary protocol, threaded server; N in flight is
N threads with a connection each) and grpc.aio (N in flight is N coroutines on
one channel), measured when the C{bench} extra installed them; their ratios
to the clients without Twisted are issue 32's targets (see C{_rpc_peers}).

    python -m tests.benchmarks.bench_rpc [--quick] [--runs N] [--duration S] [--no-strace]

Every peer answers C{echo(value)} (see C{_rpc_peers}) with its server and its
client in two separate processes on 127.0.0.1.  Four columns: one call in
flight (sequential) and 100 in flight, each with the int 42 and with 1 KiB
of bytes echoed back.  Each run starts a fresh server process and a fresh
client process for every peer; within a run the columns are measured one
after the other, and within a column the peers take turns (their order
rotates from run to run), so the peers that a ratio compares were measured
seconds apart and machine noise spreads over all of them.  Each measurement:
300 sequential warm-up calls, then C{--duration} seconds.  A cell is the
median over runs, with the spread; a ratio is the median of the per-run
ratios.  Every command has a timeout; a peer that misses it loses that run.

Then, unless C{--no-strace}, each peer gets a fresh pair that is traced:
C{strace -f -e trace=sendto,sendmsg,write,writev,epoll_ctl,recvfrom,read,recvmsg}
attached to the server and the client while the client makes exactly N
calls (sequential, then 100 in flight); system calls on descriptors 0-2
(the command pipe) are left out, the rest are divided by N.

Results: the tables on stdout, C{bench-results/rpc.json} (machine, versions,
every run).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ._harness import (
    CONTENDED,
    BenchResult,
    Criterion,
    Options,
    markdown_table,
    median_of,
    print_result,
    write_results,
)
from ._rpc_peers import (
    ALL_PEERS,
    ASYNCIO,
    BLOCKING,
    CODEC_FLOOR,
    FLOOR,
    GRPC,
    LABELS,
    PEERS,
    SEQUENTIAL_ONLY,
    THRIFT,
    TWISTED_FLOOR,
    WITHOUT_TWISTED,
    PeerFailed,
    PeerPair,
)


def _installed(peer: str, module: str) -> tuple[str, ...]:
    """C{(peer,)} if C{module} can be imported (the C{bench} extra installed it), else C{()}."""
    return (peer,) if importlib.util.find_spec(module) is not None else ()


RPC_PEERS = (PEERS[0], BLOCKING, ASYNCIO, *PEERS[1:], *_installed(THRIFT, "thriftpy2"), *_installed(GRPC, "grpc"))
"""
The peers this benchmark measures by default: the others' and, beside chunkwire, its clients without Twisted;
thriftpy2 and grpc.aio if installed.
"""
WITHOUT_REACTOR_RIVALS = ((BLOCKING, THRIFT), (ASYNCIO, GRPC))
"""Each client of chunkwire without Twisted, and the other library's client it is compared with (issue 32)."""
BOUNDS = (
    (BLOCKING, TWISTED_FLOOR),
    (FLOOR, TWISTED_FLOOR),
    (TWISTED_FLOOR, THRIFT),
    (BLOCKING, CODEC_FLOOR),
    (CODEC_FLOOR, TWISTED_FLOOR),
    (CODEC_FLOOR, THRIFT),
)
"""
Ratios shown when both peers are measured: how close the blocking client, and the floor client against chunkwire's
server, come to the floor client against a bare Twisted server; and that bound against thriftpy2; and the blocking
client against a bare Twisted server with chunkwire's codec (the least a Twisted server reading and writing RPC
messages costs) against the others (issue 32).
"""

NAME = "rpc"
COLUMNS = (
    ("seq_int", "int", 1, "sequential int"),
    ("seq_kib", "kib", 1, "sequential 1 KiB"),
    ("w100_int", "int", 100, "100 in flight int"),
    ("w100_kib", "kib", 100, "100 in flight 1 KiB"),
)
RIVALS = ("amp", "pb", "foolscap")
TRACED = "sendto,sendmsg,write,writev,epoll_ctl,recvfrom,read,recvmsg"
SENDS = ("sendto", "sendmsg", "write", "writev")


def settings(opts: Options) -> dict[str, Any]:
    """Runs, seconds per measurement and traced call counts for C{opts}."""
    if opts.quick:
        return {"runs": 3, "duration": 0.5, "warmup": 100, "trace_seq": 500, "trace_window": 5000}
    return {"runs": 5, "duration": 1.5, "warmup": 300, "trace_seq": 2000, "trace_window": 20000}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- calls per second -------------------------------------------------------------------------------


def measureRuns(config: dict[str, Any], peers: tuple[str, ...]) -> list[dict[str, Any]]:
    """C{config["runs"]} runs, each with fresh process pairs; the raw results of each."""
    runs = []
    for index in range(config["runs"]):
        order = peers[index % len(peers) :] + peers[: index % len(peers)]
        runs.append(_oneRun(config, order))
        _say(f"  run {index + 1}/{config['runs']} done")
    return runs


def _oneRun(config: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    pairs: dict[str, PeerPair] = {}
    run: dict[str, Any] = {"order": list(order), "cells": {peer: {} for peer in order}, "errors": {}}
    try:
        for peer in order:
            try:
                pairs[peer] = PeerPair(peer)
            except PeerFailed as error:
                run["errors"][peer] = str(error)
        timeout = config["duration"] + 60
        for column, payload, window, _ in COLUMNS:
            for peer in order:
                pair = pairs.get(peer)
                if pair is None or (window > 1 and peer in SEQUENTIAL_ONLY):
                    continue
                command = {
                    "op": "measure",
                    "payload": payload,
                    "window": window,
                    "duration": config["duration"],
                    "warmup": config["warmup"],
                }
                try:
                    run["cells"][peer][column] = pair.command(command, timeout)
                except PeerFailed as error:
                    run["errors"][peer] = str(error)
                    pairs.pop(peer).close()
    finally:
        for pair in pairs.values():
            pair.close()
    return run


def summarise(runs: list[dict[str, Any]], peers: tuple[str, ...]) -> dict[str, Any]:
    """Median cells over runs, and the medians of the per-run ratios."""
    cells: dict[str, dict[str, Any]] = {}
    for peer in peers:
        cells[peer] = {}
        for column, *_ in COLUMNS:
            found = [run["cells"][peer][column] for run in runs if column in run["cells"].get(peer, {})]
            if not found:
                continue
            rates = [f["calls_per_s"] for f in found]
            cells[peer][column] = {
                "calls_per_s": statistics.median(rates),
                "min": min(rates),
                "max": max(rates),
                "n": len(found),
                "rtt_mean_us": statistics.median(f.get("rtt_mean_us", 0.0) for f in found),
                "rtt_p50_us": statistics.median(f.get("rtt_p50_us", 0.0) for f in found),
                "rtt_p99_us": statistics.median(f.get("rtt_p99_us", 0.0) for f in found),
                "errors": sum(f["errors"] for f in found),
                "others_cpu": statistics.median(f["others_cpu"] for f in found),
                "client_cpu_us": statistics.median(f.get("client_cpu_us", 0.0) for f in found),
                "server_cpu_us": statistics.median(f.get("server_cpu_us", 0.0) for f in found),
            }
    return {"cells": cells, "ratios": _ratios(runs, peers)}


def _ratios(runs: list[dict[str, Any]], peers: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """
    C{ratios["amp"]["seq_int"]}: chunkwire / AMP; C{ratios["handrolled/chunkwire"]} the other way round;
    C{ratios["amp"]["seq_int_wins"]}: C{[runs where the ratio was above 1, runs]};
    C{ratios["chunkwire-blocking/thriftpy2"]}: the blocking client / thriftpy2 (and the asyncio client / grpc.aio).
    """
    pairs = [("chunkwire", peer, peer) for peer in peers if peer not in ("chunkwire", *WITHOUT_TWISTED)]
    pairs.append(("handrolled", "chunkwire", "handrolled/chunkwire"))
    pairs += [(peer, "chunkwire", f"{peer}/chunkwire") for peer in WITHOUT_TWISTED if peer in peers]
    pairs += [
        (mine, theirs, f"{mine}/{theirs}")
        for mine, theirs in (*WITHOUT_REACTOR_RIVALS, *BOUNDS)
        if {mine, theirs} <= set(peers)
    ]
    out: dict[str, dict[str, Any]] = {}
    for mine, theirs, key in pairs:
        out[key] = {}
        for column, *_ in COLUMNS:
            values = []
            for run in runs:
                a = run["cells"].get(mine, {}).get(column)
                b = run["cells"].get(theirs, {}).get(column)
                if a and b and b["calls_per_s"]:
                    values.append(a["calls_per_s"] / b["calls_per_s"])
            out[key][column] = statistics.median(values) if values else None
            out[key][column + "_wins"] = [sum(v > 1 for v in values), len(values)]
    return out


# -- system calls per call -----------------------------------------------------------------------------


_CALL = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((\d+), (?:\w+, (\d+))?")


def parseTrace(path: Path) -> Counter[str]:
    """Count the traced calls in an C{strace -o} file, leaving out descriptors 0-2 (the command pipe)."""
    counts: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        match = _CALL.match(line)
        if match is None:
            continue
        name, fd, target = match.groups()
        if name == "epoll_ctl":
            if target is not None and int(target) > 2:
                counts[name] += 1
        elif int(fd) > 2:
            counts[name] += 1
    return counts


def countSyscalls(peer: str, window: int, calls: int, directory: Path) -> dict[str, Any]:
    """Trace C{peer}'s server and client while the client makes C{calls} calls with C{window} in flight."""
    with PeerPair(peer) as pair:
        pair.command({"op": "measure", "payload": "int", "window": window, "duration": 0.3, "warmup": 200}, 60)
        assert pair.server is not None and pair.client is not None
        tracers = {}
        for role, pid in (("server", pair.server.pid), ("client", pair.client.pid)):
            path = directory / f"{peer}-w{window}-{role}.trace"
            command = ["strace", "-f", "-qq", "-e", f"trace={TRACED}", "-o", str(path), "-p", str(pid)]
            tracers[role] = (subprocess.Popen(command, stderr=subprocess.DEVNULL), path)
        time.sleep(1.0)  # attached long before the first call
        try:
            done = pair.command({"op": "count", "payload": "int", "window": window, "calls": calls}, 300)
        finally:
            for tracer, _ in tracers.values():
                tracer.send_signal(signal.SIGINT)
            for tracer, _ in tracers.values():
                try:
                    tracer.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    tracer.kill()
                    tracer.wait()
    result: dict[str, Any] = {"calls": calls, "window": window, "completed": done["completed"]}
    for role, (_, path) in tracers.items():
        counts = parseTrace(path)
        result[role] = {name: counts[name] / calls for name in TRACED.split(",")}
        result[role]["sends"] = sum(counts[name] for name in SENDS) / calls
    return result


def measureSyscalls(config: dict[str, Any], peers: tuple[str, ...]) -> dict[str, Any]:
    """Send and other system calls per call for every peer, sequential and with 100 in flight."""
    if shutil.which("strace") is None:
        return {"skipped": "strace is not installed"}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cw-strace-") as tmp:
        for peer in peers:
            out[peer] = {}
            for key, window, calls in (("seq", 1, config["trace_seq"]), ("w100", 100, config["trace_window"])):
                if window > 1 and peer in SEQUENTIAL_ONLY:
                    continue
                try:
                    out[peer][key] = countSyscalls(peer, window, calls, Path(tmp))
                except (PeerFailed, OSError) as error:
                    out[peer][key] = {"error": str(error)}
            _say(f"  traced {peer}")
    return out


# -- report ------------------------------------------------------------------------------------------------


def _rate(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "n/a"
    star = "*" if cell["others_cpu"] > CONTENDED else ""
    return f"{cell['calls_per_s']:,.0f}{star} [{cell['min']:,.0f}–{cell['max']:,.0f}]"


def _cpu(cell: dict[str, Any] | None) -> str:
    return "n/a" if not cell else f"{cell['client_cpu_us']:.1f} / {cell['server_cpu_us']:.1f}"


def _wins(wins: list[int]) -> str:
    return f"ahead in {wins[0]}/{wins[1]} runs"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def report(summary: dict[str, Any], syscalls: dict[str, Any], config: dict[str, Any], peers: tuple[str, ...]) -> str:
    cells, ratios = summary["cells"], summary["ratios"]
    header = ["peer", *(label + " calls/s" for *_, label in COLUMNS), "seq int RTT mean / p50 / p99 µs"]
    rows = []
    for peer in peers:
        seq = cells[peer].get("seq_int")
        rtt = "n/a" if not seq else f"{seq['rtt_mean_us']:.0f} / {seq['rtt_p50_us']:.0f} / {seq['rtt_p99_us']:.0f}"
        rows.append([LABELS[peer], *(_rate(cells[peer].get(column)) for column, *_ in COLUMNS), rtt])
    ratio_rows = [
        [
            f"chunkwire / {LABELS[peer]}",
            *(f"{_x(ratios[peer][column])} ({_wins(ratios[peer][column + '_wins'])})" for column, *_ in COLUMNS),
        ]
        for peer in peers
        if peer not in ("chunkwire", "handrolled", *WITHOUT_TWISTED)
    ]
    for peer in WITHOUT_TWISTED:
        if peer in peers:
            ratio_rows.append(
                [
                    f"{LABELS[peer]} / chunkwire (Twisted client)",
                    *(_x(ratios[f"{peer}/chunkwire"][column]) for column, *_ in COLUMNS),
                ]
            )
    for mine, theirs in (*WITHOUT_REACTOR_RIVALS, *BOUNDS):
        if mine in peers and theirs in peers:
            ratio_rows.append(
                [
                    f"{LABELS[mine]} / {LABELS[theirs]}",
                    *(
                        f"{_x(ratios[f'{mine}/{theirs}'][column])} "
                        f"({_wins(ratios[f'{mine}/{theirs}'][column + '_wins'])})"
                        for column, *_ in COLUMNS
                    ),
                ]
            )
    if "handrolled" in peers:
        ratio_rows.append(
            ["hand-rolled / chunkwire", *(_x(ratios["handrolled/chunkwire"][column]) for column, *_ in COLUMNS)]
        )
    cpu_rows = [[LABELS[peer], *(_cpu(cells[peer].get(column)) for column, *_ in COLUMNS)] for peer in peers]
    errors = {peer: sum(c.get("errors", 0) for c in cells[peer].values()) for peer in peers}
    text = [
        "## RPC calls per second over loopback TCP (server and client in separate processes)",
        "",
        f"`echo(42)` and `echo(1 KiB bytes)`; {median_of(config['runs'])} [min–max], each run a fresh "
        f"server + client process pair per peer, peers interleaved; {config['warmup']} warm-up calls, then "
        f"{config['duration']} s per cell.  '*': other work kept > {CONTENDED} CPU busy meanwhile.",
        "",
        markdown_table(header, rows),
        "",
        "Ratios (median of the per-run ratios):",
        "",
        markdown_table(["", *(label for *_, label in COLUMNS)], ratio_rows),
        "",
        "CPU time per call, client / server µs (user + system, /proc, during the timed part; with 100 in flight "
        "the two processes mostly take turns, so calls/s is about 10^6 / (client + server)):",
        "",
        markdown_table(["peer", *(label for *_, label in COLUMNS)], cpu_rows),
        "",
        f"Calls answered wrongly or failed: {errors}.",
    ]
    if syscalls:
        text += ["", *_syscallReport(syscalls, peers)]
    return "\n".join(text)


def _syscallReport(syscalls: dict[str, Any], peers: tuple[str, ...]) -> list[str]:
    if "skipped" in syscalls:
        return [f"System calls: skipped ({syscalls['skipped']})."]
    header = [
        "peer",
        "client sends / call",
        "server sends / answer",
        "epoll_ctl / call (cli, srv)",
        "recvfrom / call (cli, srv)",
        "100 in flight: client sends / call",
        "100 in flight: server sends / answer",
    ]
    rows = []
    for peer in peers:
        seq, win = syscalls.get(peer, {}).get("seq", {}), syscalls.get(peer, {}).get("w100", {})
        if "client" not in seq:
            rows.append([LABELS[peer], seq.get("error", "n/a")[:60], "", "", "", "", ""])
            continue
        cli, srv = seq["client"], seq["server"]
        rows.append(
            [
                LABELS[peer],
                f"{cli['sends']:.3f}",
                f"{srv['sends']:.3f}",
                f"{cli['epoll_ctl']:.2f}, {srv['epoll_ctl']:.2f}",
                f"{cli['recvfrom']:.2f}, {srv['recvfrom']:.2f}",
                f"{win['client']['sends']:.3f}" if "client" in win else "n/a",
                f"{win['server']['sends']:.3f}" if "server" in win else "n/a",
            ]
        )
    return [
        "System calls per call (strace attached to each process during exactly N calls; sends = "
        "sendto + sendmsg + write + writev on the socket):",
        "",
        markdown_table(header, rows),
    ]


def criteria(summary: dict[str, Any], syscalls: dict[str, Any]) -> list[Criterion]:
    ratios = summary["ratios"]
    out = []
    for peer in RIVALS:
        if peer not in ratios:
            continue
        values = {column: ratios[peer][column] for column, *_ in COLUMNS}
        known = {c: v for c, v in values.items() if v is not None}
        worst = min(known, key=lambda c: known[c]) if len(known) == len(values) else None
        value = known[worst] if worst is not None else None
        out.append(
            Criterion(
                f"rpc: chunkwire / {LABELS[peer]}, calls/s, lowest of the 4 columns",
                value,
                ">=",
                1.0,
                f"lowest: {worst}" if worst else "a column is missing",
            )
        )
    blocking = ratios.get(f"{BLOCKING}/chunkwire")
    if blocking is not None:
        out.append(
            Criterion(
                "rpc: chunkwire blocking client / Twisted client, sequential int calls/s (issue 32)",
                blocking["seq_int"],
                ">=",
                1.5,
            )
        )
    asyncio = ratios.get(f"{ASYNCIO}/chunkwire")
    if asyncio is not None:
        out.append(
            Criterion(
                "rpc: chunkwire asyncio client / Twisted client, 100 in flight int calls/s (issue 32)",
                asyncio["w100_int"],
                ">=",
                0.8,
            )
        )
    for mine, theirs, column, target in (
        (BLOCKING, THRIFT, "seq_int", 1.0),
        (ASYNCIO, GRPC, "w100_int", 5.0),
    ):
        rival = ratios.get(f"{mine}/{theirs}")
        if rival is not None:
            out.append(
                Criterion(
                    f"rpc: {LABELS[mine]} / {LABELS[theirs]}, {column} calls/s (issue 32)", rival[column], ">=", target
                )
            )
    if "amp" in ratios:
        for column in ("w100_int", "w100_kib"):
            out.append(Criterion(f"rpc: chunkwire / AMP, {column} calls/s", ratios["amp"][column], ">=", 2.0))
    chunkwire = syscalls.get("chunkwire", {}) if isinstance(syscalls, dict) else {}
    for role, what in (("client", "call"), ("server", "answer")):
        counts = [chunkwire.get(key, {}).get(role, {}).get("sends") for key in ("seq", "w100")]
        value = None if None in counts else max(c for c in counts if c is not None)
        out.append(
            Criterion(
                f"rpc: chunkwire {role} send syscalls per {what} (worst of sequential and 100 in flight)",
                value,
                "<=",
                1.0,
            )
        )
    return out


# -- entry points ----------------------------------------------------------------------------------------------


def run(opts: Options, config: dict[str, Any] | None = None, peers: tuple[str, ...] = RPC_PEERS) -> BenchResult:
    """Measure, print nothing, write C{rpc.json}; hand back the report and the criteria."""
    config = {**settings(opts), **(config or {})}
    started = time.monotonic()
    _say(f"rpc: {config['runs']} runs x {len(peers)} peers x {len(COLUMNS)} columns")
    runs = measureRuns(config, peers)
    summary = summarise(runs, peers)
    syscalls = {} if config.get("no_strace") else measureSyscalls(config, peers)
    result_criteria = criteria(summary, syscalls)
    text = report(summary, syscalls, config, peers)
    path = write_results(
        NAME,
        opts,
        {
            "config": config,
            "peers": list(peers),
            "columns": [list(c) for c in COLUMNS],
            "summary": summary,
            "syscalls": syscalls,
            "runs": runs,
            "criteria": result_criteria,
            "elapsed_s": time.monotonic() - started,
            "load_average": os.getloadavg(),
        },
    )
    return BenchResult(NAME, text, result_criteria, path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_rpc", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 runs of 0.5 s, fewer traced calls")
    parser.add_argument("--runs", type=int, help="runs (default 5; quick 3)")
    parser.add_argument("--duration", type=float, help="seconds per cell (default 1.5; quick 0.5)")
    parser.add_argument("--peers", nargs="+", choices=ALL_PEERS, default=list(RPC_PEERS), help="peers to measure")
    parser.add_argument("--no-strace", action="store_true", help="skip the system-call counts")
    parser.add_argument("--out", type=Path, help="directory for rpc.json (default bench-results/)")
    args = parser.parse_args(argv)
    opts = Options(quick=args.quick)
    if args.out is not None:
        opts.out_dir = args.out
    config: dict[str, Any] = {"no_strace": args.no_strace}
    if args.runs:
        config["runs"] = args.runs
    if args.duration:
        config["duration"] = args.duration
    return print_result(run(opts, config, tuple(args.peers)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
