"""The client's side of a login, sans-IO (L{framing.login._exchange.ClientExchange}): messages out, answers judged.

The server's side here is L{framing.login._scram.ScramServer} driven by
hand, so a whole SCRAM login runs without a connection.
"""

from __future__ import annotations

import json
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, Violation
from framing.login._errors import LoginBroken, LoginRefused, ServerNotVerified, UnsupportedCredentials
from framing.login._exchange import (
    FAILED,
    LOGGED_IN,
    WANT_ANSWER,
    Anonymous,
    ByteExchange,
    ClientCertificate,
    ClientExchange,
    ObjectName,
    Password,
    Token,
    clientMechanism,
)
from framing.login._scram import MIN_ITERATIONS, ScramServer, ScramVerifier
from framing.login._wire import (
    ACCEPTED,
    ANONYMOUS,
    CERTIFICATE,
    CHALLENGE,
    CONTINUE,
    NAME,
    PRE_LOGIN_LIMITS,
    REFUSED,
    SCRAM,
    START,
    TOKEN,
    LoginMessage,
    loginRegistry,
)
from tests.processes import ENV, ROOT

VERIFIER = ScramVerifier.fromPassword(b"sesame", b"fixed salt", MIN_ITERATIONS)


def scramServer(message: LoginMessage, verifier: ScramVerifier = VERIFIER) -> tuple[ScramServer, LoginMessage]:
    """A server's side for the client's C{"start"}: its challenge."""
    server = ScramServer(lambda name: verifier, b"server secret")
    return server, LoginMessage.of(CHALLENGE, SCRAM, server.first(message.payload))


class ScramExchangeTests(SynchronousTestCase):
    """A SCRAM login: start, challenge, continue, accepted (the server's signature checked)."""

    def test_loggedIn(self) -> None:
        """The whole exchange ends LOGGED_IN, the password never in any message."""
        exchange = ClientExchange(clientMechanism(Password("alice", "sesame")))
        start = exchange.start()
        self.assertEqual((start.verb, start.mechanism), (START, SCRAM))
        server, challenge = scramServer(start)
        final = exchange.receive(challenge)
        assert final is not None
        self.assertEqual((final.verb, final.mechanism), (CONTINUE, SCRAM))
        response = server.response(final.payload)
        self.assertTrue(response.checkProof(VERIFIER.storedKey))
        self.assertIsNone(exchange.receive(LoginMessage.of(ACCEPTED, SCRAM, server.final())))
        self.assertEqual(exchange.state, LOGGED_IN)
        for message in (start, final):
            self.assertNotIn(b"sesame", message.payload)

    def test_badServerSignature(self) -> None:
        """A server that does not hold the verifier fails its last check: ServerNotVerified, FAILED."""
        exchange = ClientExchange(clientMechanism(Password("alice", "sesame")))
        other = ScramVerifier.fromPassword(b"other", b"fixed salt", MIN_ITERATIONS)
        server, challenge = scramServer(exchange.start(), other)
        final = exchange.receive(challenge)
        assert final is not None
        response = server.response(final.payload)
        response.checked = True  # a server that pretends the proof was good
        self.assertRaises(ServerNotVerified, exchange.receive, LoginMessage.of(ACCEPTED, SCRAM, server.final()))
        self.assertEqual(exchange.state, FAILED)

    def test_refused(self) -> None:
        """A refusal is LoginRefused, saying nothing of why."""
        exchange = ClientExchange(clientMechanism(Password("alice", "wrong")))
        exchange.start()
        error = self.assertRaises(LoginRefused, exchange.receive, LoginMessage.of(REFUSED, SCRAM))
        self.assertEqual(str(error), "the server refused the login")
        self.assertEqual(exchange.state, FAILED)


class OneMessageTests(SynchronousTestCase):
    """Token, certificate, object name and anonymous logins say everything in their first message."""

    def test_firstMessages(self) -> None:
        """Each credential gives its mechanism and payload; a secret never shows in a repr."""
        cases = [
            (Token("abc"), TOKEN, b"abc"),
            (ClientCertificate(), CERTIFICATE, b""),
            (ObjectName("a" * 26), NAME, b"a" * 26),
            (Anonymous(), ANONYMOUS, b""),
        ]
        for credentials, mechanism, payload in cases:
            start = ClientExchange(clientMechanism(credentials)).start()
            self.assertEqual((start.verb, start.mechanism, start.payload), (START, mechanism, payload))
        self.assertNotIn("abc", repr(Token("abc")))
        self.assertNotIn("sesame", repr(Password("alice", "sesame")))
        self.assertNotIn("a" * 26, repr(ObjectName("a" * 26)))

    def test_acceptedAtOnce(self) -> None:
        """An accepted token login is LOGGED_IN with nothing more to send."""
        exchange = ClientExchange(clientMechanism(Token("abc")))
        exchange.start()
        self.assertEqual(exchange.state, WANT_ANSWER)
        self.assertIsNone(exchange.receive(LoginMessage.of(ACCEPTED, TOKEN)))
        self.assertEqual(exchange.state, LOGGED_IN)

    def test_challengedTokenBroken(self) -> None:
        """A challenge to a one-message login breaks the exchange."""
        exchange = ClientExchange(clientMechanism(Token("abc")))
        exchange.start()
        self.assertRaises(LoginBroken, exchange.receive, LoginMessage.of(CHALLENGE, TOKEN, b"?"))
        self.assertEqual(exchange.state, FAILED)

    def test_unsupported(self) -> None:
        """Credentials of no known kind are UnsupportedCredentials (a TypeError too)."""
        error = self.assertRaises(UnsupportedCredentials, clientMechanism, ("alice", "sesame"))
        self.assertIsInstance(error, TypeError)


