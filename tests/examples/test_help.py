"""Every example program's --help is plain text: usage, options and description, with no epydoc markup."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from .cli import clientRun

PROGRAMS = {
    "echo_server.py": ["--listen", "--preamble-timeout", "--debug"],
    "kv_server.py": ["--listen", "--max-per-peer", "--debug"],
    "bulk_server.py": ["--listen", "--dir", "--stall-timeout", "--idle-timeout", "--max-connections", "--debug"],
    "echo_client.py": ["--connect", "--debug"],
    "kv_client.py": ["--connect", "--debug"],
    "bulk_client.py": ["--connect", "--streams", "--force", "--debug"],
    "interop_server.py": [
        "--listen",
        "--login-listen",
        "--certificate-listen",
        "--client-ca",
        "--users",
        "--tokens",
        "--max-connections",
        "--debug",
    ],
    "interop_client.py": [
        "--server",
        "--login-server",
        "--certificate-server",
        "--ca-dir",
        "--client-pem",
        "--case",
        "--list",
        "--case-timeout",
        "--debug",
    ],
    "demo.py": ["--size"],
    "framing_demo.py": ["--size"],
}


class HelpTests(SynchronousTestCase):
    """The examples' --help."""

    def test_plainText(self) -> None:
        """--help exits 0, names the program's options (the guard's on every server) and holds no C{...} or L{...}."""
        for program, options in PROGRAMS.items():
            done = clientRun(program, "--help", timeout=30)
            self.assertEqual(done.returncode, 0, f"{program}: {done.stderr}")
            for option in options:
                self.assertIn(option, done.stdout, program)
            self.assertNotRegex(done.stdout, r"[CLIB]\{|@ivar|@param", program)
