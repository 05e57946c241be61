"""Every snippet the docs include from docs/snippets/, and every README snippet, runs and prints what the docs say."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from protocols.bulk._integrity import availableDigests
from tests.processes import ENV, ROOT, readUntil, runScript, stop

SNIPPETS = ROOT / "docs" / "snippets"

# Each runnable snippet and lines its output must contain.
EXPECTED: dict[str, list[str]] = {
    "echo_tutorial.py": [
        "dict back: {'greeting': 'hello', 'numbers': [1, 2.5, 1180591620717411303424]}",
        "string back: HELLO",
    ],
    "rpc_tutorial.py": [
        "hello ada",
        "5",
        "refused here: kwargs['b']",
        "['ada']",
        "refused by the server: kwargs['b']",
        "secret is not callable",
    ],
    "register_types.py": [
        "{'at': datetime.date(2024, 5, 17), 'where': [Point(x=1, y=2), Point(x=3, y=4)]}",
        "without the registry: unknown-type",
    ],
    "typed_interfaces.py": [
        "at decoration: Files.open: parameter 'path': Path is neither a built-in type, a dataclass,"
        " a registered type nor a remote interface",
        "shapes: 1",
        "area: 4.0 ('howto.IShape',)",
        "refused here: invalid-value args[0]",
        "refused here: invalid-value args[1][0].y",
        "refused here: invalid-value kwargs['style']",
        "IDrawing has no erase",
        "names: ['square']",
        "refused by the server: args[0]",
    ],
    "limits_constraints.py": ["BodyTooLarge body-too-large", "bytes b'ok'", "invalid-value ['qty'][2]"],
    "streaming.py": ["16777216 bytes back, digest ok: True"],
    "object_streams.py": [
        "ticks: [100, 101, 102, 103, 104]",
        "closed on the server: 2",
        "average: 20.0",
        "doubled: [2, 4, 6] count: 3",
        "refused by the server: result[1]",
    ],
    "tls_echo.py": ["over TLS: {'secret': b'\\x00\\x01'}"],
    "auth_logins.py": [
        "ada has 1 note(s)",
        "build-bot has 1 note(s)",
        "refused: UsernamePassword",
        "refused: Anonymous",
        "logged out: ada",
    ],
    "auth_urls.py": [
        "URL scheme and parts: chunkwire 52 52",
        "increment: 1",
        "after a restart, the same URL: 2",
        "revoked: refused",
    ],
    "shared_port.py": ["answers: [0, 1, 2, 3]"],
    "deadlines_metadata.py": [
        "shop: request id r-17",
        "inventory: apples, time left under 0.5 s: True",
        "stock: 3",
        "deadline exceeded: 'slow' did not finish within its deadline",
    ],
    "interceptor_context.py": [
        "[r-1] placing apples",
        "[r-2] placing pears",
        "[r-1] placed apples",
        "[r-2] placed pears",
        "[-] outside any call",
    ],
    "tracing.py": [
        "hello Ada",
        "spans: greeter/greet greeter/greet",
        "server span's parent is the client span: True",
        "attributes: {'rpc.system': 'chunkwire', 'rpc.method': 'greet', 'rpc.service': 'greeter'}",
        "the greeter's own call is a child of its server span: True",
        "one trace: True spans: 4",
    ],
    "without_twisted.py": [
        "get: hello",
        "list: ['greeting']",
        "missing: 'nobody'",
        "refused by the server: body-too-large args[0]",
        "no such method: NoSuchMethod: 'gett' is not a remote method of this object; did you mean 'get'?",
        "twisted imported: False",
    ],
    "without_twisted_logins.py": [
        "ada reads: hello",
        "refused here, nothing sent: args[0]",
        "build-bot reads: hello",
        "wrong password: the server refused the login",
        "twisted imported: False",
    ],
    "without_twisted_asyncio_logins.py": [
        "ada reads: hello",
        "refused here, nothing sent: args[0]",
        "build-bot reads: hello",
        "wrong password: the server refused the login",
        "twisted imported: False",
    ],
    "without_twisted_deadlines.py": [
        "blocking: the server saw under 2 s left: True and {'request-id': 'r-17'}",
        "blocking: deadline exceeded: 'slow' did not finish within its deadline",
        "blocking: cancelled on the server: 1",
        "asyncio: request ids seen: ['r-18']",
        "asyncio: deadline exceeded: 'slow' did not finish within its deadline",
        "asyncio: cancelled on the server: 2",
        "twisted imported: False",
    ],
    "without_twisted_callbacks.py": [
        "changed: greeting hello",
        "changed: greeting None",
        "unwatched: True",
        "twisted imported: False",
    ],
    "without_twisted_streams.py": [
        "blocking ticks: [100, 101, 102, 103, 104]",
        "closed on the server: 2",
        "quote: 1",
        "refused here: result[1]",
        "asyncio ticks: [100, 101, 102, 103, 104]",
        "closed on the server: 4",
        "average: 20.0",
        "twisted imported: False",
    ],
    "without_twisted_bulk.py": [
        f"uploaded: 3000000 bytes, {availableDigests()[0]} checked by the service",
        "downloaded; same digest: True",
        "no such file: absent.bin",
        "own method got the file; same digest: True",
        "sent again, resumed from: 3000000 bytes",
        "asyncio: same digests: True",
        "asyncio: own method, same digest: True",
        "twisted imported: False",
    ],
    "without_twisted_asyncio.py": [
        "got back: 100 name 42",
        "missing: 'nobody'",
        "listed: 100",
        "twisted imported: False",
    ],
    "compiled_core.py": ["decoded: [(1, 5), (7, 7)]", "refused: not a span: [9, 2]"],
    "trace_tutorial.py": ["back: {'name': 'ada', 'n': 5}"],
    "bulk_tutorial.py": [
        "uploaded; digest matches: True",
        "downloaded 10240000 bytes; same bytes: True",
        f"sendFile: 10240000 bytes over 2 connections, {availableDigests()[0]} verified",
        "fetchFile: same digest: True",
    ],
}
# Snippets that are test modules, run by trial and by pytest.
TEST_MODULES = ["testing_example.py", "testing_streams.py"]
# A server that runs until interrupted and its client, run as the tutorial shows.
SERVER, CLIENT = "greeter_server.py", "greeter_client.py"


def fresh(snippet: Path) -> bool:
    """Whether a snippet's subject is what a new interpreter imports (it reads C{sys.modules}): it runs in one."""
    return "sys.modules" in snippet.read_text("utf-8")


