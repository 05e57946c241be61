"""Tests for protocols.auth._users: the user file, its checker, addUser and removeUser."""

from __future__ import annotations

import base64
import os
import stat
from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import IUsernamePassword, UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.cred.portal import IRealm, Portal
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import Interface, implementer
from zope.interface.verify import verifyObject

from framing.login._scram import DEFAULT_ITERATIONS, MIN_ITERATIONS, ScramClient, ScramServer, ScramVerifier
from protocols.auth._tokens import BearerToken
from protocols.auth._users import REFUSAL, InvalidName, IScramResponse, UserFile, UserFileError, addUser, removeUser

FAST = MIN_ITERATIONS
SECRET = b"decoy secret"


def scramLogin(users: UserFile, name: str, password: bytes) -> Any:
    """Run a SCRAM exchange against C{users}; return the checker's Deferred."""
    client = ScramClient(name, password)
    server = ScramServer(users.verifier, SECRET, decoyIterations=FAST)
    response = server.response(client.final(server.first(client.first())))
    return users.requestAvatarId(response)


class UserFileTests(SynchronousTestCase):
    """A user file made by addUser logs its users in, and only them."""

    def setUp(self) -> None:
        self.path = self.mktemp()
        addUser(self.path, "alice", b"wonderland", FAST)

    def test_providesChecker(self) -> None:
        """UserFile is a twisted.cred checker for SCRAM responses and plain passwords."""
        users = UserFile(self.path)
        self.assertTrue(verifyObject(ICredentialsChecker, users))
        self.assertEqual(users.credentialInterfaces, (IScramResponse, IUsernamePassword))
        self.assertEqual(users.credentialsInterfaces, users.credentialInterfaces)

    def test_portalLogin(self) -> None:
        """A portal with the UserFile registered logs a SCRAM response in to the realm's avatar for the user."""
        logins: list[bytes] = []

        @implementer(IRealm)
        class Realm:
            def requestAvatar(self, avatarId: bytes, mind: object, *interfaces: Any) -> tuple[Any, object, Any]:
                logins.append(avatarId)
                return interfaces[0], f"avatar of {avatarId.decode()}", lambda: None

        portal = Portal(Realm(), [UserFile(self.path)])
        client = ScramClient("alice", b"wonderland")
        server = ScramServer(UserFile(self.path).verifier, SECRET, decoyIterations=FAST)
        response = server.response(client.final(server.first(client.first())))
        _, avatar, _ = self.successResultOf(portal.login(response, None, Interface))
        self.assertEqual((avatar, logins), ("avatar of alice", [b"alice"]))
        client.verify(server.final())

    def test_roundTrip(self) -> None:
        """The stored verifier is the one derived from the password with the stored salt."""
        verifier = UserFile(self.path).verifier("alice")
        assert verifier is not None
        self.assertEqual(verifier.iterations, FAST)
        self.assertEqual(ScramVerifier.fromPassword(b"wonderland", verifier.salt, FAST), verifier)

    def test_scramLogin(self) -> None:
        """A SCRAM exchange with the right password gives the user's name as the avatar id."""
        self.assertEqual(self.successResultOf(scramLogin(UserFile(self.path), "alice", b"wonderland")), b"alice")

    def test_refusalsLookAlike(self) -> None:
        """A wrong password and an unknown user are refused with the same error text."""
        users = UserFile(self.path)
        wrong = self.failureResultOf(scramLogin(users, "alice", b"looking glass"), UnauthorizedLogin)
        unknown = self.failureResultOf(scramLogin(users, "bob", b"wonderland"), UnauthorizedLogin)
        self.assertEqual(str(wrong.value), REFUSAL)
        self.assertEqual(str(unknown.value), REFUSAL)

    def test_usernamePassword(self) -> None:
        """Plain username and password credentials are checked by deriving the verifier again."""
        users = UserFile(self.path)
        good = users.requestAvatarId(UsernamePassword(b"alice", b"wonderland"))
        self.assertEqual(self.successResultOf(good), b"alice")
        for name, password in ((b"alice", b"nope"), (b"nobody", b"wonderland"), (b"\xff", b"x")):
            failure = self.failureResultOf(users.requestAvatarId(UsernamePassword(name, password)), UnauthorizedLogin)
            self.assertEqual(str(failure.value), REFUSAL)

    def test_otherCredentialsRefused(self) -> None:
        """Credentials of another kind are refused."""
        self.failureResultOf(UserFile(self.path).requestAvatarId(BearerToken(b"alice")), UnauthorizedLogin)

    def test_reloadAfterChange(self) -> None:
        """A user added or removed after the checker was made is seen at the next lookup."""
        users = UserFile(self.path)
        self.assertIsNone(users.verifier("bob"))
        addUser(self.path, "bob", b"builder", FAST)
        self.assertIsNotNone(users.verifier("bob"))
        self.assertTrue(removeUser(self.path, "alice"))
        self.assertIsNone(users.verifier("alice"))
        self.failureResultOf(scramLogin(users, "alice", b"wonderland"), UnauthorizedLogin)

    def test_decoyIterations(self) -> None:
        """The decoy iteration count is the count most users have, or the default for an empty file."""
        addUser(self.path, "bob", b"b", FAST + 1)
        addUser(self.path, "carol", b"c", FAST + 1)
        users = UserFile(self.path)
        self.assertEqual(users.decoyIterations(), FAST + 1)
        for name in ("alice", "bob", "carol"):
            removeUser(self.path, name)
        self.assertEqual(users.decoyIterations(), DEFAULT_ITERATIONS)

    def test_replaceKeepsOrderAndComments(self) -> None:
        """Replacing a user keeps their line's place, the comments and the other users."""
        with open(self.path, "a") as f:
            f.write("# a comment\n\n")
        addUser(self.path, "bob", b"builder", FAST)
        before = UserFile(self.path).verifier("alice")
        addUser(self.path, "alice", b"new password", FAST)
        with open(self.path) as f:
            lines = f.read().splitlines()
        self.assertEqual([line.split(":")[0] for line in lines], ["alice", "# a comment", "", "bob"])
        self.assertNotEqual(UserFile(self.path).verifier("alice"), before)

    def test_removeUnknown(self) -> None:
        """Removing a user who is not there, or from a missing file, says so and changes nothing."""
        with open(self.path, "rb") as f:
            before = f.read()
        self.assertFalse(removeUser(self.path, "nobody"))
        self.assertFalse(removeUser(self.mktemp(), "alice"))
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_unicodeLineBreaksKept(self) -> None:
        """A comment holding a Unicode line separator stays one line when the file is rewritten."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("# see\u2028bob:below\n")
        addUser(self.path, "bob", b"builder", FAST)
        self.assertIsNotNone(UserFile(self.path).verifier("bob"))
        with open(self.path, encoding="utf-8", newline="") as f:
            self.assertEqual(f.read().split("\n")[1], "# see\u2028bob:below")

    def test_removeFromMalformedFile(self) -> None:
        """Removing a user from a malformed file raises UserFileError and leaves it alone."""
        with open(self.path, "ab") as f:
            f.write(b"\xff\n")
        self.assertRaises(UserFileError, removeUser, self.path, "alice")
        self.assertRaises(UserFileError, addUser, self.path, "alice", b"pw", FAST)

    def test_fileMode(self) -> None:
        """A new user file is mode 0600; a rewrite keeps an existing file's mode."""
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        os.chmod(self.path, 0o640)
        addUser(self.path, "bob", b"builder", FAST)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o640)

    def test_noPasswordStored(self) -> None:
        """The file holds neither the password nor its base64; only its decoy key (no temporary file) is beside it."""
        addUser(self.path, "bob", b"builder-secret", FAST)
        with open(self.path, "rb") as f:
            content = f.read()
        self.assertNotIn(b"builder-secret", content)
        self.assertNotIn(base64.b64encode(b"builder-secret"), content)
        name = os.path.basename(self.path)
        self.assertEqual(sorted(os.listdir(os.path.dirname(os.path.abspath(self.path)))), [name, name + ".decoy-key"])


