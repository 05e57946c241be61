"""What a bulk receiver runs in Python per data frame: bytecodes counted, not timed.

    python -m tests.benchmarks.bulk_cost [--size 256M] [--top 25] [--json]

Timing a transfer on a shared VM moves by 10 % from one run to the next,
more than most changes to the receiving path; the interpreter's steps
per MiB received come out within a percent or so of each other.  This starts C{examples/bulk_server.py} in a
process of its own (C{--serve}: the server under a C{sys.settrace} counter
that the orchestrator switches on and off with C{SIGUSR2} and C{SIGUSR1}),
sends it a 1 MiB file with C{examples/bulk_client.py} first (imports and
first-time paths), then counts every Python bytecode (each C{"opcode"}
trace event) the server runs while the CLI sends a C{size}-byte file of
random data from tmpfs, from the command's start to its end, by function.

It reports the bytecodes per MiB received, per data frame (frames: calls
of the decoder's C{open_frame}; a sender short of credit sends some
smaller than 1 MiB), per read (Twisted's C{doRead}) and per piece (the
file service's C{Assembly.write}: a frame cut by a read's end comes in
two pieces), how many of each there were, the core
(compiled or C{CHUNKWIRE_PURE=1}), and the C{top} functions by bytecodes
per frame.  Counted: what runs in functions called after the counter is
switched on (the reactor's own loop, which calls them, is not), the RPC
calls around the stream (C{openUpload}, C{finishUpload}: some thousands
of bytecodes, a few per frame of 256 MiB) included.  Under the counter
the server runs some ten times slower, so its reads take what has arrived
at that pace: compare counts taken alike (the same C{--size}), not with a
run at full speed.  docs/design/bulk.md gives the figures it produced.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from .bench_bulk import ROOT, TMPFS, _env, parseSize, randomFile

MiB = 1 << 20

FRAME = ("framing/_decoder.py", "Decoder.open_frame")
READ = ("twisted/internet/tcp.py", "Connection.doRead")
PIECE = ("protocols/bulk/_files.py", "Assembly.write")
"""The functions whose calls are counted as frames, reads and pieces: C{(path's end, qualified name)}."""


# -- the server's side ------------------------------------------------------------------------------------


class Counter:
    """The bytecodes and calls of every function called while it is on (see L{rows})."""

    def __init__(self) -> None:
        self.bytecodes: collections.Counter[CodeType] = collections.Counter()
        self.calls: collections.Counter[CodeType] = collections.Counter()
        self.names: dict[CodeType, str] = {}

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "opcode":
            self.bytecodes[code] += 1
        elif event == "call":
            frame.f_trace_opcodes = True
            self.calls[code] += 1
            if code not in self.names:
                self.names[code] = qualifiedName(frame)
        return self.trace

    def rows(self) -> list[list[Any]]:
        """C{[bytecodes, calls, file, first line, qualified name]} of each function that ran."""
        return [
            [count, self.calls[code], code.co_filename, code.co_firstlineno, self.names.get(code, code.co_name)]
            for code, count in self.bytecodes.items()
        ]


def qualifiedName(frame: FrameType) -> str:
    """
    The name of the function C{frame} runs, with its class: Python 3.11's
    C{co_qualname}; before it, a method's from the class of its C{self} (or C{cls}).
    """
    code = frame.f_code
    name: str | None = getattr(code, "co_qualname", None)
    if name is not None:
        return name
    if code.co_argcount and code.co_varnames[0] in ("self", "cls"):
        owner = frame.f_locals.get(code.co_varnames[0])
        return f"{(owner if isinstance(owner, type) else type(owner)).__name__}.{code.co_name}"
    return code.co_name


def serve(directory: str) -> None:
    """
    Run C{examples/bulk_server.py} serving C{directory}, with a L{Counter}
    switched on by C{SIGUSR2} (it prints C{"counting"}) and off by C{SIGUSR1}
    (it prints its rows as one JSON line).
    """
    counter = Counter()

    def start(signum: int, frame: Any) -> None:
        sys.settrace(counter.trace)
        print("counting", flush=True)

    def stop(signum: int, frame: Any) -> None:
        sys.settrace(None)
        print(json.dumps(counter.rows()), flush=True)

    signal.signal(signal.SIGUSR2, start)
    signal.signal(signal.SIGUSR1, stop)
    examples = str(ROOT / "examples")
    sys.path.insert(0, examples)
    sys.argv = [f"{examples}/bulk_server.py", "--quiet", "--listen", "tcp:0:interface=127.0.0.1", "--dir", directory]
    import runpy

    runpy.run_path(sys.argv[0], run_name="__main__")


# -- the orchestrator -------------------------------------------------------------------------------------


DEADLINE = 600.0
"""Seconds the server and each command get to answer (a 256 MiB send counted takes a few): only a hang misses it."""


class _Output:
    """The server's output, read a line at a time under a deadline (select on the pipe)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.process, self.fd, self.pending = process, process.stdout.fileno(), b""

    def line(self, wanted: str) -> str:
        """The next line that matches C{wanted}; the lines before it are passed over."""
        deadline = time.monotonic() + DEADLINE
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                if re.search(wanted, text := line.decode()):
                    return text
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"the server printed no line matching {wanted!r} within {DEADLINE:.0f} s")
            if select.select([self.fd], [], [], remaining)[0]:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"the server ended (status {self.process.wait()}) before printing {wanted!r}")
                self.pending += chunk


def _send(port: str, path: Path) -> None:
    """Send C{path} with the CLI, as a user does; raise if the command fails."""
    command = [sys.executable, "examples/bulk_client.py", "--connect", f"tcp:host=127.0.0.1:port={port}"]
    done = subprocess.run(
        [*command, "send", str(path)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=DEADLINE
    )
    if done.returncode:
        raise RuntimeError(f"bulk_client.py send {path.name} failed: {done.stderr.strip()[-500:]}")


def _matches(row: list[Any], which: tuple[str, str]) -> bool:
    return bool(row[2].endswith(which[0]) and row[4] == which[1])


def measure(size: int, top: int = 25) -> dict[str, Any]:
    """Count what the server runs while it receives C{size} bytes from the CLI (see the module docstring)."""
    where = TMPFS if TMPFS.is_dir() else None
    with tempfile.TemporaryDirectory(prefix="chunkwire-bulk-cost-", dir=where) as work:
        served = Path(work) / "served"
        served.mkdir()
        warm, source = randomFile(Path(work) / "warm.bin", MiB), randomFile(Path(work) / "source.bin", size)
        command = [sys.executable, "-m", "tests.benchmarks.bulk_cost", "--serve", str(served)]
        server = subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE)
        output = _Output(server)
        try:
            port = re.findall(r"port=(\d+)\)", output.line(r"listening on .*port=\d+\)"))[0]
            _send(port, warm)
            server.send_signal(signal.SIGUSR2)
            output.line("^counting$")
            _send(port, source)
            server.send_signal(signal.SIGUSR1)
            rows = json.loads(output.line(r"^\["))
        finally:
            server.terminate()
            server.wait(timeout=60)
    total = sum(row[0] for row in rows)
    counts = {
        name: sum(row[1] for row in rows if _matches(row, which))
        for name, which in (("frames", FRAME), ("reads", READ), ("pieces", PIECE))
    }
    if not all(counts.values()):
        raise RuntimeError(f"nothing counted as a frame, a read or a piece: {counts}")
    frames = counts["frames"]
    rows.sort(key=lambda row: -row[0])
    return {
        "size": size,
        "core": "pure" if os.environ.get("CHUNKWIRE_PURE") else "compiled",
        **counts,
        "bytecodes": total,
        "per_mib": total / (size / MiB),
        "per_frame": total / frames,
        "per_read": total / counts["reads"],
        "per_piece": total / counts["pieces"],
        "top": [
            {
                "bytecodes_per_frame": count / frames,
                "calls_per_frame": calls / frames,
                "function": f"{_short(path)}:{line} {name}",
            }
            for count, calls, path, line, name in rows[:top]
        ],
    }


def _short(path: str) -> str:
    """A function's file as the repository or site-packages names it."""
    for mark in ("site-packages/", f"{ROOT}/"):
        if mark in path:
            return path.split(mark, 1)[1]
    return path


def report(result: dict[str, Any]) -> str:
    """The figures as lines of text."""
    lines = [
        f"{result['size'] / MiB:.0f} MiB received ({result['core']} core): "
        f"{result['per_mib']:,.0f} bytecodes per MiB; per data frame {result['per_frame']:,.0f}, "
        f"per read {result['per_read']:,.0f}, per piece {result['per_piece']:,.0f} "
        f"({result['frames']} frames, {result['reads']} reads, {result['pieces']} pieces)",
        "bytecodes/frame  calls/frame  function",
    ]
    lines += [
        f"{row['bytecodes_per_frame']:15,.1f} {row['calls_per_frame']:12.2f}  {row['function']}"
        for row in result["top"]
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=parseSize, default=256 * MiB, help="bytes sent, e.g. 256M (default)")
    parser.add_argument("--top", type=int, default=25, help="functions listed (default 25)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)  # (the server's process)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return
    result = measure(args.size, args.top)
    print(json.dumps(result, indent=1) if args.json else report(result))


if __name__ == "__main__":
    main()
