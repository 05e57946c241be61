"""Every code snippet the docs include from docs/snippets/ runs and prints what the docs say it prints."""

from __future__ import annotations

import re
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT, readUntil, stop

SNIPPETS = ROOT / "docs" / "snippets"

# Each runnable snippet and lines its output must contain.
EXPECTED: dict[str, list[str]] = {
    "echo_tutorial.py": [
        "dict back: {'greeting': 'hello', 'numbers': [1, 2.5, 1180591620717411303424]}",
        "string back: HELLO",
    ],
    "rpc_tutorial.py": ["hello ada", "5", "['ada']", "refused: kwargs['b']", "secret is not callable"],
    "register_types.py": [
        "{'at': datetime.date(2024, 5, 17), 'where': [Point(x=1, y=2), Point(x=3, y=4)]}",
        "without the registry: unknown-type",
    ],
    "limits_constraints.py": ["BodyTooLarge body-too-large", "bytes b'ok'", "invalid-value ['qty'][2]"],
    "streaming.py": ["16777216 bytes back, digest ok: True"],
    "tls_echo.py": ["over TLS: {'secret': b'\\x00\\x01'}"],
    "shared_port.py": ["answers: [0, 1, 2, 3]"],
    "bulk_tutorial.py": [
        "uploaded; digest matches: True",
        "downloaded 10240000 bytes; same bytes: True",
        "sendFile: 10240000 bytes over 2 connections, sha256 verified",
        "fetchFile: same digest: True",
    ],
}
# Snippets that are test modules, run by trial and by pytest.
TEST_MODULES = ["testing_example.py"]
# A server that runs until interrupted and its client, run as the tutorial shows.
SERVER, CLIENT = "greeter_server.py", "greeter_client.py"


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *command], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)


class SnippetTests(SynchronousTestCase):
    """The docs' snippets are all checked, and each runs as shown."""

    def test_everySnippetChecked(self) -> None:
        """Every file in docs/snippets/ and every snippet an .rst page includes is run by this module."""
        files = {path.name for path in SNIPPETS.glob("*.py")}
        self.assertEqual(files, set(EXPECTED) | set(TEST_MODULES) | {SERVER, CLIENT})
        pages = list((ROOT / "docs").glob("*.rst")) + list((ROOT / "docs").glob("*/*.rst"))
        included = {m for page in pages for m in re.findall(r"literalinclude:: [./]*snippets/(\S+)", page.read_text())}
        self.assertTrue(included, "no page includes a snippet")
        self.assertEqual(included - files, set())

    def test_runnableSnippets(self) -> None:
        """Each runnable snippet exits 0 and prints the lines the docs show."""
        for name, lines in EXPECTED.items():
            result = run(str(SNIPPETS / name))
            self.assertEqual(result.returncode, 0, f"{name}: {result.stderr}")
            output = result.stdout.splitlines()
            for line in lines:
                self.assertIn(line, output, f"{name} printed {result.stdout!r}")

    def test_testingSnippetUnderTrial(self) -> None:
        """The testing how-to's module passes under trial."""
        for name in TEST_MODULES:
            result = run("-m", "twisted.trial", str(SNIPPETS / name))
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("PASSED (successes=2)", result.stdout)

    def test_testingSnippetUnderPytest(self) -> None:
        """The testing how-to's module passes under pytest, as the how-to runs it."""
        for name in TEST_MODULES:
            result = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(SNIPPETS / name))
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertRegex(result.stdout, r"\b[23] passed in ")

    def test_ownServer(self) -> None:
        """The tutorial's own server runs as a process, and its client, run twice, is greeted twice."""
        command = [sys.executable, str(SNIPPETS / SERVER), "tcp:0:interface=127.0.0.1"]
        server = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE)
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"serving Greeter on port (\d+)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        for name, visitor in (("ada", 1), ("bob", 2)):
            result = run(str(SNIPPETS / CLIENT), name, address)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout, f"hello {name}, you are visitor {visitor}\n")
