"""The example servers with --users and --client-ca, and their clients' login options, run as processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from framing.login._scram import MIN_ITERATIONS
from protocols.auth._tokens import addToken, newToken
from protocols.auth._users import addUser
from protocols.testing import CertificateAuthority
from tests.processes import ENV, ROOT, readUntil, runExample, startPython, stop

from .cli import address

PASSWORD_VARIABLE = "CHUNKWIRE_PASSWORD"
LOOPBACK = "tcp:0:interface=127.0.0.1"

REFUSED = "the server refused the login"
NEEDS_LOGIN = "the server requires a login"


def client(
    script: str, *arguments: str, password: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run C{examples/SCRIPT ARGUMENTS} to its end with C{password} in $CHUNKWIRE_PASSWORD (else none), no stdin."""
    environment = {name: value for name, value in ENV.items() if name != PASSWORD_VARIABLE}
    if password is not None:
        environment[PASSWORD_VARIABLE] = password
    return runExample(script, *arguments, cwd=cwd, env=environment)  # forked from the examples' zygote


def server(test: SynchronousTestCase, script: str, *arguments: str) -> tuple[int, bytes]:
    """Start C{examples/SCRIPT} on 127.0.0.1 for the test's length; give its port and its login notice."""
    _, port, notice = serverProcess(test, script, *arguments)
    return port, notice


def serverProcess(
    test: SynchronousTestCase, script: str, *arguments: str
) -> tuple[subprocess.Popen[bytes], int, bytes]:
    """L{server}, and the process too, to read its log."""
    process = startPython(f"examples/{script}", *arguments)
    test.addCleanup(stop, process)
    # One read for both lines: a second readUntil would not see what the first one read past.
    found = readUntil(process, rb"(logins: [^\n]*)\n(?:.*\n)*?.* server listening on .* port=(\d+)\)")
    return process, int(found.group(2)), found.group(1)


def oneLine(test: SynchronousTestCase, stderr: str, text: str) -> None:
    """C{stderr} is exactly one line, and it contains C{text}."""
    test.assertEqual(len(stderr.splitlines()), 1, stderr)
    test.assertIn(text, stderr)


