"""Tests for framing.login._scram: RFC 7677's vector, round trips, refusals, replays, bad messages; IScramResponse."""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.cred.credentials import ICredentials
from twisted.trial.unittest import SynchronousTestCase

from framing.login._scram import (
    DEFAULT_ITERATIONS,
    MIN_ITERATIONS,
    BadServerSignature,
    MalformedMessage,
    OutOfOrder,
    ScramClient,
    ScramError,
    ScramResponse,
    ScramServer,
    ScramVerifier,
    ServerRefused,
    Unproven,
    decoyVerifier,
    escapeName,
    serverError,
    unescapeName,
)
from protocols.auth._users import IScramResponse
from tests.properties import examples

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

SECRET = b"server secret for decoys"
FAST = MIN_ITERATIONS


def verifiers(**users: bytes) -> dict[str, ScramVerifier]:
    """A verifier per user, at the fast test iteration count."""
    return {name: ScramVerifier.fromPassword(password, iterations=FAST) for name, password in users.items()}


def server(table: dict[str, ScramVerifier], nonce: str | None = None) -> ScramServer:
    """A server looking users up in C{table}, with decoys at the test iteration count."""
    return ScramServer(table.get, SECRET, nonce=nonce, decoyIterations=FAST)


def exchange(client: ScramClient, srv: ScramServer) -> tuple[list[bytes], ScramResponse]:
    """Run the first three messages; return them and the server's credentials."""
    clientFirst = client.first()
    serverFirst = srv.first(clientFirst)
    clientFinal = client.final(serverFirst)
    return [clientFirst, serverFirst, clientFinal], srv.response(clientFinal)


class RFC7677VectorTests(SynchronousTestCase):
    """Both sides reproduce RFC 7677 section 3's messages byte for byte."""

    def setUp(self) -> None:
        self.verifier = ScramVerifier.fromPassword(b"pencil", RFC_SALT, 4096)
        self.client = ScramClient("user", b"pencil", nonce=RFC_CLIENT_NONCE)
        self.server = ScramServer({"user": self.verifier}.get, SECRET, nonce=RFC_SERVER_NONCE)

    def test_messages(self) -> None:
        """client-first, server-first, client-final (the proof) and server-final (the signature) match the RFC."""
        self.assertEqual(self.client.first(), RFC_CLIENT_FIRST)
        self.assertEqual(self.server.first(RFC_CLIENT_FIRST), RFC_SERVER_FIRST)
        self.assertEqual(self.client.final(RFC_SERVER_FIRST), RFC_CLIENT_FINAL)
        response = self.server.response(RFC_CLIENT_FINAL)
        self.assertTrue(response.checkProof(self.verifier.storedKey))
        self.assertEqual(self.server.final(), RFC_SERVER_FINAL)
        self.client.verify(RFC_SERVER_FINAL)

    def test_serverAcceptsTheRFCProof(self) -> None:
        """The server checks the RFC's printed proof good, without our client."""
        self.server.first(RFC_CLIENT_FIRST)
        response = self.server.response(RFC_CLIENT_FINAL)
        self.assertEqual(response.username, b"user")
        self.assertTrue(response.checkProof(self.verifier.storedKey))
        self.assertTrue(response.checked)


class RoundTripTests(SynchronousTestCase):
    """A client and a server with random nonces and salts agree exactly when the password is right."""

    def test_roundTrip(self) -> None:
        """The right password passes the proof check and the client accepts the server's signature."""
        table = verifiers(alice=b"correct horse")
        srv = server(table)
        client = ScramClient("alice", b"correct horse")
        _, response = exchange(client, srv)
        self.assertTrue(IScramResponse.providedBy(response))
        self.assertTrue(ICredentials.providedBy(response))
        self.assertEqual(srv.username, "alice")
        self.assertEqual(response.username, b"alice")
        self.assertTrue(response.checkProof(table["alice"].storedKey))
        client.verify(srv.final())

    def test_wrongPassword(self) -> None:
        """A wrong password gives a proof that checks false, and the server will not sign."""
        table = verifiers(alice=b"correct horse")
        srv = server(table)
        _, response = exchange(ScramClient("alice", b"battery staple"), srv)
        self.assertFalse(response.checkProof(table["alice"].storedKey))
        self.assertFalse(response.checked)
        self.assertRaises(Unproven, srv.final)

    def test_finalBeforeCheck(self) -> None:
        """The server-final-message is refused until the proof has been checked."""
        srv = server(verifiers(alice=b"pw"))
        exchange(ScramClient("alice", b"pw"), srv)
        self.assertRaises(Unproven, srv.final)

    def test_passwordNeverOnTheWire(self) -> None:
        """No message of either side contains the password, in clear or in base64."""
        password = b"hunter2-very-secret"
        table = verifiers(bob=password)
        srv = server(table)
        client = ScramClient("bob", password)
        messages, response = exchange(client, srv)
        response.checkProof(table["bob"].storedKey)
        messages.append(srv.final())
        for message in messages:
            self.assertNotIn(password, message)
            self.assertNotIn(base64.b64encode(password), message)

    def test_verifierFromPassword(self) -> None:
        """fromPassword makes a 16-byte random salt by default and refuses fewer than 4096 iterations."""
        one, two = (ScramVerifier.fromPassword(b"pw", iterations=FAST) for _ in range(2))
        self.assertEqual(len(one.salt), 16)
        self.assertNotEqual(one.salt, two.salt)
        self.assertNotEqual(one.storedKey, two.storedKey)
        self.assertEqual(ScramVerifier.fromPassword(b"pw", one.salt, FAST), one)
        self.assertRaises(ValueError, ScramVerifier.fromPassword, b"pw", None, MIN_ITERATIONS - 1)

    def test_defaultIterations(self) -> None:
        """The default iteration count is well above the RFC's minimum."""
        self.assertGreaterEqual(DEFAULT_ITERATIONS, 25 * MIN_ITERATIONS)


