"""The CPU a bulk_client.py command costs, from its start to its exit, on the blocking client and on Twisted.

    python -m tests.benchmarks.cli_cpu [--size 1G] [--runs 5] [--commands fetch,send,list]

One C{examples/bulk_server.py} serves a directory in tmpfs; each command
(C{send} of the benchmark's tmpfs file, C{fetch} of it into a fresh tmpfs
file, C{list}) runs as a fresh process, in turn on each path: C{blocking}
(a C{tcp:host=H:port=P} endpoint: L{protocols.blockingbulk}, no Twisted
loaded) and C{twisted} (the same address as a positional C{tcp:H:P}
endpoint, which only Twisted reads).  The figures are the command's own
user and system CPU (C{os.wait4}), the median of C{--runs}; a C{list}'s
is the start-up and exit, which a transfer's includes.  CPU, unlike wall
time, stays honest on a loaded machine (though not exact: memory
contention inflates it); the paths alternate so drift falls on both.
Bytecode is cached as the benchmarks cache it (L{bench_bulk._env}).

Not part of C{python -m tests.benchmarks}; its figures are quoted in commit messages.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .bench_bulk import ROOT, TMPFS, _env, _listeningPort, cliSource, parseSize

PATHS = ("blocking", "twisted")


def commandCpu(endpoint: str, arguments: list[str]) -> tuple[float, float]:
    """Run C{bulk_client.py --connect ENDPOINT ARGUMENTS} to its end; its user and system CPU seconds."""
    command = [sys.executable, "examples/bulk_client.py", "--connect", endpoint, *arguments]
    process = subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{' '.join(arguments)} exited with {process.returncode}")
    return usage.ru_utime, usage.ru_stime


def measure(size: int, runs: int, commands: list[str]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each command's CPU on each path, C{runs} times, the paths in turn."""
    source = cliSource(size)
    served = Path(tempfile.mkdtemp(prefix="chunkwire-clicpu-served-", dir=TMPFS))
    fetched = Path(tempfile.mkdtemp(prefix="chunkwire-clicpu-fetched-", dir=TMPFS)) / source.name
    listen = ["--listen", "tcp:0:interface=127.0.0.1", "--dir", str(served)]
    server = subprocess.Popen(
        [sys.executable, "examples/bulk_server.py", *listen], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        port = _listeningPort(server.stdout)
        endpoints = {"blocking": f"tcp:host=127.0.0.1:port={port}", "twisted": f"tcp:127.0.0.1:{port}"}
        commandCpu(endpoints["blocking"], ["send", str(source)])  # (what fetch and list find)
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(runs):
            for name in commands:
                for path in PATHS:
                    if name == "send":
                        for held in served.iterdir():
                            if held.is_file():
                                held.unlink()
                        arguments = ["send", str(source)]
                    elif name == "fetch":
                        fetched.unlink(missing_ok=True)
                        arguments = ["fetch", source.name, "--output", str(fetched)]
                    else:
                        arguments = ["list"]
                    figures.setdefault((name, path), []).append(commandCpu(endpoints[path], arguments))
        return figures
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(served, ignore_errors=True)
        shutil.rmtree(fetched.parent, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1G", help="the file sent and fetched (default 1G)")
    parser.add_argument("--runs", type=int, default=5, help="commands of each kind on each path (default 5)")
    parser.add_argument("--commands", default="fetch,send,list", help="of fetch, send, list (default all three)")
    args = parser.parse_args(argv)
    commands = args.commands.split(",")
    if set(commands) - {"fetch", "send", "list"}:
        parser.error("--commands: fetch, send and list only")
    size = parseSize(args.size)
    print(f"| command | path | user s | system s | user + system s (median of {args.runs}) |")
    print("|---|---|---:|---:|---:|")
    for (name, path), values in measure(size, args.runs, commands).items():
        user = statistics.median(value[0] for value in values)
        system = statistics.median(value[1] for value in values)
        total = statistics.median(sum(value) for value in values)
        label = name if name == "list" else f"{name} {args.size}"
        print(f"| {label} | {path} | {user:.3f} | {system:.3f} | {total:.3f} |", flush=True)


if __name__ == "__main__":
    main()
