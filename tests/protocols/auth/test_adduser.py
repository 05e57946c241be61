"""Tests for protocols.auth._adduser: the chunkwire-adduser command."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator

from twisted.cred.credentials import UsernamePassword
from twisted.trial.unittest import SynchronousTestCase

from framing.login._scram import MIN_ITERATIONS
from protocols.auth import _adduser as adduser
from protocols.auth._tokens import BearerToken, TokenChecker
from protocols.auth._users import UserFile, addUser

FAST = str(MIN_ITERATIONS)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class AddUserCommandTests(SynchronousTestCase):
    """chunkwire-adduser adds, replaces and removes users, and makes tokens."""

    def setUp(self) -> None:
        self.path = self.mktemp()
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)

    def command(self, *argv: str, stdin: str = "") -> int:
        """main() with C{argv}, standard input C{stdin}."""
        self.patch(sys, "stdin", io.StringIO(stdin))
        return adduser.main(list(argv))

    def answers(self, *typed: str) -> None:
        """Make getpass return C{typed}, one per prompt."""
        replies: Iterator[str] = iter(typed)
        self.patch(adduser, "getpass", lambda prompt: next(replies))

    def login(self, name: bytes, password: bytes) -> bytes:
        """The avatar id a plain login against the file gives."""
        result: bytes = self.successResultOf(UserFile(self.path).requestAvatarId(UsernamePassword(name, password)))
        return result

    def test_passwordStdin(self) -> None:
        """--password-stdin reads one line (without its line end) as the password."""
        status = self.command("--iterations", FAST, "--password-stdin", self.path, "alice", stdin="s3cret\n")
        self.assertEqual(status, 0)
        self.assertEqual(self.login(b"alice", b"s3cret"), b"alice")
        self.assertEqual(self.stderr.getvalue(), "")

    def test_askedTwice(self) -> None:
        """Without --password-stdin the password is asked twice and used when both agree."""
        self.answers("pässword", "pässword")
        self.assertEqual(self.command("--iterations", FAST, self.path, "bob"), 0)
        self.assertEqual(self.login(b"bob", "pässword".encode()), b"bob")

    def test_mismatch(self) -> None:
        """Two different entries are a one-line error, exit status 1, and no file."""
        self.answers("one", "two")
        self.assertEqual(self.command("--iterations", FAST, self.path, "bob"), 1)
        self.assertEqual(self.stderr.getvalue(), "chunkwire-adduser: error: the passwords do not match\n")
        self.assertFalse(os.path.exists(self.path))

    def test_emptyPassword(self) -> None:
        """An empty password is refused with exit status 1."""
        self.assertEqual(self.command("--password-stdin", self.path, "bob", stdin="\n"), 1)
        self.assertIn("empty", self.stderr.getvalue())
        self.answers("", "")
        self.assertEqual(self.command(self.path, "bob"), 1)
        self.assertFalse(os.path.exists(self.path))

    def test_badNameAndIterations(self) -> None:
        """A name the file cannot hold, or too few iterations, is a command-line error: exit status 2."""
        self.assertEqual(self.command("--password-stdin", self.path, "a:b", stdin="pw\n"), 2)
        self.assertEqual(self.command("--password-stdin", "--iterations", "10", self.path, "a", stdin="pw\n"), 2)
        self.assertEqual(len(self.stderr.getvalue().splitlines()), 2)
        self.assertFalse(os.path.exists(self.path))

    def test_saysWhatItDid(self) -> None:
        """
        Each change made is one line on standard output naming the user and
        the file (added, then updated, then removed), never the password.
        """
        for stdin in ("first-secret\n", "second-secret\n"):
            self.assertEqual(self.command("--iterations", FAST, "--password-stdin", self.path, "alice", stdin=stdin), 0)
        self.assertEqual(self.command("--remove", self.path, "alice"), 0)
        self.assertEqual(
            self.stdout.getvalue().splitlines(),
            [
                f"added user 'alice' in {self.path}",
                f"updated the password of user 'alice' in {self.path}",
                f"removed user 'alice' from {self.path}",
            ],
        )
        self.assertNotIn("secret", self.stdout.getvalue() + self.stderr.getvalue())

    def test_tokenNote(self) -> None:
        """With --token, standard output is the token alone; the line saying what was done is on standard error."""
        self.assertEqual(self.command("--token", self.path, "svc"), 0)
        token = self.stdout.getvalue()
        self.assertRegex(token, r"^\S{43}\n$")
        self.assertIn(f"new token for 'svc' in {self.path}", self.stderr.getvalue())
        self.assertNotIn(token.strip(), self.stderr.getvalue())
        self.assertEqual(self.command("--token", "--remove", self.path, "svc"), 0)
        self.assertIn(f"removed the token of 'svc' from {self.path}", self.stdout.getvalue())

    def test_usage(self) -> None:
        """A missing argument is a usage error: exit status 2."""
        self.assertEqual(self.command(self.path), 2)

    def test_remove(self) -> None:
        """--remove removes a user; removing one who is not there is exit status 1."""
        addUser(self.path, "alice", b"pw", MIN_ITERATIONS)
        self.assertEqual(self.command("--remove", self.path, "alice"), 0)
        self.assertIsNone(UserFile(self.path).verifier("alice"))
        self.assertEqual(self.command("--remove", self.path, "alice"), 1)
        self.assertIn("not in", self.stderr.getvalue())

    def test_malformedFile(self) -> None:
        """A malformed user file is a one-line error naming the line, exit status 1."""
        with open(self.path, "w") as f:
            f.write("# users\nbroken\n")
        self.assertEqual(self.command("--password-stdin", self.path, "alice", stdin="pw\n"), 1)
        self.assertIn("line 2", self.stderr.getvalue())

    def test_token(self) -> None:
        """--token prints a new token once; the file accepts it and does not hold it; --remove removes it."""
        self.assertEqual(self.command("--token", self.path, "svc"), 0)
        token = self.stdout.getvalue().strip()
        self.assertEqual(len(token), 43)
        with open(self.path) as f:
            self.assertNotIn(token, f.read())
        checker = TokenChecker.fromFile(self.path)
        self.assertEqual(self.successResultOf(checker.requestAvatarId(BearerToken(token.encode()))), b"svc")
        self.assertEqual(self.command("--token", "--remove", self.path, "svc"), 0)
        self.assertEqual(self.command("--token", "--remove", self.path, "svc"), 1)


class ModuleRunTests(SynchronousTestCase):
    """python -m protocols.auth._adduser runs the command."""

    def test_runAsModule(self) -> None:
        """The module run as a program adds a user from standard input and exits 0."""
        path = self.mktemp()
        env = dict(os.environ, PYTHONPATH=ROOT)
        argv = [sys.executable, "-m", "protocols.auth._adduser", "--iterations", FAST, "--password-stdin", path, "x"]
        done = subprocess.run(argv, input=b"pw\n", env=env, capture_output=True, timeout=60)
        self.assertEqual((done.returncode, done.stderr), (0, b""))
        self.assertIsNotNone(UserFile(path).verifier("x"))
