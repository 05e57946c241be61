"""The slow reader: a client that sends calls as fast as it can and does not read the answers.

    PYTHONPATH=. python -m tests.attack.slowreader --servers kv,echo --duration 4

Contract: against each example server (as the README starts it, with the
attack suite's guard options), one case in which the attacker reads again
after a pause, and one in which it never does, each while honest clients
call on other connections.  The attacker is a plain socket that writes wire
bytes: against kv one C{put} of a 60 kB value and then C{get} calls of about
20 bytes each (about 3,000x amplification), against echo 64 KiB objects.
A case passes when the server's RSS stays within L{RSS_BOUND} of its idle
size, the honest p99 within L{P99_RATIO} of idle, and either every answer
arrives, once and in order (when the attacker reads again), or the server
drops the attacker as C{send-stalled} within the send stall timeout plus
slack (when it never does).  Every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from framing import Decoder, Encoder, Registry
from framing.rpc._wire import ANSWER, CALL, OPEN_TYPE, Message, MessageSlicer, MessageUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from .harness import (
    P99_FLOOR,
    SEND_STALL_TIMEOUT,
    UNTIMED_PAUSE,
    ExampleServer,
    baseline,
    honestCalling,
    honestResult,
)

MiB = 1024 * 1024
RSS_BOUND = 16 * MiB
"""Most the server's RSS may rise above its idle size while one client does not read."""
P99_RATIO = 2.0
"""Most the honest clients' p99 may rise over idle, as a ratio (p99s under P99_FLOOR count as P99_FLOOR)."""
ABORT_AFTER = 2.0
"""The guard's default: seconds a dropped peer may take to read its ERROR before the connection is aborted."""
VALUE = "v" * 60_000
ECHO_PAYLOAD = b"e" * 65536
KV_GETS = 10_000
"""600 MB of answers: far more than the loopback socket buffers and the high-water mark hold together."""
ECHO_OBJECTS = 1000
"""64 MiB of answers, for the same reason."""

_REGISTRY = Registry(DEFAULT_REGISTRY)
_REGISTRY.add_slicer(Message, MessageSlicer())
_REGISTRY.add_unslicer(OPEN_TYPE, MessageUnslicer)


def requests(kind: str) -> Iterator[bytes]:
    """The attacker's requests, as wire bytes, one per item (the preamble goes first, separately)."""
    encoder = Encoder(_REGISTRY)
    if kind == "kv":
        yield encoder.encode(Message((CALL, 1, 0, "put", None, "k", VALUE)))
        for request_id in range(2, KV_GETS + 2):
            yield encoder.encode(Message((CALL, request_id, 0, "get", None, "k")))
    else:
        for index in range(ECHO_OBJECTS):
            yield encoder.encode([index, ECHO_PAYLOAD])


def answersInOrder(kind: str, answers: list[Any], sent: int) -> list[str]:
    """What is wrong with C{answers} to the first C{sent} requests: nothing if each came once, in order."""
    if kind == "kv":
        expected = [(ANSWER, 1, None)] + [(ANSWER, i, VALUE) for i in range(2, sent + 1)]
        got = [tuple(answer) for answer in answers]
    else:
        expected = [(i, ECHO_PAYLOAD) for i in range(sent)]
        got = [tuple(answer) if isinstance(answer, list) else answer for answer in answers]
    if got == expected:
        return []
    first = next(
        (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), len(expected))
    )
    return [f"{len(got)} answers to {sent} requests; the first difference is at answer {first}"]


