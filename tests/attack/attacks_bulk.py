"""Hostile peers of the bulk server, built from wire bytes, and a runner that measures what they leave behind.

Contract: L{BulkServer} runs C{examples/bulk_server.py} (with C{--log}) on a
loopback port over a fresh directory and reads its RSS, open file
descriptors, threads (C{/proc/PID/status}) and partial files (C{.part}
names in the directory).  Each attack in L{BULK_ATTACKS} takes the port and
a time budget, runs in the calling thread with blocking sockets, and returns
what it saw.  L{runBulkCase} measures the idle figures, runs one attack,
waits (bounded) for the figures to come back, and returns one row with its
verdict: peak RSS within L{RSS_BOUND} of idle, the code logged by the
server, and fds, threads and partial files back to their idle figures.

    PYTHONPATH=. python -m tests.attack.attacks_bulk

These attacks target the bulk server only, so they are not merged into
L{tests.attack.attacks.ATTACKS} (which every kv and echo campaign runs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zope.interface import implementer

from framing import Encoder, Registry
from framing.bulk._wire import STREAM_OPEN_TYPE
from framing.rpc._wire import CALL, OPEN_TYPE, ROOT_ID
from framing.slicing._interfaces import ISlicer
from framing.wire import PREAMBLE

from . import attacks
from .attacks import _connect, _readUntilClosed
from .harness import (
    ENV,
    P99_FLOOR,
    P99_RATIO,
    ROOT,
    UNMEASURED,
    UNTIMED_PAUSE,
    ExampleServer,
    baseline,
    honestCalling,
    honestResult,
)

RSS_BOUND = 64 * 1024 * 1024
"""Most the server's peak RSS may grow over its idle figure during one attack."""

SETTLE_SECONDS = 10.0
"""How long the figures may take to come back after the attacker leaves
(the hash pool's idle threads end after 2 s)."""
HONEST_SECONDS = 4.0
"""Seconds of honest list() calls beside each attack, and for the idle baseline."""


class _Call(tuple):  # type: ignore[type-arg]
    """An RPC CALL as the attacker writes it."""

    __slots__ = ()


class _Announcement(tuple):  # type: ignore[type-arg]
    """A stream announcement (id, size, digest name) with whatever id the attacker likes."""

    __slots__ = ()


@implementer(ISlicer)
class _Containers:
    def __init__(self, name: str) -> None:
        self.name = name

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(self.name, obj, obj)


_REGISTRY = Registry()
_REGISTRY.add_slicer(_Call, _Containers(OPEN_TYPE))
_REGISTRY.add_slicer(_Announcement, _Containers(STREAM_OPEN_TYPE))
_ENCODER = Encoder(_REGISTRY)


def call(requestId: int, name: str, *args: Any) -> bytes:
    """The wire bytes of a call to the server's root."""
    return _ENCODER.encode(_Call((CALL, requestId, ROOT_ID, name, None, *args)))


def announcement(streamId: int, size: int) -> _Announcement:
    """A stream argument as the attacker announces it."""
    return _Announcement((streamId, size, "sha256"))


# -- the attacks ---------------------------------------------------------------------------


def abandonedUploads(port: int, budget: float, connections: int = 10, perConnection: int = 110) -> dict[str, Any]:
    """
    1,100 C{openUpload} calls of about 50 bytes each, over 10 connections,
    never followed by data; then every connection leaves.
    """
    started = time.monotonic()
    sockets = [_connect(port) for _ in range(connections)]
    received = 0
    for index, sock in enumerate(sockets):
        calls = [call(n + 1, "openUpload", f"a{index}-{n}.bin", 1 << 30, "v1") for n in range(perConnection)]
        sock.sendall(PREAMBLE + b"".join(calls))
    time.sleep(min(1.0, budget))
    for sock in sockets:
        sock.settimeout(0.2)
        try:
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        except OSError:
            pass
    for sock in sockets:
        sock.close()
    return {
        "closed_after": None,
        "calls": connections * perConnection,
        "received": received,
        "seconds": round(time.monotonic() - started, 2),
    }


def streamIdReuse(port: int, budget: float, calls: int = 300) -> dict[str, Any]:
    """The same incoming stream id announced in 300 C{put} calls on one connection."""
    with _connect(port) as sock:
        started = time.monotonic()
        data = PREAMBLE + b"".join(call(n + 1, "put", f"r{n}.bin", announcement(7, 1 << 20)) for n in range(calls))
        try:
            sock.sendall(data)
        except OSError:
            pass
        seen = _readUntilClosed(sock, started, budget)
    seen["calls"] = calls
    return seen


BULK_ATTACKS: dict[str, tuple[Callable[[int, float], dict[str, Any]], str, bool]] = {
    "bulk-uploads-abandoned": (abandonedUploads, "too-many-uploads", False),
    "bulk-stream-id-reuse": (streamIdReuse, "stream-id-reused", True),
}
"""Each attack, the code the server must log for it, and whether the server must drop the attacker."""


# -- the server and the runner ------------------------------------------------------------------


