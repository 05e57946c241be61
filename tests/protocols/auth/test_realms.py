"""protocols/auth/_realms.py: the services' realms, their portal and their listening descriptions."""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface import Interface

from protocols import rpc
from protocols.auth._certificates import CertificateChecker, IPeerCertificate, PeerCertificate
from protocols.auth._interfaces import IRemoteRoot
from protocols.auth._mechanisms import Refused
from protocols.auth._realms import (
    OPEN,
    ClientCertificatesNeedTLS,
    DirectoryRealm,
    ServiceLogins,
    SharedRootRealm,
    UnsafeAvatarId,
    listenDescriptions,
    pathComponent,
    servicePortal,
)
from protocols.auth._tokens import IBearerToken, addToken
from protocols.auth._users import IScramResponse, addUser
from protocols.testing import CertificateAuthority

from ..helpers import pytestTest, trialTest

HOSTILE = [
    b"",
    b".",
    b"..",
    b"../x",
    b"a/b",
    b"/etc",
    b"a\\b",
    b"a\x00b",
    b".hidden",
    b"x" * 256,
    b"\xff\xfe",
    b"line\nbreak",
    (),
    None,
    42,
]
"""Avatar ids never made a directory: empty, dots, separators, NUL, hidden, too long, not UTF-8, not names."""


class Root(rpc.Referenceable):
    """A root made for one directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory


class SharedRootRealmTests(SynchronousTestCase):
    """Every avatar of a SharedRootRealm gets the one root."""

    def test_sameRootForEveryone(self) -> None:
        """Two avatar ids get the same root object, as IRemoteRoot, with a logout that does nothing."""
        root = Root(Path("."))
        realm = SharedRootRealm(root)
        interface, first, logout = realm.requestAvatar(b"alice", None, IRemoteRoot)
        _, second, _ = realm.requestAvatar(b"bob", None, IRemoteRoot)
        self.assertEqual((interface, first, second, logout()), (IRemoteRoot, root, root, None))

    def test_onlyRemoteRoot(self) -> None:
        """Asked for any interface but IRemoteRoot, the realm raises NotImplementedError."""
        self.assertRaises(NotImplementedError, SharedRootRealm(Root(Path("."))).requestAvatar, b"a", None, Interface)


class DirectoryRealmTests(SynchronousTestCase):
    """Each avatar of a DirectoryRealm gets the root of its own directory, and nothing else."""

    def setUp(self) -> None:
        self.base = Path(self.mktemp()) / "base"
        self.made: list[Path] = []
        self.realm = DirectoryRealm(self.base, self.makeRoot)

    def makeRoot(self, directory: Path) -> Root:
        self.made.append(directory)
        return Root(directory)

    def test_baseMade(self) -> None:
        """The base directory is made (mode 0700) when the realm is."""
        self.assertEqual(stat.S_IMODE(self.base.stat().st_mode), 0o700)

    def test_ownDirectory(self) -> None:
        """alice's root is made for base/alice, which is made with mode 0700."""
        interface, root, logout = self.realm.requestAvatar(b"alice", None, IRemoteRoot)
        self.assertEqual((interface, root.directory, logout()), (IRemoteRoot, self.base / "alice", None))
        self.assertEqual(stat.S_IMODE((self.base / "alice").stat().st_mode), 0o700)

    def test_oneRootPerUser(self) -> None:
        """A user's second login gets the same root (their connections share it); another user gets another."""
        first = self.realm.requestAvatar(b"alice", None, IRemoteRoot)[1]
        again = self.realm.requestAvatar(b"alice", None, IRemoteRoot)[1]
        other = self.realm.requestAvatar(b"bob", None, IRemoteRoot)[1]
        self.assertIs(first, again)
        self.assertIsNot(first, other)
        self.assertEqual(self.made, [self.base / "alice", self.base / "bob"])

    def test_textAndUnicode(self) -> None:
        """A text id, and a UTF-8 id outside ASCII, are names like any other."""
        self.assertEqual(self.realm.requestAvatar("carol", None, IRemoteRoot)[1].directory, self.base / "carol")
        self.assertEqual(self.realm.requestAvatar("zoë".encode(), None, IRemoteRoot)[1].directory, self.base / "zoë")

    def test_hostileIdsRefused(self) -> None:
        """Every unsafe avatar id is refused with UnauthorizedLogin (a Refused too); no directory or root is made."""
        for avatarId in HOSTILE:
            with self.subTest(avatarId=avatarId):
                error = self.assertRaises(UnauthorizedLogin, self.realm.requestAvatar, avatarId, None, IRemoteRoot)
                self.assertIsInstance(error, Refused)
                self.assertIsInstance(error, UnsafeAvatarId)
        self.assertEqual((self.made, list(self.base.iterdir())), ([], []))

    def test_longestName(self) -> None:
        """A name of exactly 255 bytes is accepted; pathComponent gives it back as text."""
        self.assertEqual(pathComponent(b"x" * 255), "x" * 255)

    def test_hostileCertificate(self) -> None:
        """A client certificate whose common name is ../x passes the checker but is refused by the realm."""
        issued = CertificateAuthority.generate().issue("../x")
        from cryptography import x509

        certificate = PeerCertificate(x509.load_pem_x509_certificate(issued.certPEM))
        avatarId = self.successResultOf(CertificateChecker().requestAvatarId(certificate))
        self.assertEqual(avatarId, b"../x")
        self.assertRaises(UnsafeAvatarId, self.realm.requestAvatar, avatarId, None, IRemoteRoot)
        self.assertFalse((self.base.parent / "x").exists())

    def test_onlyRemoteRoot(self) -> None:
        """Asked for any interface but IRemoteRoot, the realm raises NotImplementedError and makes nothing."""
        self.assertRaises(NotImplementedError, self.realm.requestAvatar, b"alice", None, Interface)
        self.assertEqual(self.made, [])


