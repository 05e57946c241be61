"""RPC over a 100 ms RTT link: connect to first answer, sequential calls, a window of 100.

    python -m tests.benchmarks.bench_latency [--quick] [--runs N] [--calls N]

This kernel has no netem, so the link is C{tests.delayproxy.DelayProxy}: a
userspace TCP proxy on 127.0.0.1 that holds each direction's bytes for 50 ms
(RTT = 100 ms).  The proxy accepts at once, so the TCP handshake adds no
delay and is not counted.  For each peer (see C{_rpc_peers}) and run: a
fresh server process, a fresh proxy and client in this process.  Measured:

  - connect → first answer: from calling the peer's connect to the answer of
    the first C{echo(42)} made as soon as the connection is usable; chunkwire
    sends its preamble with that call and waits for nothing, so 1 RTT;
  - sequential: the mean of C{--calls} sequential calls after that, in RTTs;
  - 100 in flight: calls/s for 2 s (the ideal is 1,000).

Each figure: median over runs.  Results: C{bench-results/latency.json}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from ..delayproxy import DelayProxy
from ._rpc_peers import (
    LABELS,
    PAYLOADS,
    PEERS,
    RAW,
    Load,
    OthersCpu,
    ServerProcess,
    _childEnv,
    _Lines,
    connect,
    endProcess,
)

NAME = "latency"
DELAY = 0.05
RTT = 2 * DELAY
ROOT = Path(__file__).resolve().parents[2]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _throughProxy(peer: str, address: str, proxyPort: int) -> str:
    if peer == "foolscap":
        return re.sub(r":\d+/", f":{proxyPort}/", address, count=1)
    return str(proxyPort)


class ProxyProcess:
    """C{python -m tests.delayproxy PORT DELAY} in its own process (select reactor: microsecond timers)."""

    def __init__(self, target: int, delay: float) -> None:
        self.process: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "tests.delayproxy", str(target), str(delay)],
            cwd=ROOT,
            env=_childEnv(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        try:
            self.port: int = _Lines(self.process, "delay proxy").read(30)["port"]
        except BaseException:
            self.close()
            raise

    async def stop(self) -> None:
        self.close()

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            endProcess(process)


async def measurePeer(reactor: Any, peer: str, config: dict[str, Any]) -> dict[str, Any]:
    """One run for C{peer}: a fresh server process, a fresh proxy, a fresh connection."""
    server = ServerProcess(peer)
    proxy: Any = None
    client = None
    try:
        target = server.address
        port = int(target.rsplit(":", 1)[1].split("/")[0]) if peer == "foolscap" else int(target)
        if config["proxy"] == "process":
            proxy = ProxyProcess(port, DELAY)
            proxy_port = proxy.port
        else:
            proxy = DelayProxy(reactor, port, DELAY, record=False)
            proxy_port = await proxy.start()
        value = PAYLOADS["int"]
        started = time.perf_counter()
        client = await connect(reactor, peer, _throughProxy(peer, target, proxy_port))
        connected = time.perf_counter()
        call = client.calls["int"]
        assert await call(value) == value
        first = time.perf_counter()
        pids = [os.getpid(), server.pid]
        if isinstance(proxy, ProxyProcess) and proxy.process is not None:
            pids.append(proxy.process.pid)
        watch = OthersCpu(pids)
        sequential = await Load(call, value, 1, total=config["calls"]).start()
        others = watch.stop()
        window = await Load(call, value, 100, deadline=time.perf_counter() + config["window_s"], keepRtts=False).start()
        return {
            "connect_s": connected - started,
            "first_answer_s": first - started,
            "first_answer_rtts": (first - started) / RTT,
            "sequential_s": sequential.last - sequential.started,
            "sequential_rtts": (sequential.last - sequential.started) / sequential.answered / RTT,
            "window_calls_per_s": window.callsPerSecond,
            "others_cpu": others,
            "errors": sequential.errors + window.errors,
        }
    finally:
        if client is not None:
            closing = client.close()
            if isinstance(closing, Deferred):
                await closing
        if proxy is not None:
            await proxy.stop()
        server.close()


def preimport() -> None:
    """Import every peer's modules before any clock starts: import time is not latency."""
    import foolscap.api  # type: ignore[import-untyped]  # noqa: F401
    import msgpack  # type: ignore[import-untyped]  # noqa: F401
    import twisted.protocols.amp  # noqa: F401
    import twisted.spread.pb  # noqa: F401

    import protocols.rpc  # noqa: F401


async def measureAll(reactor: Any, config: dict[str, Any]) -> dict[str, Any]:
    preimport()
    peers = [RAW, *config["peers"]]
    runs: dict[str, list[dict[str, Any]]] = {peer: [] for peer in peers}
    for index in range(config["runs"]):
        for peer in peers:
            try:
                result = await Deferred.fromCoroutine(measurePeer(reactor, peer, config)).addTimeout(60, reactor)
            except Exception as error:
                result = {"error": f"{type(error).__name__}: {error}"}
            runs[peer].append(result)
            _say(f"  {peer} run {index + 1}: {result.get('first_answer_rtts', 0):.2f} RTT to first answer")
    return runs


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for peer, results in runs.items():
        good = [r for r in results if "error" not in r]
        if not good:
            out[peer] = {"error": results[0]["error"] if results else "not run"}
            continue
        out[peer] = {
            key: statistics.median(r[key] for r in good)
            for key in ("first_answer_s", "first_answer_rtts", "sequential_rtts", "window_calls_per_s", "others_cpu")
        }
        out[peer]["sequential_ms"] = out[peer]["sequential_rtts"] * RTT * 1000
        out[peer]["runs"] = len(good)
        out[peer]["errors"] = sum(r["errors"] for r in good)
    link = out.get(RAW, {}).get("sequential_rtts")
    for cell in out.values():
        if "error" not in cell and link:
            cell["over_link"] = cell["sequential_rtts"] / link
    return out