class BulkServer(ExampleServer):
    """C{examples/bulk_server.py} on a loopback port, serving a fresh directory, logging to a file."""

    def __init__(self, logPath: Path, directory: Path) -> None:
        self.kind = "bulk"
        self.directory = directory
        self.logPath = logPath
        self._log = open(logPath, "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "examples/bulk_server.py",
                "--listen",
                "tcp:0:interface=127.0.0.1:backlog=1024",
                "--dir",
                str(directory),
                "--log",
                "--grace=1",  # a drain on stop need not wait for what the attackers left open
            ],
            cwd=ROOT,
            env=ENV,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.port = self._readPort()

    def figures(self) -> dict[str, int]:
        """RSS, peak RSS, open fds, threads and partial files, now."""
        pid = self.process.pid
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return {
            "rss": int(fields["VmRSS"].split()[0]) * 1024,
            "peak": int(fields["VmHWM"].split()[0]) * 1024,
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": int(fields["Threads"]),
            "parts": _partialFiles(self.directory),
        }


def _partialFiles(directory: Path) -> int:
    """Partial files of the served directory: in the service's private directory (and any beside the files)."""
    private = directory / ".chunkwire-private"
    kept = os.listdir(private) if private.is_dir() else []
    return sum(1 for name in os.listdir(directory) if ".part" in name) + sum(
        1 for name in kept if name.endswith((".part", ".part.json", ".tmp"))
    )


def _settled(server: BulkServer, idle: dict[str, int], deadline: float) -> dict[str, int]:
    """Poll until fds, threads and partial files are back to C{idle}, or the deadline passes."""
    while True:
        now = server.figures()
        if all(now[key] <= idle[key] for key in ("fds", "threads", "parts")) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def runBulkCase(
    server: BulkServer, name: str, base: dict[str, Any], budget: float = 10.0, timed: bool = True
) -> dict[str, Any]:
    """
    Run attack C{name} against C{server} while honest clients call; return
    its row of figures and failures (C{timed}: the honest p99 is judged
    against idle too; the default run judges outcomes only).
    """
    attack, code, dropped = BULK_ATTACKS[name]
    offset = server.logSize()
    idle = server.figures()
    cpu = server.resources()["cpu"]
    clients = honestCalling("bulk", server.port, HONEST_SECONDS, pause=0.0 if timed else UNTIMED_PAUSE)
    seen = attack(server.port, budget)
    during = server.figures()
    result = honestResult(clients)
    # The attackers' extra wait too, where the default run gives one: a loaded machine closes late as well.
    after = _settled(server, idle, time.monotonic() + SETTLE_SECONDS + attacks.EXTRA_WAIT)
    log = server.logSince(offset)
    ratio = max(result["p99"], P99_FLOOR) / max(base["p99"], P99_FLOOR)
    row = {
        "server": "bulk",
        "attack": name,
        "code": code,
        "logged": f": {code}:" in log,
        "closed_after": seen.get("closed_after"),
        "idle": idle,
        "during": during,
        "after": after,
        "peak_growth": after["peak"] - idle["rss"],
        "cpu_seconds": round(server.resources()["cpu"] - cpu, 2),
        "honest_calls": result["calls"],
        "p99_base": base["p99"],
        "p99_attack": result["p99"],
        "p99_ratio": round(ratio, 2),
        "extra": {k: v for k, v in seen.items() if k != "closed_after"},
    }
    failures = []
    if not row["logged"]:
        failures.append(f"no '{code}' in the server log")
    if dropped and row["closed_after"] is None:
        failures.append("the attacker was not dropped")
    if row["peak_growth"] > RSS_BOUND:
        failures.append(f"peak RSS grew {row['peak_growth']} bytes")
    if result["errors"] or not result["calls"]:
        failures.append(f"honest calls failed: {result['errors']}")
    if timed and ratio > P99_RATIO:
        failures.append(f"honest p99 ratio {ratio:.2f} > {P99_RATIO}")
    for key in ("fds", "threads", "parts"):
        if after[key] > idle[key]:
            failures.append(f"{key}: {idle[key]} idle, {after[key]} after the attacker left")
    row["failures"] = failures
    return row


def runBulkCampaign(names: list[str] | None = None, timed: bool = True) -> list[dict[str, Any]]:
    """Every bulk attack, one after the other, against one bulk server (C{timed}: see L{runBulkCase})."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        server = BulkServer(Path(scratch) / "bulk-server.log", Path(scratch) / "served")
        try:
            # The idle p99 is only a reference for the timed rules' ratio.
            base = baseline(server, HONEST_SECONDS) if timed else UNMEASURED
            for name in names or list(BULK_ATTACKS):
                rows.append(runBulkCase(server, name, base, timed=timed))
        finally:
            server.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| attack | logged code | dropped after (s) | peak RSS growth (MiB) | CPU (s) | fds idle/during/after "
        "| threads idle/during/after | .part files idle/during/after | honest p99 idle / attack (ms) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        closed = "-" if row["closed_after"] is None else f"{row['closed_after']:.2f}"
        trio = {key: "/".join(str(row[phase][key]) for phase in ("idle", "during", "after")) for key in row["idle"]}
        lines.append(
            f"| {row['attack']} | {row['code'] if row['logged'] else 'MISSING'} | {closed} "
            f"| {row['peak_growth'] / 2**20:.1f} | {row['cpu_seconds']:.2f} | {trio['fds']} | {trio['threads']} "
            f"| {trio['parts']} | {row['p99_base'] * 1000:.2f} / {row['p99_attack'] * 1000:.2f} "
            f"| {'pass' if not row['failures'] else '; '.join(row['failures'])} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    results = runBulkCampaign(sys.argv[1:] or None)
    print(table(results))
    sys.exit(1 if any(row["failures"] for row in results) else 0)
