"""Echo over loopback TCP: chunkwire beside AMP and Int32StringReceiver + msgpack.

    python -m tests.benchmarks.bench_echo [--duration 1] [--runs 5]

Each peer's server runs in its own process on 127.0.0.1; the client runs in
this process and drives every peer with the same callback loop.  For each run
and mode, sequential (one object in flight) then windowed (C{--window},
default 100, in flight), each peer in turn echoes a small object (the int 42,
which every peer can carry) after a warm-up, for C{--duration} seconds.  The
table shows medians over runs; the ratios to AMP are the median of each run's
ratio, so that load drifting between runs (other work on the machine) cancels
out.  Results go to C{bench-results/echo.json}.

Contract: the three servers do the same work per object: decode it, encode it,
write it back (AMP parses and serializes a box, msgpack unpacks and packs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory
from twisted.internet.task import react
from twisted.protocols import amp
from twisted.protocols.basic import Int32StringReceiver

from ._harness import median_of

ROOT = Path(__file__).resolve().parents[2]
PEERS = ("chunkwire", "amp", "int32+msgpack")
PAYLOAD = 42

Call = Callable[[Any], Deferred[Any]]


# -- the peers ------------------------------------------------------------------------


class Echo(amp.Command):
    arguments = [(b"value", amp.Integer())]
    response = [(b"value", amp.Integer())]


class AMPEchoServer(amp.AMP):
    @Echo.responder
    def echo(self, value: int) -> dict[str, int]:
        return {"value": value}


class MsgpackEchoServer(Int32StringReceiver):
    def stringReceived(self, string: bytes) -> None:
        import msgpack

        self.sendString(msgpack.packb(msgpack.unpackb(string)))


class MsgpackEchoClient(Int32StringReceiver):
    def __init__(self) -> None:
        import msgpack

        self.pending: deque[Deferred[Any]] = deque()
        self._pack, self._unpack = msgpack.packb, msgpack.unpackb

    def call(self, obj: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.pending.append(d)
        self.sendString(self._pack(obj))
        return d

    def stringReceived(self, string: bytes) -> None:
        self.pending.popleft().callback(self._unpack(string))


def serverFactory(peer: str) -> Factory:
    if peer == "chunkwire":
        from protocols.echo import serverFactory as chunkwireFactory

        return chunkwireFactory()
    if peer == "amp":
        return Factory.forProtocol(AMPEchoServer)
    return Factory.forProtocol(MsgpackEchoServer)


async def connectPeer(reactor: Any, peer: str, port: int) -> Call:
    """Connect to C{peer}'s server; return its one-object echo call."""
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    if peer == "chunkwire":
        from protocols.echo import EchoClient

        client = await connectProtocol(endpoint, EchoClient())
        return client.echo
    if peer == "amp":
        proto = await connectProtocol(endpoint, amp.AMP())
        return lambda value: proto.callRemote(Echo, value=value).addCallback(lambda box: box["value"])
    msgpack_client = await connectProtocol(endpoint, MsgpackEchoClient())
    return msgpack_client.call


# -- the server process ----------------------------------------------------------------


def serveForever(peer: str) -> None:
    """Listen on an ephemeral loopback port, print it, serve until terminated."""

    async def serve(reactor: Any) -> None:
        port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(serverFactory(peer))
        print(port.getHost().port, flush=True)
        await Deferred()

    react(lambda reactor: Deferred.fromCoroutine(serve(reactor)))


def startServer(peer: str) -> tuple[subprocess.Popen[str], int]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.benchmarks.bench_echo", "--serve", peer],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        raise RuntimeError(f"{peer} server did not start: {line!r}")
    return process, int(line)


# -- measuring ---------------------------------------------------------------------------


def measure(call: Call, window: int, duration: float) -> Deferred[tuple[float, float, int]]:
    """
    Keep C{window} calls in flight for C{duration} seconds.

    @return: a L{Deferred} firing with (objects per second, mean round trip
        in seconds, calls completed).
    """
    done: Deferred[tuple[float, float, int]] = Deferred()
    clock = time.perf_counter
    started = clock()
    deadline = started + duration
    state = {"completed": 0, "rtt": 0.0, "outstanding": 0, "last": started}

    def send() -> None:
        state["outstanding"] += 1
        call(PAYLOAD).addCallback(received, clock()).addErrback(done.errback)

    def received(answer: Any, sentAt: float) -> None:
        now = clock()
        if answer != PAYLOAD:
            raise AssertionError(f"echo returned {answer!r}")
        state["completed"] += 1
        state["rtt"] += now - sentAt
        state["outstanding"] -= 1
        state["last"] = now
        if now < deadline:
            send()
        elif not state["outstanding"] and not done.called:
            completed = int(state["completed"])
            done.callback((completed / (state["last"] - started), state["rtt"] / completed, completed))

    for _ in range(window):
        send()
    return done


async def warmUp(call: Call, count: int) -> None:
    for _ in range(count):
        await call(PAYLOAD)