class ServicePortalTests(SynchronousTestCase):
    """servicePortal turns --users, --client-ca (and a token file) into a portal, or None."""

    def setUp(self) -> None:
        self.realm = SharedRootRealm(Root(Path(".")))
        self.directory = Path(self.mktemp())
        self.directory.mkdir()

    def interfaces(self, portal: Any) -> set[Any]:
        return set(portal.listCredentialsInterfaces())

    def test_open(self) -> None:
        """With neither a user file nor a CA directory there is no portal: the service is open."""
        self.assertIsNone(servicePortal(self.realm, None, None))

    def test_users(self) -> None:
        """A user file gives a portal that checks SCRAM proofs and passwords, and nothing else (no anonymous)."""
        users = self.directory / "users"
        addUser(users, "alice", b"secret", iterations=4096)
        portal = servicePortal(self.realm, users, None)
        assert portal is not None
        self.assertIs(portal.realm, self.realm)
        self.assertEqual(self.interfaces(portal), {IScramResponse, IUsernamePassword})
        self.assertNotIn(IAnonymous, self.interfaces(portal))

    def test_clientCA(self) -> None:
        """A CA directory gives a portal that maps client certificates to avatar ids."""
        portal = servicePortal(self.realm, None, self.directory)
        assert portal is not None
        self.assertEqual(self.interfaces(portal), {IPeerCertificate})

    def test_all(self) -> None:
        """A user file, a CA directory and a token file together: all three kinds of credentials."""
        users, tokens = self.directory / "users", self.directory / "tokens"
        addUser(users, "alice", b"secret", iterations=4096)
        addToken(tokens, "robot")
        portal = servicePortal(self.realm, users, self.directory, tokens)
        assert portal is not None
        expected = {IScramResponse, IUsernamePassword, IPeerCertificate, IBearerToken}
        self.assertEqual(self.interfaces(portal), expected)

    def test_missingUserFile(self) -> None:
        """A user file that does not exist is an error at start, not an open service."""
        from protocols.auth._secretfiles import SecretFileError

        self.assertRaises(SecretFileError, servicePortal, self.realm, self.directory / "nope", None)

    def test_notice(self) -> None:
        """The start-up line says whether logins are required, and how."""
        self.assertFalse(OPEN.required)
        self.assertIn("logins: not required", OPEN.notice())
        both = ServiceLogins("u", "ca")
        self.assertTrue(both.required)
        self.assertEqual(
            both.notice(), "logins: required (passwords of the users in u; client certificates from the CAs in ca)"
        )
        self.assertEqual(ServiceLogins(tokens="t").notice(), "logins: required (bearer tokens in t)")

    def test_serviceLogins(self) -> None:
        """ServiceLogins gives the same portal and descriptions as servicePortal and listenDescriptions."""
        self.assertIsNone(OPEN.portal(self.realm))
        portal = ServiceLogins(clientCA=str(self.directory)).portal(self.realm)
        assert portal is not None
        self.assertEqual(self.interfaces(portal), {IPeerCertificate})
        self.assertEqual(OPEN.listen(["tcp:1"]), ["tcp:1"])
        self.assertRaises(ClientCertificatesNeedTLS, ServiceLogins(clientCA="ca").listen, ["tcp:1"])


