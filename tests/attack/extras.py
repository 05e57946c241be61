"""The campaign's other cases: bulk faults, the latent link (64 MiB push, latency, netem) and segment counts.

Contract: each case runs as a child process (the attack campaign itself
owns no reactor), bounded in time, and comes back as a L{Case}: a verdict,
the figures as Markdown, and the command that reproduces it.  L{runExtras}
runs them all; L{refreshReport} writes every section into the report
between its markers (C{<!-- BEGIN generated: NAME -->} ... C{<!-- END
generated: NAME -->}), leaving the hand-written text around them alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .harness import ENV, ROOT

PUSH_SIZE_MIB = 64
PUSH_DELAY = 0.05
PUSH_RATE_MIB = 32
PUSH_BOUND = 1.1
"""A 64 MiB push through 50 ms each way at 32 MiB/s finishes within 1.1x of size/rate + 1 RTT."""
PUSH_WINDOW_MIB = 4 * PUSH_RATE_MIB * 2 * PUSH_DELAY
"""The receive window the asserted push uses: 4 x bandwidth x RTT (12.8 MiB), as the README advises."""


@dataclass
class Case:
    """One case's outcome: C{ok}, its figures (Markdown) and how to reproduce it."""

    name: str
    ok: bool
    text: str
    command: str
    data: dict[str, Any] = field(default_factory=dict)


def _run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**ENV, **(env or {})}
    return subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )


def _shown(command: list[str]) -> str:
    return "PYTHONPATH=. " + " ".join("python" if part == sys.executable else part for part in command)


def faults() -> Case:
    """The fault tests (bulk disk failures and cuts, RPC cuts and restarts) with the figures they print."""
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/faults"]
    command += ["tests/protocols/test_faults.py"]
    done = _run(command, 600, {"CHUNKWIRE_FIGURES": "1"})  # the tests print their figure lines
    lines = [line for line in done.stdout.splitlines() if re.match(r"^(upload|download|example server)", line)]
    summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    text = "\n".join(f"- {line}" for line in lines) + f"\n\npytest: `{summary.strip('= ')}`"
    if done.returncode != 0:
        text += "\n\n```\n" + done.stdout[-3000:] + "\n```"
    return Case("faults", done.returncode == 0, text, _shown(command))


def push(sizeMib: float = PUSH_SIZE_MIB, windowMib: float | None = None, asserted: bool = True) -> Case:
    """
    The bulk push through the rate-limited delay proxy (C{tests.latency.push}):
    with a fixed receive window of C{windowMib}, or the default options
    (autotuned) if C{None}; checked against L{PUSH_BOUND} only if C{asserted}.
    """
    with tempfile.TemporaryDirectory() as work:
        out = Path(work, "push.json")
        command = [sys.executable, "-m", "tests.latency.push", f"--size-mib={sizeMib:g}"]
        command += [f"--delay={PUSH_DELAY}", f"--rate-mib={PUSH_RATE_MIB}"]
        if windowMib is not None:
            command.append(f"--window-mib={windowMib:g}")
        command.append(f"--bound={PUSH_BOUND if asserted else 0}")
        done = _run([*command, f"--json={out}"], 300)
        if not out.exists():
            return Case("push", False, f"failed:\n```\n{done.stderr[-2000:]}\n```", _shown(command))
        data = json.loads(out.read_text())
    ok = done.returncode == 0 and (not asserted or data["ratio"] <= PUSH_BOUND)
    return Case("push", ok, done.stdout.strip(), _shown(command), data)


def latency() -> Case:
    """Connect to first answer and sequential calls over the 100 ms RTT proxy (C{tests.benchmarks.bench_latency})."""
    with tempfile.TemporaryDirectory() as work:
        out = Path(work, "latency.json")
        command = [sys.executable, "-m", "tests.benchmarks.bench_latency", "--peers", "chunkwire"]
        command += ["--runs", "3", "--calls", "30"]
        done = _run([*command, "--json", str(out)], 600)
        if done.returncode != 0 or not out.exists():
            return Case("latency", False, f"failed:\n```\n{done.stderr[-2000:]}\n```", _shown(command))
        summary = json.loads(out.read_text())["summary"]
    cell, raw = summary["chunkwire"], summary.get("raw", {})
    ok = cell["sequential_rtts"] <= 1.02 and cell["first_answer_rtts"] <= 1.1
    text = (
        f"chunkwire: connect to first answer {cell['first_answer_rtts']:.3f} RTT"
        f" ({cell['first_answer_s'] * 1e3:.1f} ms); sequential calls {cell['sequential_rtts']:.4f} RTT each"
        f" ({cell['sequential_ms']:.1f} ms); the raw TCP link itself: {raw.get('sequential_rtts', float('nan')):.4f}"
        f" RTT per echo; median of 3 runs of 30 calls"
    )
    return Case("latency", ok, text, _shown(command), summary)