class UnknownUserTests(SynchronousTestCase):
    """An unknown user sees what a known one sees, and is refused."""

    def test_decoySameShape(self) -> None:
        """The server-first-message for an unknown user has the same fields and sizes as for a known one."""
        table = verifiers(alice=b"pw")
        known = server(table, nonce="N" * 32).first(ScramClient("alice", b"x", nonce="c" * 32).first())
        unknown = server(table, nonce="N" * 32).first(ScramClient("mallory", b"x", nonce="c" * 32).first())
        self.assertEqual([len(part) for part in known.split(b",")], [len(part) for part in unknown.split(b",")])
        self.assertEqual(known.split(b",")[2], unknown.split(b",")[2])

    def test_decoyStable(self) -> None:
        """An unknown user is shown the same salt every time, and different names different salts."""
        first = [server({}).first(ScramClient(name, b"x").first()).split(b",")[1] for name in ("eve", "eve", "zed")]
        self.assertEqual(first[0], first[1])
        self.assertNotEqual(first[0], first[2])
        self.assertEqual(decoyVerifier(SECRET, "eve", FAST), decoyVerifier(SECRET, "eve", FAST))
        self.assertNotEqual(decoyVerifier(SECRET, "eve", FAST), decoyVerifier(b"other", "eve", FAST))

    def test_unknownUserRefused(self) -> None:
        """An unknown user's proof checks false against the decoy's stored key too."""
        srv = server({})
        _, response = exchange(ScramClient("mallory", b"guess"), srv)
        self.assertFalse(response.checkProof(decoyVerifier(SECRET, "mallory", FAST).storedKey))
        self.assertRaises(Unproven, srv.final)


class ReplayTests(SynchronousTestCase):
    """A captured client-final-message is worthless to a later exchange."""

    def test_replayToFreshServer(self) -> None:
        """A client-final from one exchange, fed to a fresh server (new nonce) after its client-first, is refused."""
        table = verifiers(alice=b"pw")
        client = ScramClient("alice", b"pw")
        messages, _ = exchange(client, server(table))
        fresh = server(table)
        fresh.first(messages[0])
        self.assertRaises(MalformedMessage, fresh.response, messages[2])

    def test_replaySameNonceWrongProof(self) -> None:
        """Even against a server that reused the nonce, a proof for another server-first fails the check."""
        table = verifiers(alice=b"pw")
        messages, _ = exchange(ScramClient("alice", b"pw", nonce="cn"), server(table, nonce="sn"))
        table["alice"] = ScramVerifier.fromPassword(b"pw", iterations=FAST)
        again = server(table, nonce="sn")
        again.first(messages[0])
        self.assertFalse(again.response(messages[2]).checkProof(table["alice"].storedKey))

    def test_secondResponseRefused(self) -> None:
        """A server takes one client-final-message per exchange."""
        srv = server(verifiers(alice=b"pw"))
        messages, _ = exchange(ScramClient("alice", b"pw"), srv)
        self.assertRaises(OutOfOrder, srv.response, messages[2])