def run(*command: str) -> subprocess.CompletedProcess[str]:
    if command[0].endswith(".py") and not fresh(Path(command[0])):
        return runScript(*command)  # python SNIPPET.py, forked from the examples' zygote where it can be
    return subprocess.run([sys.executable, *command], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)


class SnippetTests(SynchronousTestCase):
    """The docs' snippets are all checked, and each runs as shown."""

    def test_everySnippetChecked(self) -> None:
        """Every file in docs/snippets/ and every snippet an .rst page includes is run by this module."""
        # A module named _*.py is not a snippet: the snippets import it (its text runs with theirs).
        helpers = {path.name for path in SNIPPETS.glob("_*.py")}
        files = {path.name for path in SNIPPETS.glob("*.py")} - helpers
        self.assertEqual(files, set(EXPECTED) | set(TEST_MODULES) | {SERVER, CLIENT})
        pages = list((ROOT / "docs").glob("*.rst")) + list((ROOT / "docs").glob("*/*.rst"))
        included = {m for page in pages for m in re.findall(r"literalinclude:: [./]*snippets/(\S+)", page.read_text())}
        self.assertTrue(included, "no page includes a snippet")
        self.assertEqual(included - files - helpers, set())

    def test_runnableSnippets(self) -> None:
        """Each runnable snippet exits 0 and prints the lines the docs show."""
        for name, lines in EXPECTED.items():
            result = run(str(SNIPPETS / name))
            self.assertEqual(result.returncode, 0, f"{name}: {result.stderr}")
            output = result.stdout.splitlines()
            for line in lines:
                self.assertIn(line, output, f"{name} printed {result.stdout!r}")

    def test_traceShown(self) -> None:
        """The tutorial's trace snippet prints each token both ways, as the tutorial shows them."""
        result = run(str(SNIPPETS / "trace_tutorial.py"))
        self.assertEqual(result.returncode, 0, result.stderr)
        tutorial = (ROOT / "docs" / "tutorial.rst").read_text("utf-8")
        port = re.compile(r"127\.0\.0\.1:\d+")
        shown = [port.sub("PORT", line.strip()) for line in tutorial.splitlines() if "EchoClient#info] 127" in line]
        printed = [port.sub("PORT", line) for line in result.stdout.splitlines()]
        self.assertGreaterEqual(len(shown), 8)
        for line in shown:
            self.assertIn(line, printed)

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
        """The tutorial's own server runs as a process, greets its client twice, and SIGTERM stops it cleanly."""
        command = [sys.executable, str(SNIPPETS / SERVER), "tcp:0:interface=127.0.0.1"]
        server = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE)
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"serving Greeter on port (\d+)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        for name, visitor in (("ada", 1), ("bob", 2)):
            result = run(str(SNIPPETS / CLIENT), name, address)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout, f"hello {name}, you are visitor {visitor}\n")
        # SIGTERM drains (no connection is open: at once) and the process exits 0.
        server.send_signal(signal.SIGTERM)
        self.assertEqual(server.wait(60), 0)