async def runAll(reactor: Any, args: argparse.Namespace) -> dict[str, Any]:
    servers = {peer: startServer(peer) for peer in PEERS}
    try:
        calls = {peer: await connectPeer(reactor, peer, port) for peer, (_, port) in servers.items()}
        raw: dict[str, dict[str, list[tuple[float, float, int]]]] = {
            peer: {"sequential": [], "window": []} for peer in PEERS
        }
        for run in range(args.runs):
            # The peers' measurements of one mode sit side by side in time, so
            # that the per-run ratios compare like with like on a busy machine.
            for mode, window in (("sequential", 1), ("window", args.window)):
                for peer in PEERS:
                    await warmUp(calls[peer], args.warmup)
                    raw[peer][mode].append(await measure(calls[peer], window, args.duration))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)
        return raw
    finally:
        for process, _ in servers.values():
            process.terminate()
        for process, _ in servers.values():
            process.wait(timeout=10)


def summarise(raw: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for peer, modes in raw.items():
        results[peer] = {}
        for mode, runs in modes.items():
            results[peer][mode] = {
                "objects_per_s": statistics.median(r[0] for r in runs),
                "mean_rtt_us": statistics.median(r[1] for r in runs) * 1e6,
                "runs": [{"objects_per_s": r[0], "mean_rtt_us": r[1] * 1e6, "completed": r[2]} for r in runs],
            }
    # Each run's ratio to AMP, then the median: drift in machine load between
    # runs cancels out of a ratio taken within one run.
    ratios = {
        peer: {
            mode: statistics.median(
                mine[0] / amp[0] for mine, amp in zip(raw[peer][mode], raw["amp"][mode], strict=True)
            )
            for mode in ("sequential", "window")
        }
        for peer in raw
    }
    return {
        "benchmark": "echo over loopback TCP",
        "payload": repr(PAYLOAD),
        "config": {
            "duration_s": args.duration,
            "runs": args.runs,
            "warmup_calls": args.warmup,
            "window": args.window,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "results": results,
        "ratio_vs_amp": ratios,
        "targets": {
            "sequential_at_least_amp": ratios["chunkwire"]["sequential"] >= 1.0,
            "window_at_least_1.5x_amp": ratios["chunkwire"]["window"] >= 1.5,
        },
    }


def table(summary: dict[str, Any]) -> str:
    """The results as a Markdown table, with the acceptance verdicts under it."""
    config = summary["config"]
    window = config["window"]
    lines = [
        f"Echo over loopback TCP, payload {summary['payload']}, each server in its own process;"
        f" {median_of(config['runs'])} of {config['duration_s']} s (ratios: median of each run's ratio);"
        f" load average at the end {config['load_average'][0]:.1f} on {config['cpus']} CPUs.",
        "",
        f"| peer | sequential obj/s | sequential mean RTT us | {window} in flight obj/s"
        f" | {window} in flight mean RTT us | sequential vs AMP | {window} in flight vs AMP |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for peer, modes in summary["results"].items():
        seq, win = modes["sequential"], modes["window"]
        ratio = summary["ratio_vs_amp"][peer]
        lines.append(
            f"| {peer} | {seq['objects_per_s']:,.0f} | {seq['mean_rtt_us']:,.0f} | {win['objects_per_s']:,.0f}"
            f" | {win['mean_rtt_us']:,.0f} | {ratio['sequential']:.2f}x | {ratio['window']:.2f}x |"
        )
    targets = summary["targets"]
    lines += [
        "",
        f"Targets: sequential >= AMP: {'met' if targets['sequential_at_least_amp'] else 'NOT met'};"
        f" {window} in flight >= 1.5x AMP: {'met' if targets['window_at_least_1.5x_amp'] else 'NOT met'}.",
    ]
    return "\n".join(lines)


def run(opts: Any) -> Any:
    """
    The entry point for C{python -m tests.benchmarks}: run this benchmark in a
    fresh process (it owns a reactor) and hand back its report and criteria.

    @param opts: the harness's C{Options}.
    @return: the harness's C{BenchResult}.
    """
    from ._harness import BenchResult, Criterion

    path = Path(opts.out_dir) / "echo.json"
    command = [sys.executable, "-m", "tests.benchmarks.bench_echo", "--json", str(path)]
    if opts.quick:
        command += ["--duration", "0.3", "--runs", "3", "--warmup", "100"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, timeout=600)
    summary = json.loads(path.read_text())
    ratios = summary["ratio_vs_amp"]["chunkwire"]
    window = summary["config"]["window"]
    criteria = [
        Criterion("echo: sequential objects/s, chunkwire / AMP", ratios["sequential"], ">=", 1.0),
        Criterion(f"echo: {window} in flight objects/s, chunkwire / AMP", ratios["window"], ">=", 1.5),
    ]
    return BenchResult("echo", table(summary), criteria, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per measurement (default 1)")
    parser.add_argument("--runs", type=int, default=5, help="runs, peers round-robin within each (default 5)")
    parser.add_argument("--warmup", type=int, default=300, help="calls before each measurement (default 300)")
    parser.add_argument("--window", type=int, default=100, help="calls in flight when windowed (default 100)")
    parser.add_argument("--json", default=str(ROOT / "bench-results" / "echo.json"), help="where to write results")
    parser.add_argument("--serve", choices=PEERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serveForever(args.serve)
        return

    async def run(reactor: Any) -> None:
        summary = summarise(await runAll(reactor, args), args)
        print(table(summary))
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"wrote {path}")

    # react() exits the process when run() ends.
    react(lambda reactor: Deferred.fromCoroutine(run(reactor)))


if __name__ == "__main__":
    main()