class ClientChecksTests(SynchronousTestCase):
    """The client refuses what a hostile or broken server sends."""

    def client(self) -> ScramClient:
        return ScramClient("user", b"pencil", nonce=RFC_CLIENT_NONCE)

    def test_fewIterationsRefused(self) -> None:
        """A server-first-message asking for fewer than 4096 iterations is refused."""
        self.assertRaises(MalformedMessage, self.client().final, RFC_SERVER_FIRST.replace(b"i=4096", b"i=4095"))

    def test_hugeIterationsRefused(self) -> None:
        """A server-first-message asking for absurdly many iterations is refused before any work."""
        self.assertRaises(MalformedMessage, self.client().final, RFC_SERVER_FIRST.replace(b"i=4096", b"i=999999999"))

    def test_nonceMustExtendOurs(self) -> None:
        """A server nonce that does not start with the client's, or only repeats it, is refused."""
        for nonce in (b"XOprNGfwEbeRWgbNEkqO%hv", b"rOprNGfwEbeRWgbNEkqO"):
            message = b"r=" + nonce + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
            self.assertRaises(MalformedMessage, self.client().final, message)

    def test_badServerSignature(self) -> None:
        """A signature from a server that does not hold the verifier is refused."""
        client = self.client()
        client.final(RFC_SERVER_FIRST)
        forged = b"v=" + base64.b64encode(bytes(32))
        self.assertRaises(BadServerSignature, client.verify, forged)

    def test_serverError(self) -> None:
        """An e= server-final-message raises ServerRefused with the server's reason."""
        client = self.client()
        client.final(RFC_SERVER_FIRST)
        error = self.assertRaises(ServerRefused, client.verify, b"e=invalid-proof")
        self.assertEqual(error.reason, "invalid-proof")

    def test_serverErrorMessage(self) -> None:
        """serverError makes the e= message the client reports as ServerRefused, and refuses unsafe values."""
        self.assertEqual(serverError(), b"e=invalid-proof")
        client = self.client()
        client.final(RFC_SERVER_FIRST)
        refused = self.assertRaises(ServerRefused, client.verify, serverError("other-error"))
        self.assertEqual(refused.reason, "other-error")
        for reason in ("", "a,b", "a=b", "two words", "ü"):
            self.assertRaises(ValueError, serverError, reason)

    def test_outOfOrder(self) -> None:
        """verify before final, and final twice, are refused."""
        client = self.client()
        self.assertRaises(OutOfOrder, client.verify, RFC_SERVER_FINAL)
        client.final(RFC_SERVER_FIRST)
        self.assertRaises(OutOfOrder, client.final, RFC_SERVER_FIRST)