README = ROOT / "README.md"
PLUGIN_CACHE_COMMAND = re.compile(r'^python -c "(from twisted\.plugin import .*)"$', re.MULTILINE)


def readmeSnippets() -> list[str]:
    """The README's python code blocks, in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.DOTALL)


class ReadmeTests(SynchronousTestCase):
    """Every README python snippet runs as pasted, and its documented commands work."""

    def test_snippetsRun(self) -> None:
        """Each README python snippet runs in a fresh interpreter and prints what its '# comments' say."""
        snippets = readmeSnippets()
        self.assertGreaterEqual(len(snippets), 2)
        for snippet in snippets:
            result = subprocess.run(
                [sys.executable, "-c", snippet], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60
            )
            self.assertEqual(result.returncode, 0, f"{snippet}\n{result.stderr}")
            expected = re.findall(r"^\s*print\(.*\)  # (.+)$", snippet, re.MULTILINE)
            self.assertTrue(expected, f"the snippet shows no output:\n{snippet}")
            self.assertEqual(result.stdout.splitlines(), expected)

    def test_rpcExampleInTheTutorialsStyle(self) -> None:
        """
        The README's RPC example teaches what the tutorial teaches: a remote
        interface both ends share, implemented by a Referenceable, called
        through a typed proxy, run with Deferred.fromCoroutine (it once
        taught @remote constraints and ensureDeferred instead).
        """
        [readme] = [snippet for snippet in readmeSnippets() if "rpc.serve(" in snippet]
        tutorial = (SNIPPETS / "rpc_tutorial.py").read_text("utf-8")
        shape = [
            r"class I\w+\(rpc\.RemoteInterface, Protocol, name=",
            r"class \w+\(rpc\.Referenceable, I\w+\)",
            r"rpc\.connect\(reactor, \w+, interface=I\w+\)",
            r"react\(lambda reactor: Deferred\.fromCoroutine\(main\(",
        ]
        for source, name in ((readme, "README"), (tutorial, "tutorial")):
            for pattern in shape:
                self.assertRegex(source, pattern, name)
            self.assertNotIn("ensureDeferred", source, name)

    def test_namesWhatAgRPCUserLooksFor(self) -> None:
        """The README names object streams, deadlines, metadata and the clients without Twisted (with their how-tos)."""
        readme = README.read_text("utf-8")
        for phrase in (
            "Streams of objects",
            "Deadlines and metadata",
            "rpc.callContext(",
            "Clients without Twisted",
            "protocols.blocking",
            "protocols.asyncioclient",
            "fileStream(path)",
        ):
            self.assertIn(phrase, readme)
        for page in re.findall(r"`(docs/howto/[\w-]+\.rst)`", readme):
            self.assertTrue((ROOT / page).exists(), page)
        for page in ("streams", "deadlines", "without-twisted"):
            self.assertIn(f"docs/howto/{page}.rst", readme)

    def test_pluginCacheCommand(self) -> None:
        """The README's plugin-cache command writes dropin.cache beside an installed plugin and exits cleanly."""
        found = PLUGIN_CACHE_COMMAND.search(README.read_text("utf-8"))
        assert found is not None, "the README does not show the plugin cache command"
        # An installation of the plugin module alone, as pip lays it out in site-packages.
        site = Path(self.mktemp()).resolve()
        plugins = site / "twisted" / "plugins"
        plugins.mkdir(parents=True)
        (plugins / "chunkwire_plugins.py").write_bytes((ROOT / "twisted/plugins/chunkwire_plugins.py").read_bytes())
        env = dict(ENV, PYTHONPATH=os.pathsep.join([str(site), ENV["PYTHONPATH"]]))
        command = [sys.executable, "-c", found.group(1)]
        result = subprocess.run(command, cwd=site, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        self.assertIn(b"chunkwire_plugins", (plugins / "dropin.cache").read_bytes())