class AddUserRefusalTests(SynchronousTestCase):
    """addUser refuses what the file cannot hold, and leaves the file alone."""

    def test_badNames(self) -> None:
        """Empty names, names with ':', line breaks, controls, a leading '#' or edge spaces are refused."""
        path = self.mktemp()
        for name in ("", "a:b", "a\nb", "a\rb", "a\x00b", "#root", " alice", "alice "):
            self.assertRaises(InvalidName, addUser, path, name, b"pw", FAST)
        self.assertFalse(os.path.exists(path))

    def test_badPasswordOrIterations(self) -> None:
        """An empty password or fewer than 4096 iterations is refused."""
        path = self.mktemp()
        self.assertRaises(ValueError, addUser, path, "alice", b"", FAST)
        self.assertRaises(ValueError, addUser, path, "alice", b"pw", FAST - 1)
        self.assertFalse(os.path.exists(path))

    def test_malformedFileLeftAlone(self) -> None:
        """Adding to a malformed file raises UserFileError and does not rewrite it."""
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("garbage\n")
        self.assertRaises(UserFileError, addUser, path, "alice", b"pw", FAST)
        with open(path) as f:
            self.assertEqual(f.read(), "garbage\n")


class MalformedFileTests(SynchronousTestCase):
    """A malformed user file is an error naming the line, when it is loaded."""

    def setUp(self) -> None:
        self.path = self.mktemp()
        addUser(self.path, "alice", b"pw", FAST)
        with open(self.path) as f:
            self.good = f.read().splitlines()[0]

    def loadWithThirdLine(self, line: bytes) -> UserFileError:
        """The error from loading a file whose third line is C{line}."""
        with open(self.path, "wb") as f:
            f.write(b"# users\n" + self.good.encode() + b"\n" + line + b"\n")
        return self.assertRaises(UserFileError, UserFile, self.path)

    def test_lineNumberNamed(self) -> None:
        """Each kind of bad line is reported with its number (3) and the file's path."""
        fields = self.good.split(":")
        salt, storedKey = fields[3], fields[4]
        for bad in (
            "bob",
            "bob:SCRAM-SHA-256:4096:" + salt + ":" + storedKey,
            "bob:SCRAM-SHA-1:4096:" + ":".join(fields[3:]),
            "bob:SCRAM-SHA-256:4095:" + ":".join(fields[3:]),
            "bob:SCRAM-SHA-256:many:" + ":".join(fields[3:]),
            "bob:SCRAM-SHA-256:4096:" + salt + ":" + storedKey + ":not*base64",
            "bob:SCRAM-SHA-256:4096:" + salt + ":" + storedKey + ":" + salt,
            "bob:SCRAM-SHA-256:4096::" + storedKey + ":" + storedKey,
            self.good,
        ):
            error = self.loadWithThirdLine(bad.encode())
            self.assertEqual(error.line, 3)
            self.assertIn(f"{self.path}, line 3:", str(error))

    def test_notUtf8(self) -> None:
        """A line that is not UTF-8 is reported with its number."""
        self.assertEqual(self.loadWithThirdLine(b"b\xffb:SCRAM-SHA-256").line, 3)

    def test_missingFile(self) -> None:
        """A missing user file is a UserFileError when the checker is made."""
        error = self.assertRaises(UserFileError, UserFile, self.mktemp())
        self.assertIsNone(error.line)

    def test_goesBadWhileRunning(self) -> None:
        """A file that goes bad refuses every login and logs once; fixed, it works again."""
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        users = UserFile(self.path)
        with open(self.path, "a") as f:
            f.write("broken line\n")
        self.assertIsNone(users.verifier("alice"))
        self.assertIsNone(users.verifier("alice"))
        self.assertEqual(len([e for e in events if "line 2" in str(e.get("reason"))]), 1)
        os.remove(self.path)
        self.assertIsNone(users.verifier("alice"))
        addUser(self.path, "alice", b"pw", FAST)
        self.assertIsNotNone(users.verifier("alice"))
