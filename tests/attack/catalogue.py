"""The hostile-server catalogue: every behaviour of L{tests.attack.hostileserver} against every client.

    PYTHONPATH=. python -m tests.attack.catalogue [--full] [--behaviours a,b] [--clients x,y] [--json out.json]

Contract: L{runCase} starts a L{HostileServer} of one behaviour (port 0)
and one client as a child process (L{tests.attack.hostileclients}, or the
interop client's own command line), watches it, and returns one row of
figures and failures.  A row passes when:

 - every step ends within its deadline plus L{MARGIN} seconds: connecting
   within C{CONNECT_TIMEOUT}, each call and each awaited stream item within
   the call timeout, the close within C{CLOSE_GRACE}.  A step still
   running then is a hang: the child is killed and the row fails, naming
   the step.  (Outcomes, not speed: the margin is one only a hang misses.)
 - each step that fails fails with a typed error (one of chunkwire's, or
   for the Twisted clients the reason Twisted gives for a lost
   connection), never a raw socket or asyncio error; and every step
   fails, except the answers the behaviour allows (C{Behaviour.answers}:
   an answer of that size and kind, or a typed L{framing.Violation}); a
   stream's items past the stall must end in a typed error too (not its
   end: the server never ended it).
 - the client's memory stays bounded: its peak RSS rises at most
   L{RSS_ALLOWANCE} plus L{RSS_PER_ANSWER_BYTE} times the behaviour's
   largest answer above its RSS once imported (the interop client: its
   peak at most L{INTEROP_RSS_BASE} plus the same).
 - the interop client reports each case within its time (the case's
   C{--case-timeout}, then the time its close may wait, as long) plus the
   margin after the one before, exits with status 1, one line per case, and
   none of them C{pass} but those the behaviour really does
   (C{Behaviour.interopPasses}: C{ping} against a server that answers
   PINGs): no other case of docs/interop.md can be seen happening against a
   hostile server.

L{runCatalogue} runs behaviours x clients (each row is its own client
process and server: they share nothing), several rows at once: the rows
that move the full campaign's answers of hundreds of MiB (L{heavy}) a few at
a time, the others, which mostly wait out a deadline, more at a time
beside them, the longest first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .harness import ENV, ROOT
from .hostileclients import ADAPTERS
from .hostileserver import BEHAVIOURS, FULL, SHORT, HostileServer, Scale

MiB = 1 << 20

MARGIN = 10.0
"""Seconds past a step's deadline before it counts as a hang: generous, so only a hang misses it."""

STARTUP = 30.0
"""Seconds a child may take to import its client and print its first event, however loaded the machine."""

RSS_ALLOWANCE = 48 * MiB
"""How far a client's RSS may rise above its idle size, beyond the answers it is sent: its buffers (a socket
read of 256 KiB, its send buffer's high-water mark of 4 MiB, one decoder's 1 MiB of held input), the call's
bookkeeping and the allocator's slack.  A client that keeps what a hostile server makes it owe (FAILs and
PONGs it cannot send, at tens of MB a second on loopback) passes it within seconds."""

RSS_PER_ANSWER_BYTE = 3
"""Times its largest answer a client may hold on top: the answer itself, the pieces it was read in until they
are joined, and one copy more (a C{memoryview} body read whole)."""

INTEROP_RSS_BASE = 64 * MiB + RSS_ALLOWANCE
"""The interop client's peak RSS, without answers: Twisted, the bulk layer and its imports (its peak against
a silent server was 57 MiB), and L{RSS_ALLOWANCE}'s buffers."""

INTEROP_EVENTUALLY = 20.0
"""C{examples/interop_client.py}'s C{EVENTUALLY}: how long its close of a case's connections may wait."""

CALL_TIMEOUTS = {"short": 2.0, "full": 20.0}
"""The clients' call timeouts: the full campaign's answers of 256 MiB need time on a loaded machine."""

INTEROP_CASE_TIMEOUTS = {"short": 2.0, "full": 5.0}
"""
The interop client's C{--case-timeout}: it takes no limits and refuses any body over 16 MiB at its header
(C{CLIENT_LIMITS}), so the full campaign's 256 MiB answers never make it wait; against a server that says
nothing each of its 24 cases waits this long (and its close as long again).
"""

HEAVY_BYTES = 64 * MiB
"""A row whose client is sent answers this large or larger (the full campaign's C{huge}, C{huge-past} and
C{largest-items}) is heavy: it keeps a core busy and holds hundreds of MiB while it runs."""

