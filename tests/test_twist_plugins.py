"""The twist plugins in twisted/plugins/chunkwire_plugins.py: options, help text, and real services."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from twisted.application.service import IServiceMaker
from twisted.application.twist._options import TwistOptions
from twisted.internet import reactor
from twisted.internet.endpoints import serverFromString
from twisted.plugin import IPlugin, getPlugins
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder
from framing.login._scram import MIN_ITERATIONS
from framing.wire import PREAMBLE
from protocols._guard import GuardedFactory, GuardPolicy
from protocols.auth._tokens import addToken
from protocols.auth._users import addUser
from protocols.bulk._integrity import availableDigests, newHash
from protocols.testing import CertificateAuthority
from tests.processes import ENV, ROOT, readUntil, runPython, stop
from twisted.plugins import chunkwire_plugins


def _command() -> str:
    """How twist names itself in usage lines when run as this test process is (from sys.argv[0])."""
    return usage.Options.getSynopsis(usage.Options()).removeprefix("Usage: ").removesuffix(" [options]")


def twist(*arguments: str) -> subprocess.Popen[bytes]:
    """Start C{python -m twisted} (the C{twist} command) with C{arguments}, its log on a pipe."""
    command = [sys.executable, "-m", "twisted", *arguments]
    return subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


class OptionsTests(SynchronousTestCase):
    """The plugins' options parse as their help text says."""

    def test_pluginsFound(self) -> None:
        """Twisted's plugin system finds the three service makers by their tap names."""
        names = {maker.tapname for maker in getPlugins(IServiceMaker)}
        self.assertTrue({"chunkwire-echo", "chunkwire-kv", "chunkwire-bulk"} <= names, names)
        self.assertTrue(IPlugin.providedBy(chunkwire_plugins.echoServiceMaker))
        self.assertTrue(IPlugin.providedBy(chunkwire_plugins.bulkServiceMaker))

    def test_listenRepeatable(self) -> None:
        """--listen may be given several times and every description is kept, in order."""
        options = chunkwire_plugins.EchoOptions()
        options.parseOptions(["--listen", "tcp:1234", "-l", "unix:/tmp/x.sock", "--trace"])
        self.assertEqual((options["listen"], options["trace"]), (["tcp:1234", "unix:/tmp/x.sock"], True))

    def test_defaults(self) -> None:
        """Without --listen, echo listens on tcp:8750 and kv on tcp:8760, with the default limits."""
        echo, kv = chunkwire_plugins.EchoOptions(), chunkwire_plugins.KeyValueOptions()
        echo.parseOptions([])
        kv.parseOptions([])
        self.assertEqual((echo["listen"], kv["listen"], echo.limits()), (["tcp:8750"], ["tcp:8760"], None))

    def test_maxBytes(self) -> None:
        """--max-bytes becomes the max_bytes_length of the service's Limits."""
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--max-bytes", "1000"])
        self.assertEqual(options.limits().max_bytes_length, 1000)

    def test_bulkOptions(self) -> None:
        """chunkwire-bulk listens on tcp:8770 by default, hashes inline, and takes --dir and --hashing."""
        options = chunkwire_plugins.BulkServiceOptions()
        options.parseOptions(["--dir", "/tmp/served"])
        self.assertEqual(
            (options["listen"], options["dir"], options["hashing"]), (["tcp:8770"], "/tmp/served", "inline")
        )
        options = chunkwire_plugins.BulkServiceOptions()
        options.parseOptions(["-d", "/tmp/x", "--hashing", "thread", "-l", "tcp:1"])
        self.assertEqual((options["listen"], options["dir"], options["hashing"]), (["tcp:1"], "/tmp/x", "thread"))

    def test_bulkRefusesBadOptions(self) -> None:
        """chunkwire-bulk without --dir, or with an unknown --hashing, is a usage error."""
        self.assertRaises(usage.UsageError, chunkwire_plugins.BulkServiceOptions().parseOptions, [])
        bad = ["--dir", "/tmp/x", "--hashing", "gpu"]
        self.assertRaises(usage.UsageError, chunkwire_plugins.BulkServiceOptions().parseOptions, bad)

    def test_badListen(self) -> None:
        """
        A --listen description that does not parse (whatever Twisted's parser
        raises for it), or whose key file is missing, is a usage error of one
        line naming the option and the description.
        """
        for description in ("tcp:abc", "tcp:1:bogus=3", "nonsense:1", "haproxy:tcp:x", "ssl:1:privateKey=/no/such.pem"):
            options = chunkwire_plugins.EchoOptions()
            with self.assertRaises(usage.UsageError) as raised:
                options.parseOptions(["--listen", "tcp:1", "--listen", description])
            self.assertTrue(str(raised.exception).startswith(f"--listen {description}: "), raised.exception)
            self.assertEqual(len(str(raised.exception).splitlines()), 1)

    def test_synopsisOnce(self) -> None:
        """
        The usage line under twist names the command, the plugin and its
        synopsis once each: twist's own C{plugin [plugin_options]} is not
        repeated before the plugin's name.
        """
        twistOptions = TwistOptions()
        twistOptions.parseOptions(["chunkwire-kv", "--listen", "tcp:1"])
        synopsis = twistOptions.subOptions.getSynopsis()
        self.assertEqual(
            synopsis, f"Usage: {_command()} [options] chunkwire-kv {chunkwire_plugins.KeyValueOptions.synopsis}"
        )

    def test_errorThenOneLine(self) -> None:
        """After an error, twist shows one line pointing at --help, not the whole option table."""
        twistOptions = TwistOptions()
        self.assertRaises(usage.UsageError, twistOptions.parseOptions, ["chunkwire-kv", "--bogus"])
        self.assertEqual(str(twistOptions).splitlines()[-1], f"Run '{_command()} chunkwire-kv --help' for its options.")
        self.assertNotIn("--preamble-timeout", str(twistOptions))
        helpful = TwistOptions()
        helpful.parseOptions(["chunkwire-kv", "--listen", "tcp:1"])
        self.assertIn("--preamble-timeout", str(helpful.subOptions))

    def test_makeBulkService(self) -> None:
        """The bulk service maker creates the served directory and one endpoint service per --listen."""
        directory = Path(self.mktemp()) / "served"
        options = chunkwire_plugins.BulkServiceOptions()
        options.parseOptions(["--dir", str(directory), "--listen", "tcp:0"])
        service = chunkwire_plugins.bulkServiceMaker.makeService(options)
        self.assertEqual((len(list(service)), service.running, directory.is_dir()), (1, 0, True))

    def test_bulkServiceSteadyAllocator(self) -> None:
        """The bulk service fixes malloc's thresholds as the example bulk server does (its reads follow)."""
        from protocols import bulk

        asked: list[bool] = []
        self.patch(bulk, "steadyAllocator", lambda: asked.append(True) or True)
        options = chunkwire_plugins.BulkServiceOptions()
        options.parseOptions(["--dir", str(Path(self.mktemp()) / "served"), "--listen", "tcp:0"])
        chunkwire_plugins.bulkServiceMaker.makeService(options)
        self.assertEqual(asked, [True])

    def test_guardOptions(self) -> None:
        """Each plugin takes the example servers' guard options, defaulting to GuardPolicy's; 0 turns a rule off."""
        for options in (
            chunkwire_plugins.EchoOptions(),
            chunkwire_plugins.KeyValueOptions(),
            chunkwire_plugins.BulkServiceOptions(),
        ):
            options.parseOptions(
                ["--dir", "/tmp/x"] if isinstance(options, chunkwire_plugins.BulkServiceOptions) else []
            )
            self.assertEqual(options.policy(), GuardPolicy())
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--stall-timeout", "5", "--idle-timeout", "0", "--max-per-peer", "3", "--min-rate", "10"])
        expected = GuardPolicy(stallTimeout=5.0, idleTimeout=None, maxPerPeer=3, minRate=10.0)
        self.assertEqual(options.policy(), expected)

    def test_servicesAreGuarded(self) -> None:
        """Every plugin's listening services build guarded connections with the options' policy."""
        makers = [
            (chunkwire_plugins.echoServiceMaker, []),
            (chunkwire_plugins.keyValueServiceMaker, []),
            (chunkwire_plugins.bulkServiceMaker, ["--dir", str(Path(self.mktemp()).resolve())]),
        ]
        for maker, extra in makers:
            options = maker.options()
            options.parseOptions(["--listen", "tcp:0", "--preamble-timeout", "2", *extra])
            (child,) = list(maker.makeService(options))
            self.assertIsInstance(child.factory, GuardedFactory, maker.tapname)
            self.assertEqual(child.factory.policy.preambleTimeout, 2.0, maker.tapname)

    def test_makeService(self) -> None:
        """makeService builds one endpoint service per --listen, not yet started."""
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--listen", "tcp:0", "--listen", "tcp:0"])
        service = chunkwire_plugins.keyValueServiceMaker.makeService(options)
        self.assertEqual((len(list(service)), service.running), (2, 0))


