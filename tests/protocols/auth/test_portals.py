"""L{protocols.auth.portal}: a Portal of a realm and checkers, each checked when it is made."""

from __future__ import annotations

from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import IUsernamePassword
from twisted.cred.portal import IRealm, Portal
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from protocols import auth
from protocols.auth._tokens import IBearerToken, TokenChecker
from protocols.auth._users import IScramResponse, UserFile, addUser


@implementer(IRealm)
class Realm:
    def requestAvatar(self, avatarId: bytes, mind: object, *interfaces: Any) -> Any:
        return auth.IRemoteRoot, object(), lambda: None


class PortalTests(SynchronousTestCase):
    """auth.portal makes the Portal that Portal(realm, checkers) makes, or says which object is wrong."""

    def test_portal(self) -> None:
        """A realm and checkers give a Portal of that realm, with each checker's credentials interfaces."""
        users = self.mktemp()
        addUser(users, "ada", b"pw", iterations=4096)
        realm = Realm()
        made = auth.portal(realm, [UserFile(users), TokenChecker({b"bot": b"a long random key"})])
        self.assertIsInstance(made, Portal)
        self.assertIs(made.realm, realm)
        self.assertEqual(set(made.listCredentialsInterfaces()), {IScramResponse, IUsernamePassword, IBearerToken})

    def test_realm_checked(self) -> None:
        """An object that does not provide IRealm is a TypeError naming it."""
        with self.assertRaises(TypeError) as caught:
            auth.portal(object(), [])
        self.assertIn("does not provide IRealm", str(caught.exception))

    def test_checker_checked(self) -> None:
        """A checker that does not provide ICredentialsChecker is a TypeError naming it, and no portal is made."""
        with self.assertRaises(TypeError) as caught:
            auth.portal(Realm(), [TokenChecker({}), "users.txt"])
        self.assertIn("'users.txt' does not provide ICredentialsChecker", str(caught.exception))
        self.assertTrue(ICredentialsChecker.providedBy(TokenChecker({})))
