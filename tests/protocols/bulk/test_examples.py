"""The bulk examples run as their docstrings say: a server process, and client processes that send, fetch and list."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import readUntil, stop

from .support import negotiatedHash, payload, writeFile

ROOT = Path(__file__).resolve().parents[3]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
FINAL = re.compile(
    r"^(sent|fetched) (\S+): (\d+) bytes \(.*\) in [\d.]+ s, [\d.]+ MB/s, (?:sha256|blake3) ([0-9a-f]{64}) verified"
)


class BulkExampleTests(SynchronousTestCase):
    """examples/bulk_server.py and examples/bulk_client.py work together."""

    def client(self, port: int, *args: str, cwd: str | None = None) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "bulk_client.py"), "--connect", f"tcp:host=127.0.0.1:port={port}"]
            + list(args),
            cwd=cwd or ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_sendFetchList(self) -> None:
        """A file sent, striped and not, is listed, fetched back and verified with the same (negotiated) digest."""
        work = Path(self.mktemp()).resolve()
        served = work / "served"
        data = payload(3_000_000, seed=1)
        work.mkdir(parents=True)
        source = writeFile(work / "source.bin", data)
        digest = negotiatedHash(data).hexdigest()
        server = subprocess.Popen(
            [sys.executable, "examples/bulk_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--dir", str(served)],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
        )
        try:
            port = int(readUntil(server, rb"bulk server listening on .* port=(\d+)\)").group(1))
            lines = self.client(port, "send", source).splitlines()
            self.assertEqual(FINAL.match(lines[-1]).groups(), ("sent", "source.bin", str(len(data)), digest))
            lines = self.client(port, "--streams", "3", "send", source, "--name", "copy.bin").splitlines()
            self.assertEqual(FINAL.match(lines[-1]).group(4), digest)
            listing = self.client(port, "list")
            self.assertIn("copy.bin", listing)
            self.assertIn(str(len(data)), listing)
            lines = self.client(port, "--streams", "2", "fetch", "copy.bin", "--output", "back.bin", cwd=str(work))
            self.assertEqual(FINAL.match(lines.splitlines()[-1]).groups()[0::3], ("fetched", digest))
            self.assertEqual((work / "back.bin").read_bytes(), data)
            # --digest sha256 offers only SHA-256: the last line names it, with the file's SHA-256.
            lines = self.client(port, "--digest", "sha256", "send", source, "--name", "s.bin").splitlines()
            self.assertIn(f", sha256 {hashlib.sha256(data).hexdigest()} verified", lines[-1])
            stored = sorted(p.name for p in served.iterdir() if not p.name.startswith("."))
            self.assertEqual(stored, ["copy.bin", "s.bin", "source.bin"])
        finally:
            stop(server)