class ListenDescriptionsTests(SynchronousTestCase):
    """listenDescriptions makes every listening description require client certificates with --client-ca."""

    def test_withoutCA(self) -> None:
        """Without a CA directory the descriptions are kept as given, TLS or not."""
        given = ["tcp:8760", "unix:/tmp/kv.sock", "ssl:8761:privateKey=k.pem"]
        self.assertEqual(listenDescriptions(given, None), given)

    def test_sslRequiresCertificates(self) -> None:
        """With a CA directory an ssl: description becomes a chunkwire-tls: one with caCertsDir=, same key and port."""
        [description] = listenDescriptions(["ssl:8761:interface=127.0.0.1:privateKey=k.pem"], "/etc/ca")
        self.assertTrue(description.startswith("chunkwire-tls:"), description)
        for part in ("8761", "interface=127.0.0.1", "privateKey=k.pem", "caCertsDir=/etc/ca"):
            self.assertIn(part, description)

    def test_plainRefused(self) -> None:
        """With a CA directory a tcp: or unix: description is refused, naming it: client certificates need TLS."""
        for plain in ("tcp:8760", "unix:/tmp/kv.sock"):
            given = ["ssl:1:privateKey=k", plain]
            error = self.assertRaises(ClientCertificatesNeedTLS, listenDescriptions, given, "ca")
            self.assertIn(plain, str(error))
            self.assertIsInstance(error, ValueError)


# -- through the login gate ------------------------------------------------------------


async def unsafeIdRefusedAtTheGate(reactor: Any) -> None:
    """An avatar id the DirectoryRealm refuses (anonymous: no name) is a logged refusal, not a server failure."""
    from twisted.cred.checkers import AllowAnonymousAccess
    from twisted.cred.credentials import Anonymous
    from twisted.cred.portal import Portal

    from framing.login._errors import LoginRefused

    from ..helpers import capturedLogs
    from .test_login import address, authEvents, eventually, listen, stop

    base = Path(tempfile.mkdtemp())
    realm = DirectoryRealm(base / "served", Root)
    factory, port = await listen(reactor, Portal(realm, [AllowAnonymousAccess()]))
    with capturedLogs() as events:
        try:
            await rpc.login(reactor, address(port), Anonymous())
        except LoginRefused:
            pass
        else:
            raise AssertionError("an avatar id that is no name got a directory")
        await eventually(reactor, lambda: not factory.brokers)
    assert authEvents(events) == ["refused"]
    assert not any(event.get("log_failure") for event in events)
    assert list((base / "served").iterdir()) == []
    await stop(factory, port)
    shutil.rmtree(base)


class GateTests(TestCase):
    """DirectoryRealm's refusals through a real login over loopback TCP."""

    test_unsafe_id_refused_at_the_gate = trialTest(unsafeIdRefusedAtTheGate)


test_unsafe_id_refused_at_the_gate = pytestTest(unsafeIdRefusedAtTheGate)