class PasswordLoginTests(SynchronousTestCase):
    """kv_server.py and bulk_server.py with --users serve only clients that log in with a right password."""

    def setUp(self) -> None:
        self.work = Path(self.mktemp()).resolve()
        self.work.mkdir(parents=True)
        self.users = self.work / "users"
        addUser(self.users, "alice", b"alice's secret", iterations=MIN_ITERATIONS)
        addUser(self.users, "bob", b"bob's secret", iterations=MIN_ITERATIONS)
        (self.work / "alice.password").write_text("alice's secret\n")
        self.tokens = self.work / "tokens"
        (self.work / "robot.token").write_text(addToken(self.tokens, "robot") + "\n")
        (self.work / "forged.token").write_text(newToken() + "\n")

    def client(
        self, script: str, port: int, *arguments: str, password: str | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run C{examples/SCRIPT --connect PORT ARGUMENTS}, with C{password} in $CHUNKWIRE_PASSWORD if given."""
        return client(script, "--connect", address(port), *arguments, password=password, cwd=cwd)

    def test_keyValue(self) -> None:
        """
        kv: the right password works (file or environment), a wrong one and
        no login are refused, in one line; the server logs each login (by
        default, without --log).
        """
        process, port, notice = serverProcess(
            self,
            "kv_server.py",
            "--listen",
            "tcp:0:interface=127.0.0.1",
            "--users",
            str(self.users),
            "--tokens",
            str(self.tokens),
        )
        self.assertIn(b"logins: required (passwords of the users in", notice)
        passwordFile = str(self.work / "alice.password")
        put = self.client("kv_client.py", port, "--user", "alice", "--password-file", passwordFile, "put", "k", "v")
        self.assertEqual((put.returncode, put.stdout), (0, "put k\n"), put.stderr)
        got = self.client("kv_client.py", port, "--user", "bob", "get", "k", password="bob's secret")
        self.assertEqual((got.returncode, got.stdout), (0, "v\n"), got.stderr)
        wrong = self.client("kv_client.py", port, "--user", "alice", "get", "k", password="guess")
        self.assertEqual((wrong.returncode, wrong.stdout), (1, ""))
        oneLine(self, wrong.stderr, REFUSED)
        unknown = self.client("kv_client.py", port, "--user", "mallory", "get", "k", password="guess")
        self.assertEqual(unknown.returncode, 1)
        self.assertEqual(unknown.stderr, wrong.stderr)
        anonymous = self.client("kv_client.py", port, "get", "k")
        self.assertEqual((anonymous.returncode, anonymous.stdout), (1, ""))
        oneLine(self, anonymous.stderr, NEEDS_LOGIN)
        readUntil(process, rb"login: alice from .*\n(?:.*\n)*.*login: bob from ")

    def test_keyValueTokens(self) -> None:
        """kv with --tokens: the token from chunkwire-adduser --token logs in; a made-up one is refused in one line."""
        port, notice = server(
            self, "kv_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--tokens", str(self.tokens)
        )
        self.assertIn(b"logins: required (bearer tokens in", notice)
        put = self.client("kv_client.py", port, "--token-file", str(self.work / "robot.token"), "put", "k", "v")
        self.assertEqual((put.returncode, put.stdout), (0, "put k\n"), put.stderr)
        forged = self.client("kv_client.py", port, "--token-file", str(self.work / "forged.token"), "get", "k")
        self.assertEqual((forged.returncode, forged.stdout), (1, ""))
        oneLine(self, forged.stderr, REFUSED)
        password = self.client("kv_client.py", port, "--user", "alice", "get", "k", password="alice's secret")
        self.assertEqual(password.returncode, 1)
        oneLine(self, password.stderr, REFUSED)

    def test_bulkConfinesEachUser(self) -> None:
        """
        bulk: alice's upload (striped) lands in DIR/alice; bob can neither
        list nor fetch it; no login: nothing.  The server logs the logins by default.
        """
        served = self.work / "served"
        process, port, _ = serverProcess(
            self,
            "bulk_server.py",
            "--listen",
            "tcp:0:interface=127.0.0.1",
            "--users",
            str(self.users),
            "--dir",
            str(served),
        )
        local = self.work / "local"
        local.mkdir()
        (local / "diary.txt").write_bytes(b"dear diary " * 1000)
        alice = ("--user", "alice", "--password-file", str(self.work / "alice.password"))
        sent = self.client("bulk_client.py", port, *alice, "--streams", "2", "send", "diary.txt", cwd=local)
        self.assertEqual(sent.returncode, 0, sent.stderr)
        self.assertEqual((served / "alice" / "diary.txt").read_bytes(), b"dear diary " * 1000)
        self.assertFalse((served / "diary.txt").exists())
        listed = self.client("bulk_client.py", port, "--user", "alice", "list", password="alice's secret")
        self.assertEqual(listed.stdout.split(), ["11000", "diary.txt"])
        bobList = self.client("bulk_client.py", port, "--user", "bob", "list", password="bob's secret")
        self.assertEqual((bobList.returncode, bobList.stdout), (0, ""), bobList.stderr)
        for name in ("diary.txt", "../alice/diary.txt"):
            fetch = self.client(
                "bulk_client.py",
                port,
                "--user",
                "bob",
                "fetch",
                name,
                "--output",
                "x",
                password="bob's secret",
                cwd=local,
            )
            self.assertEqual(fetch.returncode, 1, name)
            self.assertFalse((local / "x").exists())
        self.assertEqual(sorted(p.name for p in served.iterdir()), ["alice", "bob"])
        readUntil(process, rb"login: alice from .*\n(?:.*\n)*.*login: bob from ")
        anonymous = self.client("bulk_client.py", port, "list")
        self.assertEqual((anonymous.returncode, anonymous.stdout), (1, ""))
        oneLine(self, anonymous.stderr, NEEDS_LOGIN)


class ClientCertificateTests(SynchronousTestCase):
    """kv_server.py with --client-ca serves only clients whose TLS certificate that CA issued."""

    def setUp(self) -> None:
        self.work = Path(self.mktemp()).resolve()
        self.work.mkdir(parents=True)
        authority, other = CertificateAuthority.generate(), CertificateAuthority.generate("another CA")
        self.caDirectory = authority.writeCADirectory(self.work / "ca")
        authority.issue("localhost", server=True).writePEM(self.work / "server.pem")
        self.carol = authority.issue("carol")
        self.carol.writePEM(self.work / "carol.pem")
        self.stranger = other.issue("carol")
        self.stranger.writePEM(self.work / "stranger.pem")

    def test_certificateLogin(self) -> None:
        """A certificate from the CA logs in; no certificate, or one from another CA, cannot even connect."""
        listen = f"ssl:0:interface=127.0.0.1:privateKey={self.work / 'server.pem'}"
        port, notice = server(self, "kv_server.py", "--listen", listen, "--client-ca", str(self.caDirectory))
        self.assertIn(b"client certificates", notice)
        put = client(
            "kv_client.py",
            "--connect",
            self.carol.clientEndpoint(self.caDirectory, port),
            "--certificate-login",
            "put",
            "k",
            "v",
        )
        self.assertEqual((put.returncode, put.stdout), (0, "put k\n"), put.stderr)
        plain = f"ssl:host=127.0.0.1:port={port}:caCertsDir={self.caDirectory}:hostname=localhost"
        for description in (plain, self.stranger.clientEndpoint(self.caDirectory, port)):
            refused = client("kv_client.py", "--connect", description, "get", "k")
            self.assertEqual((refused.returncode, refused.stdout), (1, ""), description)
            oneLine(self, refused.stderr, "the server wants a TLS client certificate from a CA it trusts")

    def test_needsTLS(self) -> None:
        """--client-ca with a plain tcp: listener stops at once with one line saying that it needs ssl:."""
        result = client("kv_server.py", "--listen", "tcp:0", "--client-ca", str(self.caDirectory))
        self.assertEqual(result.returncode, 1)
        oneLine(self, result.stderr, "--client-ca needs TLS: tcp:0 is not an ssl: endpoint")


class ExplainLoginTests(SynchronousTestCase):
    """examples/_errors.explain says what went wrong with a login in one line, and what to do."""

    def setUp(self) -> None:
        sys.path.insert(0, str(ROOT / "examples"))
        self.addCleanup(sys.path.pop, 0)
        from _errors import explain

        self.explain = explain

    def test_refused(self) -> None:
        """A refused login names the endpoint and the possible causes, without saying which it was."""
        from framing.login._errors import LoginRefused

        line = self.explain(LoginRefused("the server refused the login"), "tcp:host=h:port=1")
        self.assertTrue(line.startswith("cannot log in to tcp:host=h:port=1: the server refused the login ("), line)

    def test_otherLoginFailure(self) -> None:
        """Any other failed login (the server did not prove it knows the password) is given as it is."""
        from framing.login._errors import ServerNotVerified

        line = self.explain(ServerNotVerified("the server did not prove it"), "tcp:host=h:port=1")
        self.assertEqual(line, "cannot log in to tcp:host=h:port=1: the server did not prove it")

    def test_needsLogin(self) -> None:
        """A server that drops a client for calling before logging in: the line names the login options."""
        from framing._errors import PeerError

        error = PeerError("the peer reported: sent something refused before logging in (unknown-type: ...)")
        line = self.explain(error, "tcp:host=h:port=1")
        self.assertIn("cannot connect to tcp:host=h:port=1: the server requires a login (give --user NAME", line)

    def test_certificateAlert(self) -> None:
        """A TLS alert about the client's certificate is not called a TLS mismatch; each alert is named."""
        from protocols._mismatch import NotTLS

        for alert in ("certificate required", "unknown ca", "bad certificate", "certificate unknown"):
            line = self.explain(NotTLS(Exception(f"tlsv13 alert {alert}")), "ssl:host=h:port=1")
            self.assertIn("the server wants a TLS client certificate from a CA it trusts", line)
            self.assertIn(f"TLS alert: {alert}", line)
        self.assertNotIn("client certificate", self.explain(NotTLS(Exception("wrong version number")), "ssl:x"))

    def test_serverConfiguration(self) -> None:
        """A bad user file, or --client-ca without TLS, stops a server with the error's own words."""
        from protocols.auth._realms import ClientCertificatesNeedTLS
        from protocols.auth._secretfiles import SecretFileError

        self.assertEqual(
            self.explain(SecretFileError("users", 3, "bad line"), None), "cannot run: users, line 3: bad line"
        )
        self.assertEqual(
            self.explain(ClientCertificatesNeedTLS("--client-ca needs TLS"), None), "cannot run: --client-ca needs TLS"
        )
