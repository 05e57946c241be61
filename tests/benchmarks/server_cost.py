"""What a server process spends on one sequential call: instructions (callgrind) and Python calls (cProfile).

    python -m tests.benchmarks.server_cost [--peers chunkwire twisted-floor] [--calls N] [--no-callgrind]
        [--profile]

Timing on a loaded machine says little; instruction counts say the same
thing every run.  For each peer of L{tests.benchmarks._rpc_peers} (its
server process, as C{bench_rpc} starts it), this drives the server with the
floor client's pre-encoded CALLs, one at a time over loopback, from this
process (no reactor here, no decoding), and reports:

  - instructions per call, from two server processes under valgrind's
    callgrind making C{calls} and C{calls * 6} calls after the same warm-up:
    the difference of their totals over the difference of their calls, so
    start-up and shut-down cancel out;
  - with C{--profile}, the server's Python function calls per call (cProfile,
    one process of C{calls} calls), with the functions called at least once
    per call and their own time: which Python calls a call costs.

The C{twisted-floor} peer is the bound: a bare Twisted protocol answering
each CALL with pre-encoded bytes, so its count is what any Twisted server
pays (reactor turn, epoll, recv, send) and the rest of chunkwire's is its own.
Not part of C{python -m tests.benchmarks}: it needs valgrind and takes
minutes.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._rpc_peers import PAYLOADS, REPO_ROOT, TWISTED_FLOOR, _childEnv, _emit, _Lines, endProcess, floorMessages

WARMUP = 300


class FloorCaller:
    """The floor client's calls from this process: C{call(n)} makes C{n} sequential echo calls of one payload."""

    def __init__(self, port: int, payload: str = "int") -> None:
        from framing.wire import PREAMBLE

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=600.0)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(PREAMBLE)
        preamble = b""
        while len(preamble) < len(PREAMBLE):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection before its preamble")
            preamble += chunk
        if preamble != PREAMBLE:
            raise ConnectionError(f"the server's preamble was {preamble!r}")
        self.message, self.answer = floorMessages()[payload]
        self.value = PAYLOADS[payload]

    def call(self, count: int) -> None:
        """C{count} calls, each answered byte for byte as L{floorMessages} says before the next is sent."""
        sendall, recv, message, answer = self.sock.sendall, self.sock.recv, self.message, self.answer
        size = len(answer)
        for _ in range(count):
            sendall(message)
            data = recv(65536)
            while len(data) < size:
                more = recv(65536)
                if not more:
                    raise ConnectionError("the server closed the connection")
                data += more
            if data != answer:
                raise ValueError(f"the server answered {data!r}, not {answer!r}")

    def close(self) -> None:
        self.sock.close()