def netem() -> Case:
    """The netem check (C{tests.latency.netem}): figures where the kernel has netem, else the reason it skipped."""
    command = [sys.executable, "-m", "tests.latency.netem"]
    done = _run(command, 300)
    text = done.stdout.strip() or done.stderr.strip()[-1000:]
    return Case("netem", done.returncode == 0, text, _shown(command))


def segments() -> Case:
    """TCP segments per small call: TCP_INFO always, tcpdump too where it is installed and we are root."""
    capture = bool(_which("tcpdump")) and os.geteuid() == 0
    with tempfile.TemporaryDirectory() as work:
        out = Path(work, "segments.json")
        command = [sys.executable, "-m", "tests.latency.segments", "--calls", "50"]
        if capture:
            command.append("--tcpdump")
        done = _run([*command, f"--json={out}"], 300)
        if done.returncode != 0 or not out.exists():
            return Case("segments", False, f"failed:\n```\n{done.stderr[-2000:]}\n```", _shown(command))
        data = json.loads(out.read_text())
    chunkwire = data["chunkwire"]
    ok = (chunkwire["data_segs_out"], chunkwire["data_segs_in"]) == (1.0, 1.0)
    if capture:
        dump = chunkwire["tcpdump"]
        ok = ok and (dump["data_segs_up"], dump["data_segs_down"]) == (1.0, 1.0)
    note = "" if capture else "\n\n(tcpdump columns empty: tcpdump is not installed here, or not root.)"
    return Case("segments", ok, done.stdout.strip() + note, _shown(command), data)


def round4() -> Case:
    """Round four's connection attacks at the attacker's sizes (1,000 busy connections, 1,100 header-less ones)."""
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/attack/test_round4_net.py"]
    done = _run(command, 600, {"CHUNKWIRE_FIGURES": "1", "CHUNKWIRE_ATTACK_FULL": "1"})
    lines = [line for line in done.stdout.splitlines() if re.match(r"^(busy cap|header-less flood)", line)]
    text = "\n".join(f"- {line}" for line in lines)
    if done.returncode != 0:
        text += "\n\n```\n" + done.stdout[-3000:] + "\n```"
    return Case("round4", done.returncode == 0, text, "CHUNKWIRE_ATTACK_FULL=1 " + _shown(command))


def _which(tool: str) -> str | None:
    import shutil

    return shutil.which(tool)


def runExtras() -> list[Case]:
    """Every extra case, in the order the report shows them."""
    cases = [
        faults(),
        push(windowMib=PUSH_WINDOW_MIB),
        push(asserted=False),
        push(windowMib=1.875, asserted=False),
        latency(),
        netem(),
        segments(),
        round4(),
    ]
    cases[2].name = "push-autotuned"
    cases[3].name = "push-default-window"
    return cases


def sections(cases: list[Case]) -> dict[str, str]:
    """The report's generated sections from the cases."""
    by = {case.name: case for case in cases}
    out: dict[str, str] = {}
    if "faults" in by:
        case = by["faults"]
        out["faults"] = f"{case.text}\n\nVerdict: {'pass' if case.ok else 'FAIL'}.  Reproduce: `{case.command}`"
    if "push" in by:
        lines = []
        for name in ("push", "push-autotuned", "push-default-window"):
            if name in by:
                case = by[name]
                verdict = "pass" if case.ok else "FAIL"
                if name != "push":
                    verdict = "reported, not asserted"
                lines.append(f"- {case.text} ({verdict}).  Reproduce: `{case.command}`")
        out["push"] = "\n".join(lines)
    if "latency" in by:
        case = by["latency"]
        out["latency"] = f"{case.text} ({'pass' if case.ok else 'FAIL'}).  Reproduce: `{case.command}`"
    if "netem" in by:
        case = by["netem"]
        out["netem"] = f"{case.text}\n\nReproduce: `sudo {case.command}`"
    if "segments" in by:
        case = by["segments"]
        out["segments"] = f"{case.text}\n\nVerdict: {'pass' if case.ok else 'FAIL'}.  Reproduce: `{case.command}`"
    return out


def refreshReport(path: Path, generated: dict[str, str]) -> list[str]:
    """
    Replace each generated section of the report at C{path} that has
    markers; return the names of the sections written.
    """
    text = path.read_text()
    written = []
    for name, body in generated.items():
        # (A section may still be empty: nothing between its two markers.)
        pattern = re.compile(
            rf"(<!-- BEGIN generated: {re.escape(name)} -->\n)(?:.*?\n)?(<!-- END generated: {re.escape(name)} -->)",
            re.DOTALL,
        )
        if pattern.search(text):
            text = pattern.sub(lambda match, body=body: match.group(1) + body + "\n" + match.group(2), text)
            written.append(name)
    path.write_text(text)
    return written