class BrokenExchangeTests(SynchronousTestCase):
    """Anything but this login's messages, in turn, is LoginBroken, and the exchange stays FAILED."""

    def test_otherObjects(self) -> None:
        """Another object, another mechanism's message, a client's verb, or a refused object: LoginBroken."""
        for sent in ([1, 2], LoginMessage.of(ACCEPTED, SCRAM), LoginMessage.of(START, TOKEN)):
            exchange = ClientExchange(clientMechanism(Token("abc")))
            exchange.start()
            self.assertRaises(LoginBroken, exchange.receive, sent)
            self.assertEqual(exchange.state, FAILED)
        exchange = ClientExchange(clientMechanism(Token("abc")))
        self.assertRaises(LoginBroken, exchange.refused, Violation("too big"))
        self.assertEqual(exchange.state, FAILED)

    def test_afterLogin(self) -> None:
        """A login message after the login is over breaks the rules too."""
        exchange = ClientExchange(clientMechanism(Token("abc")))
        exchange.receive(LoginMessage.of(ACCEPTED, TOKEN))
        self.assertRaises(LoginBroken, exchange.receive, LoginMessage.of(ACCEPTED, TOKEN))


class ByteExchangeTests(SynchronousTestCase):
    """The exchange as bytes (what the blocking and asyncio clients drive): encoded, decoded, judged."""

    def serverSide(self) -> tuple[Encoder, Decoder]:
        registry = loginRegistry()
        return Encoder(registry), Decoder(PRE_LOGIN_LIMITS, registry, preamble=False)

    def test_scramByteByByte(self) -> None:
        """A SCRAM login whose server's bytes come one at a time: the reply is sent once, then done."""
        login = ByteExchange(Password("alice", "sesame"))
        encoder, decoder = self.serverSide()
        (start,) = decoder.feed(login.start())
        server, challenge = scramServer(start)
        replies = b"".join(login.receive(bytes([byte])) for byte in encoder.encode(challenge))
        (reply,) = decoder.feed(replies)
        self.assertEqual(reply.verb, CONTINUE)
        self.assertFalse(login.done)
        self.assertTrue(server.response(reply.payload).checkProof(VERIFIER.storedKey))
        self.assertEqual(login.receive(encoder.encode(LoginMessage.of(ACCEPTED, SCRAM, server.final()))), b"")
        self.assertTrue(login.done)

    def test_refusedAndBroken(self) -> None:
        """A refusal is LoginRefused; bytes the login decoder refuses (too big before a login) are LoginBroken."""
        encoder, _ = self.serverSide()
        login = ByteExchange(Token("abc"))
        self.assertRaises(LoginRefused, login.receive, encoder.encode(LoginMessage.of(REFUSED, TOKEN)))
        login = ByteExchange(Token("abc"))
        self.assertRaises(LoginBroken, login.receive, encoder.encode("x" * (PRE_LOGIN_LIMITS.max_buffered_bytes * 2)))
        self.assertFalse(login.done)

    def test_unsupported(self) -> None:
        """Credentials no mechanism takes are refused when the exchange is made."""
        self.assertRaises(UnsupportedCredentials, ByteExchange, ("alice", "sesame"))


class NoTwistedTests(SynchronousTestCase):
    """The login core, and the blocking client's logins, TLS and object URLs, load no Twisted."""

    def test_importLoadsNoTwisted(self) -> None:
        """A fresh interpreter running a login exchange and making TLS contexts has no twisted module."""
        probe = (
            "import json, sys\n"
            "from framing.login import ClientExchange, Password, clientMechanism\n"
            "from framing.login._urls import ObjectURL\n"
            "from protocols.blocking import connect, connectURL, tlsContext\n"
            "ClientExchange(clientMechanism(Password('ada', 'secret'))).start()\n"
            "tlsContext()\n"
            "print(json.dumps(sorted(sys.modules)))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        modules = json.loads(result.stdout)
        self.assertIn("framing.login._scram", modules)
        self.assertEqual([name for name in modules if name == "twisted" or name.startswith("twisted.")], [])