def _serve(args: list[str], log: Any, prefix: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], int]:
    """A server process (C{python -m ARGS}, under C{prefix}, e.g. valgrind) and the port it listens on."""
    process = subprocess.Popen(
        [*prefix, sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env=_childEnv(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
    )
    try:
        port = int(_Lines(process, "server").read(600.0)["address"])
    except BaseException:
        endProcess(process)
        raise
    return process, port


def _drive(port: int, calls: int, payload: str) -> None:
    caller = FloorCaller(port, payload)
    try:
        caller.call(WARMUP + calls)
    finally:
        caller.close()


_TOTALS = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def callgrindTotal(peer: str, calls: int, payload: str, directory: Path) -> int:
    """All the instructions of one server process of C{peer} that answered C{WARMUP + calls} calls."""
    out = directory / f"callgrind.{peer}.{calls}"
    prefix = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", "--dump-line=no")
    with tempfile.TemporaryFile() as log:
        process, port = _serve(["tests.benchmarks._rpc_peers", "serve", peer], log, prefix)
        try:
            _drive(port, calls, payload)
        finally:
            endProcess(process, timeout=120.0)
        found = _TOTALS.search(out.read_bytes())
        if found is None:
            log.seek(0)
            raise RuntimeError(f"no totals in {out}: {log.read()[-2000:].decode(errors='replace')}")
    return int(found.group(1))


def instructionsPerCall(peer: str, calls: int, payload: str = "int") -> float:
    """Instructions per call of C{peer}'s server: two processes, C{calls} and C{6 * calls} calls, subtracted."""
    with tempfile.TemporaryDirectory() as name:
        few = callgrindTotal(peer, calls, payload, Path(name))
        many = callgrindTotal(peer, 6 * calls, payload, Path(name))
    return (many - few) / (5 * calls)


def profiledServeMain(peer: str, out: str) -> None:
    """A server process of C{peer} under cProfile (from its first connection on), stats written to C{out} at its end."""
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred, ensureDeferred

    from . import _rpc_peers

    profile = cProfile.Profile()

    async def main() -> None:
        address = await _rpc_peers.listen(reactor, peer)
        _emit({"address": address, "pid": os.getpid()})

    def started(_: object) -> None:
        profile.enable()

    def failed(failure: Any) -> None:
        failure.printTraceback()
        reactor.stop()

    done: Deferred[None] = ensureDeferred(main())
    done.addCallbacks(started, failed)
    reactor.run()
    profile.disable()
    profile.dump_stats(out)


def profileServer(peer: str, calls: int, payload: str = "int", top: int = 40) -> dict[str, Any]:
    """C{peer}'s server under cProfile for C{WARMUP + calls} calls: Python calls per call, and the busiest ones."""
    with tempfile.TemporaryDirectory() as name, tempfile.TemporaryFile() as log:
        out = Path(name) / "profile"
        process, port = _serve(["tests.benchmarks.server_cost", "profiled-serve", peer, str(out)], log)
        try:
            _drive(port, calls, payload)
        finally:
            endProcess(process, timeout=60.0)
        stats = pstats.Stats(str(out))
    total = WARMUP + calls
    rows = []
    perCall = 0.0
    for (filename, line, function), (_, ncalls, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        perCall += ncalls / total
        if ncalls >= total:
            where = f"{Path(filename).name}:{line}" if line else filename
            rows.append((ncalls / total, tottime / total * 1e6, f"{function} ({where})"))
    rows.sort(key=lambda row: -row[1])
    return {"python_calls_per_call": perCall, "functions": rows[:top]}


def main(argv: list[str]) -> int:
    if argv[:1] == ["profiled-serve"] and len(argv) == 3:
        profiledServeMain(argv[1], argv[2])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.server_cost", description=__doc__)
    parser.add_argument("--peers", nargs="+", default=["chunkwire", TWISTED_FLOOR], help="servers to count")
    parser.add_argument("--calls", type=int, default=2000, help="calls of the smaller callgrind run (default 2000)")
    parser.add_argument("--payload", choices=sorted(PAYLOADS), default="int")
    parser.add_argument("--no-callgrind", action="store_true", help="skip the instruction counts")
    parser.add_argument("--profile", action="store_true", help="also count Python calls per call (cProfile)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)
    if not args.no_callgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (use --no-callgrind)")
    result: dict[str, Any] = {}
    for peer in args.peers:
        figures: dict[str, Any] = {}
        if not args.no_callgrind:
            figures["instructions_per_call"] = instructionsPerCall(peer, args.calls, args.payload)
        if args.profile:
            figures.update(profileServer(peer, 10 * args.calls, args.payload))
        result[peer] = figures
        if not args.json:
            print(_report(peer, figures), flush=True)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


def _report(peer: str, figures: dict[str, Any]) -> str:
    lines = [f"{peer}:"]
    if "instructions_per_call" in figures:
        lines.append(f"  instructions per call (server process): {figures['instructions_per_call']:,.0f}")
    if "python_calls_per_call" in figures:
        lines.append(f"  Python calls per call (server process, cProfile): {figures['python_calls_per_call']:.1f}")
        lines.append("  per call   own µs  function")
        lines += [f"  {count:8.2f} {own:8.2f}  {name}" for count, own, name in figures["functions"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
