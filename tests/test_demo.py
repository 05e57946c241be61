"""The demos run as the README says: C{dev.py demo} runs examples/demo.py (the three services on
loopback, in one process), and examples/framing_demo.py shows the framing layer alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT

NUMBER = r"[\d,]+(?:\.\d+)?"
HEX = r"[0-9a-f]{64}"

# Each line the demo's summary must have, in order.
SUMMARY = [
    r"summary:",
    rf"  RPC calls/s, one at a time: {NUMBER}",
    rf"  RPC calls/s, 100 in flight: {NUMBER}",
    rf"  bulk MB/s: {NUMBER} \(3\.0 MiB in [\d.]+ s\)",
    # One call, one write: with one call in flight nothing can share a write.
    rf"  RPC client, one at a time: {NUMBER} bytes per write, 1\.00 writes per message \(.*\)",
    rf"  RPC client, 100 in flight: {NUMBER} bytes per write, (?P<windowed>[\d.]+) writes per message \(.*\)",
    rf"  bulk client: (?P<perWrite>{NUMBER}) bytes per write, (?P<bulk>[\d.]+) writes per message \(.*\)",
    rf"  digest: (?:sha256|blake3) (?P<digest>{HEX}): source, bulk layer and stored copy agree",
    r"  codec core: (?:compiled|pure)",
]


def run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run C{python *command} from the repository root to its end."""
    return subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=env or ENV, capture_output=True, text=True, timeout=120
    )


class DemoTests(SynchronousTestCase):
    """examples/demo.py runs end to end and reports what it measured."""

    def test_endToEnd(self) -> None:
        """With a 3 MiB file the demo echoes, calls, streams and verifies, prints its summary, and removes its files."""
        temporary = Path(self.mktemp()).resolve()
        temporary.mkdir(parents=True)
        result = run("examples/demo.py", "--size", "3", "--seconds", "0.1", env=dict(ENV, TMPDIR=str(temporary)))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        lines = result.stdout.splitlines()
        self.assertIn("echo: 6 objects came back equal (dict, str, bytes, tuple, set, list)", lines)
        self.assertIn("kv: put 100 keys; get('key-42') -> 'value-42'; list('key-4') -> 11 keys", lines)
        generated = re.search(
            rf"^generated demo\.bin: 3\.0 MiB in [\d.]+ s, (?:sha256|blake3) ({HEX})$", result.stdout, re.M
        )
        self.assertIsNotNone(generated, result.stdout)
        assert generated is not None
        self.assertRegex(
            result.stdout, rf"(?m)^sent demo\.bin: 3145728 bytes .* (?:sha256|blake3) {generated.group(1)} verified$"
        )
        summary = lines[lines.index("summary:") :]
        self.assertEqual(len(summary), len(SUMMARY), result.stdout)
        found = {}
        for line, pattern in zip(summary, SUMMARY, strict=True):
            match = re.fullmatch(pattern, line)
            self.assertIsNotNone(match, f"{line!r} does not match {pattern!r}")
            assert match is not None
            found.update(match.groupdict())
        self.assertEqual(found["digest"], generated.group(1))
        self.assertLessEqual(float(found["windowed"]), 1.0)
        self.assertLessEqual(float(found["bulk"]), 1.0)
        # Bulk data goes in chunks of up to 1 MiB, one write each: writes are large.
        self.assertGreater(float(found["perWrite"].replace(",", "")), 64 * 1024)
        self.assertEqual(list(temporary.iterdir()), [], "the demo left files behind")

    def test_devDemo(self) -> None:
        """C{dev.py demo ARGS} runs examples/demo.py with ARGS (here with the test's interpreter for .venv's)."""
        script = (
            "import sys, dev\n"
            "dev.ensure_venv = lambda: None\n"
            "dev.PYTHON = sys.executable\n"
            "sys.exit(dev.main(['demo', '--size', '1', '--seconds', '0.05']))\n"
        )
        result = run("-c", script)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("$ examples/demo.py --size 1 --seconds 0.05", result.stdout)
        self.assertIn("  bulk MB/s: ", result.stdout)

    def test_trace(self) -> None:
        """--trace logs every token to stderr, calls and bulk frames alike, and leaves the summary on stdout alone."""
        result = run("examples/demo.py", "--size", "0.1", "--seconds", "0.01", "--trace")
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertIn("-> STRING 'get'", result.stderr)
        self.assertIn("<- OPEN 'bulk.data'", result.stderr)
        self.assertIn("summary:", result.stdout.splitlines())
        self.assertNotIn("STRING", result.stdout)

    def test_badArguments(self) -> None:
        """A size that is not positive is refused with a usage error."""
        result = run("examples/demo.py", "--size", "0")
        self.assertEqual(result.returncode, 2)
        self.assertIn("must be positive", result.stderr)

    def test_help(self) -> None:
        """--help describes the demo and its options."""
        result = run("examples/demo.py", "--help")
        self.assertEqual(result.returncode, 0, result.stderr)
        for text in ("--size", "--seconds", "--window", "--trace", "bulk-transfer"):
            self.assertIn(text, result.stdout)


class FramingDemoTests(SynchronousTestCase):
    """examples/framing_demo.py, the framing layer without sockets, runs as its docstring says."""

    def test_runs(self) -> None:
        """A small run encodes and decodes the nested object and the byte string and prints a line for each."""
        result = run("examples/framing_demo.py", "--size", "1", "--width", "100")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], "chunkwire framing demo: encode, then decode fed in socket-sized chunks")
        self.assertRegex(lines[1], r"^nested object \(100 records\) .* ns/B\)$")
        self.assertRegex(lines[2], r"^1 MiB byte string .* decode in  4 KiB chunks .* ns/B\)$")
        self.assertRegex(lines[3], r"^1 MiB byte string .* decode in 64 KiB chunks .* ns/B\)$")