class NameEscapingTests(SynchronousTestCase):
    """User names travel escaped as RFC 5802 says."""

    def test_escaped(self) -> None:
        """A comma becomes =2C and an equals sign =3D, in the client-first-message."""
        self.assertEqual(escapeName("a,b=c"), b"a=2Cb=3Dc")
        client = ScramClient("a,b=c", b"pw", nonce="n")
        self.assertEqual(client.first(), b"n,,n=a=2Cb=3Dc,r=n")

    def test_roundTrip(self) -> None:
        """A name with commas, equals signs and non-ASCII letters logs in and is seen unescaped."""
        name = "Zoë,=2C=,x"
        table = verifiers(**{name: b"pw"})
        srv = server(table)
        _, response = exchange(ScramClient(name, b"pw"), srv)
        self.assertEqual(srv.username, name)
        self.assertEqual(response.username, name.encode("utf-8"))
        self.assertTrue(response.checkProof(table[name].storedKey))
        self.assertEqual(unescapeName(escapeName(name)), name)

    @settings(max_examples=examples(200), deadline=None)
    @given(name=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
    def test_escapeRoundTrip(self, name: str) -> None:
        """Any name escapes to a saslname without a bare ',' and unescapes to itself."""
        saslname = escapeName(name)
        self.assertNotIn(b",", saslname)
        self.assertEqual(unescapeName(saslname), name)

    def test_badEscapes(self) -> None:
        """A bare '=', an unknown escape, invalid UTF-8 or an empty name is refused."""
        for saslname in (b"a=b", b"a=2c", b"a=", b"=3=2CD", b"\xff", b""):
            self.assertRaises(MalformedMessage, unescapeName, saslname)

    def test_badClientNames(self) -> None:
        """A client refuses an empty or overlong name, or one that is not valid text."""
        for name in ("", "x" * 256, "\ud800"):
            self.assertRaises(ScramError, ScramClient, name, b"pw")


class MalformedMessageTests(SynchronousTestCase):
    """Each kind of malformed message raises a ScramError, and nothing else."""

    def serverAfterFirst(self) -> ScramServer:
        srv = server({"user": ScramVerifier.fromPassword(b"pencil", RFC_SALT, 4096)}, nonce=RFC_SERVER_NONCE)
        srv.first(RFC_CLIENT_FIRST)
        return srv

    def test_clientFirst(self) -> None:
        """Bad GS2 headers, missing or misordered attributes, bad nonces and mandatory extensions are refused."""
        for message in (
            b"",
            b"p=tls-unique,,n=user,r=abc",
            b"n,a=admin,n=user,r=abc",
            b"n,,r=abc,n=user",
            b"n,,n=user",
            b"n,,n=user,r=",
            b"n,,n=user,r=a b",
            b"n,,m=ext,n=user,r=abc",
            b"n,,n=user,r=abc,m=must",
            b"n,,n=user,r=abc,",
            b"n,,n=user,r=" + b"x" * 2000,
        ):
            self.assertRaises(MalformedMessage, server({}).first, message)

    def test_extensionIgnored(self) -> None:
        """An optional extension after the nonce is accepted and ignored."""
        self.assertTrue(server({}).first(b"n,,n=user,r=abc,x=whatever").startswith(b"r=abc"))

    def test_clientFinal(self) -> None:
        """No proof, a bad channel binding, a wrong nonce, bad base64 or a short proof are refused."""
        proof = RFC_CLIENT_FINAL.split(b",p=")[1]
        nonce = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        for message in (
            b"c=biws," + nonce,
            b"c=eSws," + nonce + b",p=" + proof,
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=" + proof,
            b"c=biws," + nonce + b",p=not*base64",
            b"c=biws," + nonce + b",p=" + base64.b64encode(bytes(31)),
            b"r=x,c=biws,p=" + proof,
        ):
            self.assertRaises(MalformedMessage, self.serverAfterFirst().response, message)

    def test_outOfOrder(self) -> None:
        """A response before first, and first twice, are refused."""
        srv = server({})
        self.assertRaises(OutOfOrder, srv.response, RFC_CLIENT_FINAL)
        srv.first(RFC_CLIENT_FIRST)
        self.assertRaises(OutOfOrder, srv.first, RFC_CLIENT_FIRST)

    def test_serverFirst(self) -> None:
        """A server-first-message with bad base64 salt, a non-numeric count or missing fields is refused."""
        for message in (
            b"",
            RFC_SERVER_FIRST.replace(b"s=W22", b"s=*22"),
            RFC_SERVER_FIRST.replace(b"i=4096", b"i=40x6"),
            RFC_SERVER_FIRST.replace(b"i=4096", b"i=-4096"),
            RFC_SERVER_FIRST.replace(b",s=W22ZaJ0SNY7soEsUEjb6gQ==", b""),
            b"m=x," + RFC_SERVER_FIRST,
        ):
            self.assertRaises(MalformedMessage, ScramClient("user", b"p", nonce=RFC_CLIENT_NONCE).final, message)

    def test_serverFinal(self) -> None:
        """A server-final-message that is neither v= nor e=, or has a bad signature encoding, is refused."""
        for message in (b"", b"x=1", b"v=***", b"e=" + b"x" * 2000):
            client = ScramClient("user", b"pencil", nonce=RFC_CLIENT_NONCE)
            client.final(RFC_SERVER_FIRST)
            self.assertRaises(ScramError, client.verify, message)

    @settings(max_examples=examples(300), deadline=None)
    @given(data=st.binary(max_size=300))
    def test_randomClientFirst(self, data: bytes) -> None:
        """Random bytes as a client-first-message raise only ScramError, if anything."""
        try:
            server({}).first(data)
        except ScramError:
            pass

    @settings(max_examples=examples(300), deadline=None)
    @given(data=st.binary(max_size=300))
    def test_randomClientFinal(self, data: bytes) -> None:
        """Random bytes as a client-final-message raise only ScramError, if anything."""
        try:
            self.serverAfterFirst().response(data).checkProof(bytes(32))
        except ScramError:
            pass

    @settings(max_examples=examples(300), deadline=None)
    @given(at=st.integers(0, len(RFC_CLIENT_FINAL)), cut=st.integers(0, 8), insert=st.binary(max_size=8))
    def test_mutatedClientFinal(self, at: int, cut: int, insert: bytes) -> None:
        """A real client-final-message with bytes cut or inserted raises only ScramError, or fails its check."""
        message = RFC_CLIENT_FINAL[:at] + insert + RFC_CLIENT_FINAL[at + cut :]
        try:
            response = self.serverAfterFirst().response(message)
        except ScramError:
            return
        verifier = ScramVerifier.fromPassword(b"pencil", RFC_SALT, 4096)
        self.assertEqual(response.checkProof(verifier.storedKey), message == RFC_CLIENT_FINAL)

    @settings(max_examples=examples(200), deadline=None)
    @given(data=st.binary(max_size=200))
    def test_randomServerMessages(self, data: bytes) -> None:
        """Random bytes as a server-first or server-final message raise only ScramError on the client."""
        client = ScramClient("user", b"pencil", nonce=RFC_CLIENT_NONCE)
        try:
            client.final(data)
        except ScramError:
            pass
        client = ScramClient("user", b"pencil", nonce=RFC_CLIENT_NONCE)
        client.final(RFC_SERVER_FIRST)
        self.assertRaises(ScramError, client.verify, data)