class TwistTests(SynchronousTestCase):
    """C{twist chunkwire-echo} and C{twist chunkwire-kv} run as real processes."""

    def test_help(self) -> None:
        """twist PLUGIN --help exits cleanly and shows each plugin's options and description."""
        expected = {
            "chunkwire-echo": ["--listen", "--trace", "--max-bytes", "Run chunkwire's echo service"],
            "chunkwire-kv": ["--listen", "--trace", "--tracebacks", "Run chunkwire's key-value RPC service"],
            "chunkwire-bulk": ["--listen", "--trace", "--dir", "--hashing", "Run chunkwire's bulk-transfer service"],
        }
        guard = ["--preamble-timeout", "--stall-timeout", "--idle-timeout", "--max-connections", "--max-per-peer"]
        for plugin, texts in expected.items():
            result = runPython("-m", "twisted", plugin, "--help", timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            for text in texts + guard:
                self.assertIn(text, result.stdout, plugin)
            self.assertNotRegex(result.stdout, r"[CLIB]\{|@ivar|@param", f"{plugin}: epytext markup in --help")

    def test_guardInEffect(self) -> None:
        """A chunkwire-echo process started with --preamble-timeout 0.5 drops a client that sends nothing."""
        server = twist("chunkwire-echo", "--listen", "tcp:0:interface=127.0.0.1", "--preamble-timeout", "0.5")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"starting on (\d+)").group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
            started = time.monotonic()
            while connection.recv(65536):  # the ERROR token that says why, then the close
                pass
            self.assertLess(time.monotonic() - started, 10)

    def test_bulkWithoutDirectory(self) -> None:
        """twist chunkwire-bulk without --dir exits with a usage error that names --dir."""
        result = subprocess.run(
            [sys.executable, "-m", "twisted", "chunkwire-bulk"],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--dir is required", result.stdout + result.stderr)

    def test_echoOneObject(self) -> None:
        """A chunkwire-echo process sends back an object written to it over a plain socket."""
        server = twist("chunkwire-echo", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"starting on (\d+)").group(1))
        sent = {"name": "ada", "data": b"\x00\x01" * 100, "n": [1, 2.5, None]}
        with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
            connection.sendall(PREAMBLE + Encoder().encode(sent))
            decoder = Decoder()
            received: list[object] = []
            while not received:
                chunk = connection.recv(65536)
                self.assertTrue(chunk, "the server closed the connection")
                received += decoder.feed(chunk)
        self.assertEqual(received, [sent])

    def test_keyValue(self) -> None:
        """A chunkwire-kv process stores a value that the example client puts and gets back."""
        server = twist("chunkwire-kv", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"starting on (\d+)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"

        def client(*arguments: str) -> str:
            command = [sys.executable, "examples/kv_client.py", "--connect", address, *arguments]
            result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            return result.stdout

        self.assertEqual(client("put", "colour", "blue"), "put colour\n")
        self.assertEqual(client("get", "colour"), "blue\n")

    def test_bulk(self) -> None:
        """A chunkwire-bulk process stores a file the example client sends, verified, and lists it."""
        work = Path(self.mktemp()).resolve()
        work.mkdir(parents=True)
        source = work / "source.bin"
        data = bytes(range(256)) * 5000
        source.write_bytes(data)
        served = work / "served"
        server = twist("chunkwire-bulk", "--listen", "tcp:0:interface=127.0.0.1", "--dir", str(served))
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"starting on (\d+)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"

        def client(*arguments: str) -> str:
            command = [sys.executable, "examples/bulk_client.py", "--connect", address, *arguments]
            result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            return result.stdout

        expected = newHash(availableDigests()[0])
        expected.update(data)
        self.assertIn(f"{availableDigests()[0]} {expected.hexdigest()} verified", client("send", str(source)))
        self.assertEqual((served / "source.bin").read_bytes(), data)
        self.assertEqual(client("list").split(), [str(len(data)), "source.bin"])


class LoginOptionsTests(SynchronousTestCase):
    """chunkwire-kv and chunkwire-bulk take --users and --client-ca; chunkwire-echo stays open."""

    def setUp(self) -> None:
        self.work = Path(self.mktemp()).resolve()
        self.work.mkdir(parents=True)
        self.users = self.work / "users"
        addUser(self.users, "alice", b"secret", iterations=MIN_ITERATIONS)
        authority = CertificateAuthority.generate()
        self.ca = authority.writeCADirectory(self.work / "ca")
        authority.issue("localhost", server=True).writePEM(self.work / "server.pem")

    def test_parsed(self) -> None:
        """--users, --client-ca and --tokens are kept as given, and are None (an open service) by default."""
        for options, extra in (
            (chunkwire_plugins.KeyValueOptions(), []),
            (chunkwire_plugins.BulkServiceOptions(), ["--dir", str(self.work / "served")]),
        ):
            options.parseOptions(extra)
            self.assertEqual((options["users"], options["client-ca"], options["tokens"]), (None, None, None))
            self.assertFalse(options.logins().required)
            options = type(options)()
            tokens = self.work / "tokens"
            addToken(tokens, "robot")
            arguments = ["--users", str(self.users), "--client-ca", str(self.ca), "--tokens", str(tokens)]
            # A key file that exists: --listen descriptions are parsed, and an ssl: key file read, as options.
            listen = f"ssl:0:privateKey={self.work / 'server.pem'}"
            options.parseOptions([*arguments, "--listen", listen, *extra])
            given = (options["users"], options["client-ca"], options["tokens"])
            self.assertEqual(given, (str(self.users), str(self.ca), str(tokens)))
            self.assertTrue(options.logins().required)

    def test_refused(self) -> None:
        """A missing user or token file, --client-ca with a plain listener, and --users for echo are usage errors."""
        kv = chunkwire_plugins.KeyValueOptions
        error = self.assertRaises(usage.UsageError, kv().parseOptions, ["--users", str(self.work / "nope")])
        self.assertIn(str(self.work / "nope"), str(error))
        self.assertRaises(usage.UsageError, kv().parseOptions, ["--tokens", str(self.work / "nope")])
        error = self.assertRaises(usage.UsageError, kv().parseOptions, ["--client-ca", str(self.ca)])
        self.assertIn("--client-ca needs TLS: tcp:8760", str(error))
        echo = chunkwire_plugins.EchoOptions
        self.assertRaises(usage.UsageError, echo().parseOptions, ["--users", str(self.users)])

    def brokers(self, maker: object, *arguments: str) -> object:
        options = maker.options()  # type: ignore[attr-defined]
        options.parseOptions(list(arguments))
        (child,) = list(maker.makeService(options))  # type: ignore[attr-defined]
        self.assertIsInstance(child.factory, GuardedFactory)
        return child.factory.wrappedFactory

    def test_services(self) -> None:
        """With --users the services' brokers have a login gate and no shared root; without, a root and no gate."""
        kv, bulk = chunkwire_plugins.keyValueServiceMaker, chunkwire_plugins.bulkServiceMaker
        served = str(self.work / "served")
        cases = [
            (kv, ["--listen", "tcp:0"], False),
            (kv, ["--listen", "tcp:0", "--users", str(self.users)], True),
            (bulk, ["--listen", "tcp:0", "--dir", served], False),
            (bulk, ["--listen", "tcp:0", "--dir", served, "--users", str(self.users)], True),
        ]
        for maker, arguments, gated in cases:
            brokers = self.brokers(maker, *arguments)
            self.assertEqual((brokers.gate is not None, brokers.root is None), (gated, gated), arguments)  # type: ignore[attr-defined]

    def test_clientCertificateEndpoint(self) -> None:
        """With --client-ca the service listens on the TLS endpoint that requires client certificates."""
        from protocols.auth._certificates import requireClientCertificates

        listen = f"ssl:0:interface=127.0.0.1:privateKey={self.work / 'server.pem'}"
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--listen", listen, "--client-ca", str(self.ca)])
        (child,) = list(chunkwire_plugins.keyValueServiceMaker.makeService(options))
        expected = serverFromString(reactor, requireClientCertificates(listen, str(self.ca)))
        self.assertEqual(type(child.endpoint), type(expected))
        self.assertIsNotNone(child.factory.wrappedFactory.gate)

    def test_keyValueProcess(self) -> None:
        """A chunkwire-kv process with --users says logins are required, serves alice, refuses a client with none."""
        server = twist("chunkwire-kv", "--listen", "tcp:0:interface=127.0.0.1", "--users", str(self.users))
        self.addCleanup(stop, server)
        # Both lines, in either order.
        port = int(readUntil(server, rb"(?s)(?=.*logins: required).*starting on (\d+)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        command = [sys.executable, "examples/kv_client.py", "--connect", address]
        environment = dict(ENV, CHUNKWIRE_PASSWORD="secret")
        run = {"cwd": ROOT, "env": environment, "capture_output": True, "text": True, "timeout": 30}
        put = subprocess.run([*command, "--user", "alice", "put", "k", "v"], **run)  # type: ignore[call-overload]
        self.assertEqual((put.returncode, put.stdout), (0, "put k\n"), put.stderr)
        anonymous = subprocess.run([*command, "get", "k"], **run)  # type: ignore[call-overload]
        self.assertEqual(anonymous.returncode, 1)
        self.assertIn("the server requires a login", anonymous.stderr)