class SlowReader:
    """A client socket that writes requests without reading, then reads (or never does)."""

    def __init__(self, port: int, kind: str) -> None:
        self.kind = kind
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setblocking(False)
        self.requests = requests(kind)
        self.pending = memoryview(PREAMBLE)
        self.sent = 0  # whole requests written
        self.started = False

    def send(self, seconds: float) -> None:
        """Write requests for C{seconds}, as fast as the server takes them, reading nothing."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self._sendSome(deadline - time.monotonic()):
                continue

    def _sendSome(self, timeout: float) -> bool:
        if not self.pending:
            if self.started:
                self.sent += 1
            self.started = False
            request = next(self.requests, None)
            if request is None:
                time.sleep(max(0.0, min(timeout, 0.05)))
                return False
            self.started = True
            self.pending = memoryview(request)
        try:
            count = self.sock.send(self.pending)
        except BlockingIOError:
            select.select([], [self.sock], [], max(0.0, min(timeout, 0.05)))
            return False
        self.pending = self.pending[count:]
        return True

    def readAll(self, budget: float) -> tuple[list[Any], list[str]]:
        """Finish the request in progress, then read every answer to the requests written; returns them and errors."""
        decoder = Decoder(registry=_REGISTRY)
        answers: list[Any] = []
        errors: list[str] = []
        deadline = time.monotonic() + budget
        while self.pending and time.monotonic() < deadline:
            readable, _, _ = select.select([self.sock], [self.sock], [], 0.05)[:3]
            if readable:
                answers.extend(self._receive(decoder))
            self._sendPartial()
        if not self.pending and self.started:
            self.sent += 1
            self.started = False
        while len(answers) < self.sent and time.monotonic() < deadline:
            select.select([self.sock], [], [], 0.1)
            try:
                answers.extend(self._receive(decoder))
            except ConnectionError as error:
                errors.append(f"connection lost after {len(answers)} answers: {error}")
                break
        return answers, errors

    def _sendPartial(self) -> None:
        try:
            self.pending = self.pending[self.sock.send(self.pending) :]
        except BlockingIOError:
            pass

    def _receive(self, decoder: Decoder) -> list[Any]:
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return []
        if not data:
            raise ConnectionError("the server closed the connection")
        return decoder.feed(data)

    def closedWithin(self, budget: float) -> float | None:
        """Read and drop what arrives until the server has closed; seconds taken, or None if still open."""
        started = time.monotonic()
        while time.monotonic() - started < budget:
            select.select([self.sock], [], [], 0.1)
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                return time.monotonic() - started
            if not data:
                return time.monotonic() - started
        return None

    def close(self) -> None:
        self.sock.close()


class RssSampler:
    """Samples a process's RSS every 20 ms in a thread and keeps the peak."""

    def __init__(self, server: ExampleServer) -> None:
        self.server = server
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.server.memory()["VmRSS"])
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def runCase(
    server: ExampleServer, resume: bool, idle: int, base: dict[str, Any], duration: float, timed: bool = True
) -> dict[str, Any]:
    """
    One slow reader while honest clients call; returns its row of figures
    and failures.  C{timed}: the drop is judged against its allowed time and
    the honest p99 against idle; without it, only that the drop came (the
    default run, on machines of any load).
    """
    offset = server.logSize()
    sampler = RssSampler(server)
    clients = honestCalling(server.kind, server.port, duration, pause=0.0 if timed else UNTIMED_PAUSE)
    attacker = SlowReader(server.port, server.kind)
    started = time.monotonic()
    sendSeconds = min(2.0, SEND_STALL_TIMEOUT / 2)
    attacker.send(sendSeconds)
    row: dict[str, Any] = {"server": server.kind, "case": "reads again" if resume else "never reads"}
    failures: list[str] = []
    if resume:
        answers, errors = attacker.readAll(budget=60)
        row["requests"], row["answers"] = attacker.sent, len(answers)
        failures += errors + answersInOrder(server.kind, answers, attacker.sent)
    else:
        time.sleep(SEND_STALL_TIMEOUT + 1.0)
        closed = attacker.closedWithin(ABORT_AFTER + 10)
        row["requests"] = attacker.sent
        row["dropped_after"] = None if closed is None else round(time.monotonic() - started, 2)
        allowed = sendSeconds + SEND_STALL_TIMEOUT + SEND_STALL_TIMEOUT / 4 + ABORT_AFTER + 2
        row["allowed"] = allowed
        if row["dropped_after"] is None:
            failures.append("not dropped")
        elif timed and row["dropped_after"] > allowed:
            failures.append(f"not dropped within {allowed:.1f} s ({row['dropped_after']})")
    attacker.close()
    result = honestResult(clients)
    peak = sampler.stop()
    log = server.logSince(offset)
    if not resume and ": send-stalled:" not in log:
        failures.append("no 'send-stalled' in the server log")
    ratio = max(result["p99"], P99_FLOOR) / max(base["p99"], P99_FLOOR)
    row.update(
        rss_idle=idle,
        rss_peak=peak,
        rss_growth=peak - idle,
        honest_calls=result["calls"],
        p99_idle=base["p99"],
        p99_attack=result["p99"],
        p99_ratio=round(ratio, 2),
    )
    if row["rss_growth"] > RSS_BOUND:
        failures.append(f"RSS rose {row['rss_growth'] / MiB:.1f} MiB over idle")
    if result["errors"] or not result["calls"]:
        failures.append(f"honest calls failed: {result['errors']}")
    if timed and ratio > P99_RATIO:
        failures.append(f"honest p99 ratio {ratio:.2f} > {P99_RATIO}")
    row["failures"] = failures
    return row


WARM_UP = 1.0
"""
Seconds of honest calls before the idle RSS is taken when the p99 is not
judged (C{timed} false, the default run): thousands of calls, enough for
the first calls' allocations to be in the idle figure; the timed campaign's
baseline runs the whole duration, its p99 the reference for the ratio.
"""


def runCampaign(kinds: list[str], duration: float, logDir: Path, timed: bool = True) -> list[dict[str, Any]]:
    """
    Both cases against a fresh server of each kind; the idle RSS is taken
    after an honest warm-up (L{WARM_UP} untimed).  C{timed}: see L{runCase}.
    """
    rows = []
    for kind in kinds:
        server = ExampleServer(kind, logDir / f"slowreader-{kind}.log")
        try:
            base = baseline(server, duration if timed else min(duration, WARM_UP))
            idle = server.memory()["VmRSS"]
            for resume in (True, False):
                rows.append(runCase(server, resume, idle, base, duration, timed))
        finally:
            server.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| server | slow reader | requests sent | answers | dropped after (s) | RSS idle (MiB) "
        "| RSS growth (MiB) | honest p99 idle / attack (ms) | ratio | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        dropped = row.get("dropped_after")
        lines.append(
            f"| {row['server']} | {row['case']} | {row['requests']} | {row.get('answers', '-')} "
            f"| {'-' if dropped is None else dropped} | {row['rss_idle'] / MiB:.1f} "
            f"| {row['rss_growth'] / MiB:.1f} | {row['p99_idle'] * 1000:.2f} / {row['p99_attack'] * 1000:.2f} "
            f"| {row['p99_ratio']:.2f} | {'pass' if not row['failures'] else '; '.join(row['failures'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="kv,echo", help="comma-separated: kv, echo")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of honest calls per case")
    parser.add_argument("--json", help="where to write the rows")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as logs:
        rows = runCampaign(args.servers.split(","), args.duration, Path(logs))
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if any(row["failures"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