INTEROP_CASES = {
    "short": ("empty_call", "login_required"),
    "full": (),  # every case
}
"""The interop client's cases: the short form's two (a plain call; the one that waits for the server's close)."""

CLIENTS = (*ADAPTERS, "interop")
"""Every client the catalogue visits."""

SHORT_CLIENTS = ("twisted", "blocking", "asyncio", "interop")
"""The clients of the default run (the reconnecting client is the Twisted client's connection made again; the
full campaign visits it too)."""


def _peakRss(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"VmHWM:\s+(\d+)", status)
    return int(match.group(1)) * 1024 if match else 0


class Child:
    """A child process whose stdout is read line by line with a deadline, its peak RSS sampled meanwhile."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=False
        )
        self.peak = 0
        self.started = time.monotonic()
        self._buffer = b""
        self._stderr: list[bytes] = []
        self._errThread = threading.Thread(target=self._drainStderr, daemon=True)
        self._errThread.start()

    def _drainStderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)
            del self._stderr[:-40]

    def stderr(self) -> str:
        self._errThread.join(5)
        return b"".join(self._stderr).decode("utf-8", "replace")[-2000:]

    def line(self, until: float) -> str | None:
        """The next line of output, or None at the output's end or once C{until} (monotonic) passed."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            self.peak = max(self.peak, _peakRss(self.process.pid))
            remaining = until - time.monotonic()
            if remaining <= 0:
                return None
            if not select.select([fd], [], [], min(remaining, 0.05))[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.peak = max(self.peak, _peakRss(self.process.pid))
        return line.decode("utf-8", "replace")

    def finish(self, timeout: float) -> int | None:
        """Its exit status, waiting up to C{timeout}; None (and killed) if it had not ended."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        self.peak = max(self.peak, _peakRss(self.process.pid))
        self.process.kill()
        self.process.wait(10)


def rssBound(answerBytes: int) -> int:
    """How far a client's RSS may rise above idle when its largest answer is C{answerBytes}."""
    return RSS_ALLOWANCE + RSS_PER_ANSWER_BYTE * answerBytes


def _judgeStep(event: dict[str, Any], answers: dict[str, str], streamItems: int | None) -> list[str]:
    """What is wrong with one step's outcome (C{event}, an C{end}), given what the behaviour allows."""
    step, outcome = event["step"], event["outcome"]
    where = step if step in ("connect", "close") else f"{step} {event.get('name')}"
    if step == "item":
        where += f"[{event['index']}]"
    late = event["seconds"] > event["deadline"] + MARGIN
    failures = [f"{where} took {event['seconds']:.1f} s (deadline {event['deadline']:g} s)"] if late else []
    if outcome == "error":
        if not event["typed"]:
            failures.append(f"{where} raised an untyped {event['error']}: {event['message'][:120]}")
        elif step == "close":
            failures.append(f"close raised {event['error']}: {event['message'][:120]}")
        return failures
    if step in ("connect", "close"):
        return failures
    if step == "item":
        if outcome == "over":
            failures.append(f"{where}: the stream ended, though the server never ended it")
        elif event["index"] >= (streamItems or 0):
            failures.append(f"{where}: an item the server never sent ({event['value']})")
        return failures
    wanted = answers.get(event.get("name", ""))
    if wanted is None:
        failures.append(f"{where} answered {event.get('value')}: a hostile server's call must fail")
    elif event.get("value") != wanted:
        failures.append(f"{where} answered {event.get('value')}, not {wanted}")
    return failures


def _serverFailed(server: HostileServer) -> list[str]:
    """The hostile server's own errors (a bug of the catalogue, not of the client: the row cannot be judged)."""
    return [f"the hostile server failed: {error!r}" for error in server.errors[:3]]


def runClient(behaviour: str, client: str, scale: Scale, scaleName: str) -> dict[str, Any]:
    """One Python client (an adapter of L{ADAPTERS}) against one behaviour: its row."""
    plan = BEHAVIOURS[behaviour]
    callTimeout = CALL_TIMEOUTS[scaleName]
    answers = plan.answers(scale) if plan.answers else {}
    server = HostileServer(behaviour, scale)
    command = [sys.executable, "-m", "tests.attack.hostileclients", client, str(server.port), behaviour]
    child = Child([*command, scaleName, str(callTimeout)])
    failures: list[str] = []
    steps: list[dict[str, Any]] = []
    idle = 0
    done: dict[str, Any] | None = None
    current: dict[str, Any] | None = None
    until = time.monotonic() + STARTUP
    try:
        while True:
            line = child.line(until)
            if line is None:
                break
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event["event"]
            if kind == "start":
                idle = event["rss"]
            elif kind == "begin":
                current = event
                until = time.monotonic() + event["deadline"] + MARGIN
            elif kind == "end":
                event["deadline"] = current["deadline"] if current else 0.0
                steps.append(event)
                failures += _judgeStep(event, answers, plan.streamItems)
                current = None
                until = time.monotonic() + STARTUP
            elif kind == "done":
                done = event
                break
        if done is None:
            if current is not None and child.process.poll() is None:
                what = current["step"] + (f" {current['name']}" if "name" in current else "")
                if "index" in current:
                    what += f"[{current['index']}]"
                failures.append(f"hang: {what} still waiting {current['deadline'] + MARGIN:g} s after it began")
            status = child.finish(0.5)
            if status is not None and current is None:
                failures.append(f"the client ended early (status {status}): {child.stderr()[-600:]}")
            elif status is None and current is None:
                failures.append("hang: no event from the client")
        else:
            child.finish(10)
    finally:
        if child.process.poll() is None:
            child.kill()
        server.stop()
    failures += _serverFailed(server)
    peak = max(child.peak, done["maxrss"] if done else 0)
    growth = peak - idle if idle else 0
    bound = rssBound(plan.answerBytes(scale))
    if growth > bound:
        failures.append(f"RSS rose {growth / MiB:.0f} MiB above idle (bound {bound / MiB:.0f} MiB)")
    return {
        "behaviour": behaviour,
        "client": client,
        "steps": [_shownStep(event) for event in steps],
        "rss_idle": idle,
        "rss_peak": peak,
        "rss_bound": bound,
        "seconds": round(time.monotonic() - child.started, 1),
        "failures": failures,
    }


def _shownStep(event: dict[str, Any]) -> str:
    name = event["step"] + (f" {event['name']}" if "name" in event and event["step"] != "item" else "")
    if event["step"] == "item":
        name += f"[{event['index']}]"
    outcome = event.get("value") if event["outcome"] == "answer" else event["outcome"]
    if event["outcome"] == "error":
        outcome = event["error"].rsplit(".", 1)[-1]
    return f"{name}: {outcome} ({event['seconds']:.1f} s)"


def interopFooled(behaviour: str, verdicts: dict[str, str]) -> list[str]:
    """
    The interop client's C{pass} verdicts (C{verdicts}: case to C{"pass"} or
    C{"FAIL"}) against C{behaviour} that it cannot have seen happen: every
    pass but those of the cases the behaviour really does (C{Behaviour.interopPasses}).
    """
    allowed = BEHAVIOURS[behaviour].interopPasses
    fooled = sorted(name for name, verdict in verdicts.items() if verdict == "pass" and name not in allowed)
    return [f"said pass for cases it cannot have seen happen: {', '.join(fooled)}"] if fooled else []


def runInterop(behaviour: str, scale: Scale, scaleName: str) -> dict[str, Any]:
    """The interop client's command line against one behaviour: its row."""
    plan = BEHAVIOURS[behaviour]
    caseTimeout = INTEROP_CASE_TIMEOUTS[scaleName]
    server = HostileServer(behaviour, scale)
    address = f"127.0.0.1:{server.port}"
    cases = list(INTEROP_CASES[scaleName])
    command = [sys.executable, "examples/interop_client.py", "--server", address, "--login-server", address]
    command += ["--certificate-server", address, "--case-timeout", f"{caseTimeout:g}"]
    for name in cases:
        command += ["--case", name]
    if not cases:
        listed = subprocess.run(
            [sys.executable, "examples/interop_client.py", "--list"], cwd=ROOT, env=ENV, capture_output=True, text=True
        )
        cases = [line.split(":", 1)[0] for line in listed.stdout.splitlines() if ":" in line]
    # Each case ends within its timeout and its close's (min(EVENTUALLY, its timeout)), plus the margin, after
    # the one before.
    perCase = caseTimeout + min(INTEROP_EVENTUALLY, caseTimeout) + MARGIN
    child = Child(command)
    lines: list[str] = []
    seconds: list[float] = []
    failures: list[str] = []
    until = child.started + STARTUP + perCase
    last = child.started
    try:
        while (line := child.line(until)) is not None:
            lines.append(line)
            now = time.monotonic()
            seconds.append(now - last)
            last = now
            until = now + perCase
        status = child.finish(max(0.5, until - time.monotonic()))
    finally:
        if child.process.poll() is None:
            child.kill()
        server.stop()
    failures += _serverFailed(server)
    total = time.monotonic() - child.started
    if status is None:
        waiting = cases[len(lines)] if len(lines) < len(cases) else "its exit"
        failures.append(f"hang: {waiting} not over within {perCase:g} s ({len(lines)} of {len(cases)} cases reported)")
    elif status != 1:
        failures.append(f"exit status {status}, not 1: {child.stderr()[-300:]}")
    seen: dict[str, tuple[str, float]] = {}
    for line, took in zip(lines, seconds, strict=True):
        match = re.match(r"case (\S+): (pass|FAIL)", line)
        if match:
            seen[match.group(1)] = (match.group(2), took)
    failures += interopFooled(behaviour, {name: verdict for name, (verdict, _) in seen.items()})
    if status is not None and set(seen) != set(cases):
        failures.append(f"reported {sorted(seen)}, not every case of {cases}")
    bound = INTEROP_RSS_BASE + RSS_PER_ANSWER_BYTE * plan.answerBytes(scale)
    if child.peak > bound:
        failures.append(f"peak RSS {child.peak / MiB:.0f} MiB (bound {bound / MiB:.0f} MiB)")
    return {
        "behaviour": behaviour,
        "client": "interop",
        "steps": [f"{name}: {verdict} ({took:.1f} s)" for name, (verdict, took) in seen.items()],
        "rss_idle": 0,
        "rss_peak": child.peak,
        "rss_bound": bound,
        "seconds": round(total, 1),
        "failures": failures,
    }


def runCase(behaviour: str, client: str, scaleName: str = "short") -> dict[str, Any]:
    """One behaviour against one client (C{scaleName}: C{"short"} or C{"full"}): its row."""
    scale = {"short": SHORT, "full": FULL}[scaleName]
    if client == "interop":
        return runInterop(behaviour, scale, scaleName)
    return runClient(behaviour, client, scale, scaleName)


def heavy(behaviour: str, client: str, scaleName: str) -> bool:
    """Whether the row moves answers of L{HEAVY_BYTES} or more (the interop client refuses them at the header)."""
    scale = {"short": SHORT, "full": FULL}[scaleName]
    return client != "interop" and BEHAVIOURS[behaviour].answerBytes(scale) >= HEAVY_BYTES


def runCatalogue(
    behaviours: Iterable[str],
    clients: Iterable[str],
    scaleName: str = "short",
    together: int = 4,
    heavyTogether: int = 2,
) -> list[dict[str, Any]]:
    """
    Every behaviour against every client, in that order: up to C{together}
    light rows at once, and beside them up to C{heavyTogether} L{heavy} ones.
    The interop client's rows (its 24 cases each wait out a deadline
    against most behaviours) start first, so the others run meanwhile.
    """
    cases = [(behaviour, client) for behaviour in behaviours for client in clients]
    first = sorted(cases, key=lambda case: case[1] != "interop")
    with (
        ThreadPoolExecutor(max_workers=max(1, together)) as light,
        ThreadPoolExecutor(max_workers=max(1, heavyTogether)) as weighty,
    ):
        running = {
            case: (weighty if heavy(*case, scaleName) else light).submit(runCase, *case, scaleName) for case in first
        }
        return [running[case].result() for case in cases]


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| behaviour | client | steps (outcome, seconds) | RSS idle / peak / bound (MiB) | seconds | verdict |",
        "|---|---|---|---|---:|---|",
    ]
    for row in rows:
        rss = f"{row['rss_idle'] / MiB:.0f} / {row['rss_peak'] / MiB:.0f} / {row['rss_bound'] / MiB:.0f}"
        verdict = "pass" if not row["failures"] else "; ".join(row["failures"])
        lines.append(
            f"| {row['behaviour']} | {row['client']} | {'; '.join(row['steps'])} | {rss} | {row['seconds']} "
            f"| {verdict.replace('|', '/')} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the clients' default limits (256 MiB answers)")
    parser.add_argument("--behaviours", default=",".join(BEHAVIOURS), help="comma-separated behaviours")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated clients")
    parser.add_argument("--together", type=int, default=6, help="light rows run at once (default %(default)s)")
    parser.add_argument(
        "--heavy-together",
        type=int,
        default=2,
        help="heavy rows (256 MiB answers) at once (default %(default)s)",
    )
    parser.add_argument("--json", help="where to write the rows")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = runCatalogue(
        args.behaviours.split(","),
        args.clients.split(","),
        "full" if args.full else "short",
        args.together,
        args.heavy_together,
    )
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    passed = sum(1 for row in rows if not row["failures"])
    print(f"{passed}/{len(rows)} cases passed in {time.monotonic() - started:.0f} s")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