def report(summary: dict[str, Any], config: dict[str, Any]) -> str:
    from ._harness import markdown_table

    rows = []
    for peer, cell in summary.items():
        if "error" in cell:
            rows.append([LABELS[peer], cell["error"][:60], "", "", "", "", "", ""])
            continue
        rows.append(
            [
                LABELS[peer],
                f"{cell['first_answer_s'] * 1000:.1f}",
                f"{cell['first_answer_rtts']:.3f}",
                f"{cell['sequential_ms']:.1f}",
                f"{cell['sequential_rtts']:.4f}",
                f"{cell['over_link']:.4f}" if "over_link" in cell else "n/a",
                f"{cell['window_calls_per_s']:,.0f}",
                f"{cell['others_cpu']:.2f}",
            ]
        )
    header = [
        "peer",
        "connect → first answer ms",
        "≈ RTTs",
        "sequential ms per call",
        "RTTs per call",
        "per call / raw link's",
        "100 in flight calls/s (ideal 1,000)",
        "other CPU",
    ]
    return "\n".join(
        [
            "## RPC over a 100 ms RTT link (userspace delay proxy on loopback, 50 ms each way)",
            "",
            f"Median of {config['runs']} runs, each a fresh server process, proxy and connection; "
            f"{config['calls']} sequential `echo(42)` calls; 100 in flight for {config['window_s']} s.  "
            "The proxy accepts at once: the TCP handshake is not counted.  The raw TCP echo row is the link "
            "itself (8 bytes echoed by a bare Protocol): what the proxy and the two reactors add.  'other CPU': "
            "CPUs busy with other work during the sequential calls.",
            "",
            markdown_table(header, rows),
        ]
    )


def criteria(summary: dict[str, Any]) -> list[Any]:
    from ._harness import Criterion

    cell = summary.get("chunkwire", {})
    link = summary.get(RAW, {}).get("sequential_rtts")
    note = ""
    if link and "over_link" in cell:
        note = f"the raw link itself: {link:.4f} RTT; chunkwire / link {cell['over_link']:.4f}"
    return [
        Criterion(
            "latency: chunkwire connect → first answer, in RTTs (1 RTT: nothing waits for the server)",
            cell.get("first_answer_rtts"),
            "<=",
            1.5,
        ),
        Criterion("latency: chunkwire sequential call, RTTs per call", cell.get("sequential_rtts"), "<=", 1.02, note),
    ]


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"runs": 1, "calls": 10, "window_s": 1.0, "peers": list(PEERS), "proxy": "process"}
    return {"runs": 3, "calls": 30, "window_s": 2.0, "peers": list(PEERS), "proxy": "process"}


def run(opts: Any) -> Any:
    """
    The entry point for C{python -m tests.benchmarks}: run this benchmark in a
    fresh process (it owns a reactor) and hand back its report and criteria.
    """
    from ._harness import BenchResult

    path = Path(opts.out_dir) / f"{NAME}.json"
    command = [sys.executable, "-m", "tests.benchmarks.bench_latency", "--json", str(path)]
    if opts.quick:
        command.append("--quick")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    subprocess.run(command, cwd=ROOT, env=env, check=False, stdout=subprocess.DEVNULL, timeout=900)
    document = json.loads(path.read_text())
    return BenchResult(NAME, report(document["summary"], document["config"]), criteria(document["summary"]), path)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_latency", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one run, 10 sequential calls")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--calls", type=int)
    parser.add_argument("--peers", nargs="+", choices=PEERS)
    parser.add_argument(
        "--proxy",
        choices=("process", "inline"),
        help="the delay proxy in its own process on the select reactor (default), or in this one",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "bench-results" / f"{NAME}.json")
    args = parser.parse_args(argv)
    config = settings(args.quick)
    for key in ("runs", "calls", "peers", "proxy"):
        if getattr(args, key):
            config[key] = getattr(args, key)

    async def body(reactor: Any) -> None:
        from ._harness import Options, machine_info, machine_line, write_results

        print(machine_line(machine_info()))
        runs = await measureAll(reactor, config)
        summary = summarise(runs)
        found = criteria(summary)
        print(report(summary, config))
        print("\n## Acceptance\n")
        for criterion in found:
            print(criterion.line())
        opts = Options(quick=args.quick, out_dir=args.json.parent)
        written = write_results(
            args.json.stem,
            opts,
            {"config": config, "delay_s": DELAY, "summary": summary, "runs": runs, "criteria": found},
        )
        print(f"\nResults in {written}")

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
