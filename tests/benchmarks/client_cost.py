"""What a client process spends on one sequential call: Python calls (sys.setprofile) and instructions (callgrind).

    python -m tests.benchmarks.client_cost [--clients blocking floor] [--calls N] [--no-callgrind]
        [--profile] [--show]

The client-side twin of L{tests.benchmarks.server_cost}: one chunkwire
server process (C{_rpc_peers serve chunkwire}, as C{bench_rpc} starts it)
is called, one call at a time over loopback, by:

  - C{blocking}: L{protocols.blocking}'s C{root.callRemote("echo", value)};
  - C{floor}: the floor client (L{server_cost.FloorCaller}: C{sendall} of
    pre-encoded CALL bytes, C{recv} of the ANSWER), the least any client
    pays for the same exchange.

and reports, per call:

  - Python calls: the Python functions and built-ins the client makes
    (C{sys.setprofile}'s C{call} and C{c_call} events, what cProfile counts),
    over C{10 * calls} calls in this process; C{--show} lists one call's, in
    order; C{--profile} the busiest functions under cProfile;
  - instructions (not with C{--no-callgrind}): two client processes under
    valgrind's callgrind making C{calls} and C{6 * calls} calls after the
    same warm-up (the server runs unobserved), the difference of their
    totals over the difference of their calls, so start-up and shut-down
    cancel out.

Not part of C{python -m tests.benchmarks}: callgrind takes minutes.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from protocols.options import ClientOptions

from ._rpc_peers import PAYLOADS, REPO_ROOT, _childEnv, endProcess
from .server_cost import WARMUP, FloorCaller, _serve

CLIENTS = ("blocking", "floor")


class Caller:
    """One client of kind C{client} connected to C{port}: C{call()} makes one sequential echo call."""

    def __init__(self, client: str, port: int, payload: str = "int") -> None:
        self.value = PAYLOADS[payload]
        self._floor: FloorCaller | None = None
        self._connection: Any = None
        if client == "floor":
            self._floor = FloorCaller(port, payload)
            self.call: Callable[[], Any] = lambda: self._floor.call(1)  # type: ignore[union-attr]
        elif client == "blocking":
            from protocols.blocking import connect

            self._connection = connect(("127.0.0.1", port), options=ClientOptions(timeout=600.0))
            callRemote, value = self._connection.root.callRemote, self.value
            self.call = lambda: callRemote("echo", value)
        else:
            raise ValueError(f"no client {client!r} (one of {', '.join(CLIENTS)})")

    def run(self, count: int) -> None:
        """C{count} calls, each answered before the next."""
        call = self.call
        for _ in range(count):
            call()

    def close(self) -> None:
        if self._floor is not None:
            self._floor.close()
        if self._connection is not None:
            self._connection.close()


def _names(frame: FrameType, event: str, arg: Any) -> str | None:
    if event == "call":
        return f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_code.co_firstlineno})"
    if event == "c_call":
        return f"  {getattr(arg, '__qualname__', arg)}"
    return None


def countCalls(caller: Caller, calls: int) -> tuple[float, list[str]]:
    """Python calls per call over C{calls} calls (after a warm-up), and one call's, in order."""
    caller.run(WARMUP)
    wrapper = caller.call
    seen: list[str] = []

    def one(frame: FrameType, event: str, arg: Any) -> None:
        name = _names(frame, event, arg)
        if name is not None:
            seen.append(name)

    sys.setprofile(one)
    try:
        wrapper()
    finally:
        sys.setprofile(None)
    # (less the wrapper's own frame and the sys.setprofile call that ended the listing)
    listing = seen[1:-1]
    count = 0

    def counting(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" or event == "c_call":
            count += 1

    run = caller.run
    sys.setprofile(counting)
    try:
        run(calls)
    finally:
        sys.setprofile(None)
    # (less, per call, the loop's call of the wrapper; and once, run itself, its range() and sys.setprofile)
    return (count - 3) / calls - 1, listing


def profileCalls(caller: Caller, calls: int, top: int = 30) -> list[tuple[float, float, str]]:
    """The functions called at least once per call under cProfile: calls per call, own µs per call, name."""
    profile = cProfile.Profile()
    profile.enable()
    caller.run(calls)
    profile.disable()
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, function), (_, ncalls, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if ncalls >= calls:
            where = f"{Path(filename).name}:{line}" if line else filename
            rows.append((ncalls / calls, tottime / calls * 1e6, f"{function} ({where})"))
    rows.sort(key=lambda row: -row[1])
    return rows[:top]


_TOTALS = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def callgrindTotal(client: str, port: int, calls: int, payload: str, directory: Path) -> int:
    """All the instructions of one client process of C{client} that made C{WARMUP + calls} calls to C{port}."""
    out = directory / f"callgrind.{client}.{calls}"
    command = [
        *("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", "--dump-line=no"),
        *(sys.executable, "-m", "tests.benchmarks.client_cost", "drive", client, str(port), str(calls), payload),
    ]
    done = subprocess.run(command, cwd=REPO_ROOT, env=_childEnv(), capture_output=True, timeout=1800)
    found = _TOTALS.search(out.read_bytes()) if out.exists() else None
    if done.returncode != 0 or found is None:
        raise RuntimeError(
            f"the {client} client under callgrind failed: {done.stderr[-2000:].decode(errors='replace')}"
        )
    return int(found.group(1))


def instructionsPerCall(client: str, port: int, calls: int, payload: str = "int") -> float:
    """Instructions per call of C{client}'s process: two processes, C{calls} and C{6 * calls} calls, subtracted."""
    with tempfile.TemporaryDirectory() as name:
        few = callgrindTotal(client, port, calls, payload, Path(name))
        many = callgrindTotal(client, port, 6 * calls, payload, Path(name))
    return (many - few) / (5 * calls)


def driveMain(client: str, port: int, calls: int, payload: str) -> None:
    """A client process (run under callgrind): C{WARMUP + calls} calls, then exit."""
    caller = Caller(client, port, payload)
    try:
        caller.run(WARMUP + calls)
    finally:
        caller.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["drive"] and len(argv) == 5:
        driveMain(argv[1], int(argv[2]), int(argv[3]), argv[4])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.client_cost", description=__doc__)
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS), help="clients to count")
    parser.add_argument("--calls", type=int, default=2000, help="calls of the smaller callgrind run (default 2000)")
    parser.add_argument("--payload", choices=sorted(PAYLOADS), default="int")
    parser.add_argument("--no-callgrind", action="store_true", help="skip the instruction counts")
    parser.add_argument("--profile", action="store_true", help="also list the busiest functions (cProfile)")
    parser.add_argument("--show", action="store_true", help="also list one call's Python calls, in order")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)
    if not args.no_callgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (use --no-callgrind)")
    result: dict[str, Any] = {}
    with tempfile.TemporaryFile() as log:
        server, port = _serve(["tests.benchmarks._rpc_peers", "serve", "chunkwire"], log)
        try:
            for client in args.clients:
                figures: dict[str, Any] = {}
                caller = Caller(client, port, args.payload)
                try:
                    figures["python_calls_per_call"], listing = countCalls(caller, 10 * args.calls)
                    if args.show:
                        figures["one_call"] = listing
                    if args.profile:
                        figures["functions"] = profileCalls(caller, 10 * args.calls)
                finally:
                    caller.close()
                if not args.no_callgrind:
                    figures["instructions_per_call"] = instructionsPerCall(client, port, args.calls, args.payload)
                result[client] = figures
                if not args.json:
                    print(_report(client, figures), flush=True)
        finally:
            endProcess(server, timeout=60.0)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


def _report(client: str, figures: dict[str, Any]) -> str:
    lines = [f"{client} client:"]
    lines.append(f"  Python calls per call (client process): {figures['python_calls_per_call']:.1f}")
    if "instructions_per_call" in figures:
        lines.append(f"  instructions per call (client process): {figures['instructions_per_call']:,.0f}")
    if "one_call" in figures:
        lines.append("  one call's Python calls, in order:")
        lines += [f"    {name}" for name in figures["one_call"]]
    if "functions" in figures:
        lines.append("  per call   own µs  function")
        lines += [f"  {count:8.2f} {own:8.2f}  {name}" for count, own, name in figures["functions"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
