"""Every example program's --help is plain text: usage, options and description, with no epydoc markup."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT, readUntil, startExample, stop

from .cli import address, bulkServer, clientRun, closedPort

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
        "--login-timeout",
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
        "--login-timeout",
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

    def test_badOption(self) -> None:
        """
        An unknown option is two lines on stderr: the error naming it, and
        where to find the options (not argparse's whole usage block); exit
        status 2.  bulk_client.py's subcommands parse the same way.
        """
        runs = {program: [program, "--no-such-option"] for program in PROGRAMS if program not in NOT_CLIENTS_OR_SERVERS}
        runs["bulk_client.py send"] = ["bulk_client.py", "send"]  # its FILE argument missing
        for name, (program, *arguments) in runs.items():
            done = clientRun(program, *arguments, timeout=30)
            self.assertEqual(done.returncode, 2, name)
            lines = done.stderr.splitlines()
            self.assertEqual(len(lines), 2, f"{name}: {done.stderr}")
            self.assertRegex(lines[0], r"error: (unrecognized arguments: --no-such-option|the following arguments)")
            self.assertEqual(lines[1], f"run '{name} --help' to see the options")


NOT_CLIENTS_OR_SERVERS = {"demo.py", "framing_demo.py"}
"""The demos: one command each, whose options are a size."""


class HelpImportTests(SynchronousTestCase):
    """bulk_client.py's and echo_client.py's --help and a mistyped option are quick: no Twisted, no chunkwire."""

    def imported(self, *arguments: str, program: str = "bulk_client.py") -> set[str]:
        """The modules a run of C{PROGRAM ARGUMENTS} imported (its C{-X importtime} lines)."""
        command = [sys.executable, "-X", "importtime", str(ROOT / "examples" / program), *arguments]
        done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
        self.assertIn(done.returncode, (0, 2), done.stderr)
        return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}

    def test_helpLoadsNoTwisted(self) -> None:
        """--help (and a subcommand's) imports no Twisted reactor, no codec core, no TLS and no chunkwire module."""
        runs = [("bulk_client.py", ["--help"]), ("bulk_client.py", ["send", "--help"])]
        runs += [("bulk_client.py", ["--no-such-option"]), ("echo_client.py", ["--help"])]
        runs += [("echo_client.py", ["--no-such-option"])]
        for program, arguments in runs:
            imported = self.imported(*arguments, program=program)
            self.assertIn("argparse", imported)  # the lines were read
            heavy = {
                name
                for name in imported
                if name.split(".")[0] in {"twisted", "framing", "protocols", "cryptography", "OpenSSL", "zope"}
            }
            self.assertEqual(heavy, set(), (program, arguments))


class CommandImportTests(SynchronousTestCase):
    """
    bulk_client.py's commands load TLS support only for an endpoint that
    speaks TLS (_connecting.withoutTLS), and no machinery they do not use.
    """

    def imported(self, *arguments: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        """A run of C{bulk_client.py ARGUMENTS} to its end, and the modules it imported (as L{HelpImportTests})."""
        command = [sys.executable, "-X", "importtime", str(ROOT / "examples" / "bulk_client.py"), *arguments]
        done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
        return done, {
            line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
        }

    def test_oneStreamLoadsNoTwisted(self) -> None:
        """
        A send and a fetch to a tcp: endpoint over one stream run on the
        blocking client (protocols.blockingbulk): no Twisted module is
        loaded, and none of what such a command does not use, that a user
        would pay for at every start: C{logging} and C{traceback} (nothing
        failed, no --debug), the login machinery (C{framing.login}: no login
        option given) and C{difflib} (it suggests a method name after a
        call to a missing one), and C{hashlib}, C{hmac} and OpenSSL's hashes
        (C{_hashlib}: a BLAKE3 transfer with an unkeyed sidecar hashes
        nothing with them), C{random} (a connection that never backs off
        draws no jitter) and C{ssl} (a plain connection: L{protocols.options}'
        hints still resolve, see C{test_options}); a send loads no C{json}
        either (only a download keeps a sidecar).
        """
        served = Path(self.mktemp()).resolve()
        served.mkdir(parents=True)
        port = bulkServer(self, served)
        source = served.parent / "source.bin"
        source.write_bytes(bytes(range(256)) * 400)
        fetched = served.parent / "fetched.bin"
        for command in (["send", str(source)], ["fetch", "source.bin", "--output", str(fetched)]):
            done, imported = self.imported("--connect", address(port), *command)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("protocols.blockingbulk", imported)  # the lines were read
            self.assertEqual({name for name in imported if name.split(".")[0] == "twisted"}, set(), command)
            self.assertEqual(imported & {"logging", "traceback", "difflib"}, set(), command)
            self.assertEqual(imported & {"hashlib", "_hashlib", "hmac"}, set(), command)
            self.assertNotIn("random", imported, command)  # (only a backoff's jitter draws a number)
            self.assertEqual(imported & {"ssl", "_ssl"}, set(), command)
            self.assertEqual({name for name in imported if name.startswith("framing.login")}, set(), command)
            if command[0] == "send":
                self.assertNotIn("json", imported)
        self.assertEqual(fetched.read_bytes(), source.read_bytes())

    def test_errorLoadsNoTwisted(self) -> None:
        """A refused connection on the blocking client is explained in its one line without loading Twisted."""
        done, imported = self.imported("--connect", address(closedPort(self)), "list")
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("connection refused (is the server running", done.stderr.splitlines()[-1])
        self.assertIn("_errors", imported)  # the lines were read
        self.assertEqual({name for name in imported if name.split(".")[0] == "twisted"}, set())

    def test_plainConnectionLoadsNoTLS(self) -> None:
        """
        A send to a tcp: endpoint on Twisted (striped: --streams 2) works with
        neither pyOpenSSL nor cryptography nor Twisted's TLS layer loaded.
        """
        served = Path(self.mktemp()).resolve()
        served.mkdir(parents=True)
        port = bulkServer(self, served)
        source = served.parent / "source.bin"
        source.write_bytes(bytes(range(256)) * 400)
        done, imported = self.imported("--connect", address(port), "--streams", "2", "send", str(source))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("sent source.bin", done.stdout)
        self.assertIn("twisted.internet.tcp", imported)  # the lines were read
        # (Twisted's attempts to import its TLS layer stay in the lines, which name failed imports too.)
        tls = {name for name in imported if name.split(".")[0] in {"cryptography", "service_identity"}}
        tls |= {name for name in imported if name.endswith("_sslverify")}
        self.assertEqual(tls, set())
        # Nor the reconnecting client's twisted.application (protocols/rpc/_endpoints.py imports it when used).
        self.assertEqual({name for name in imported if name.startswith("twisted.application")}, set())
        self.assertEqual((served / "source.bin").read_bytes(), source.read_bytes())

    def test_tlsConnection(self) -> None:
        """An ssl: endpoint still loads TLS support: a listing over TLS from a bulk server on an ssl: port."""
        from protocols.testing import CertificateAuthority

        work = Path(self.mktemp()).resolve()
        (work / "served").mkdir(parents=True)
        authority = CertificateAuthority.generate()
        caDirectory = authority.writeCADirectory(work / "ca")
        authority.issue("localhost", server=True).writePEM(work / "server.pem")
        listen = f"ssl:0:interface=127.0.0.1:privateKey={work / 'server.pem'}"
        server = startExample("bulk_server.py", "--listen", listen, "--dir", str(work / "served"))
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"bulk server listening on .* port=(\d+)\)").group(1))
        (work / "served" / "kept.bin").write_bytes(b"x" * 1000)
        where = f"ssl:host=127.0.0.1:port={port}:caCertsDir={caDirectory}:hostname=localhost"
        done, imported = self.imported("--connect", where, "list")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("kept.bin", done.stdout)
        self.assertIn("twisted.protocols.tls", imported)


class StartupTests(SynchronousTestCase):
    """What the example servers print when they start."""

    def test_optionsNamedExist(self) -> None:
        """
        Every option the start-up lines name (the login notice's advice, for
        one) is an option of that server: the echo server once suggested
        --users, which it does not take.
        """
        directory = str(Path(self.mktemp()).resolve())
        servers = {"echo_server.py": [], "kv_server.py": [], "bulk_server.py": ["--dir", directory]}
        for program, arguments in servers.items():
            process = startExample(program, "--listen", "tcp:0:interface=127.0.0.1", *arguments)
            self.addCleanup(stop, process)
            found = readUntil(process, rb"(?s)(.*) server listening on ")
            named = set(re.findall(r"--[a-z][a-z-]*", found.group(1).decode()))
            self.assertTrue(named or program == "echo_server.py", f"{program}: {found.group(1)!r}")
            helpText = clientRun(program, "--help", timeout=30).stdout
            for option in named:
                self.assertIn(option, helpText, f"{program} names {option} at start but does not take it")
            stop(process)
