"""tests/vectors/login.json: whole login exchanges, generated from the implementation (docs/wire-format.md, section 13).

Each exchange runs the real client (L{ClientLogin}) against the real login
gate (L{ServerLogin}, through an L{Authenticator}) in memory, with the
nonces, salt and secrets fixed, and records the bytes each side wrote.  The
tests run the exchanges again and require the very bytes the vector file
holds, message by message and as whole streams; check the SCRAM texts and
intermediate keys against the sans-IO SCRAM code; decode every login
message under the limits a server applies before a login; and require the
worked example that section 13 shows to be exactly what this module renders.

To regenerate the file after a deliberate change to the wire::

    .venv/bin/python -m tests.protocols.auth.test_login_vectors --write

which also prints the markdown of section 13's worked example.
"""

from __future__ import annotations

import base64
import functools
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from twisted.cred.checkers import AllowAnonymousAccess
from twisted.cred.credentials import Anonymous
from twisted.cred.portal import IRealm, Portal
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, Encoder, Registry
from framing.login._errors import LoginRefused
from framing.login._scram import ScramClient, ScramServer, ScramVerifier, saltedPassword
from framing.login._wire import PRE_LOGIN_LIMITS, SCRAM, LoginMessage, addLoginTypes, loginRegistry
from framing.rpc._wire import OPEN_TYPE as RPC_OPEN_TYPE
from framing.rpc._wire import Message, MessageSlicer, MessageUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import BODY_KINDS, CLOSE, KIND_NAMES, OPEN, PREAMBLE, STRING, decode_header
from protocols import rpc
from protocols.auth._client import ClientLogin, ClientMechanism, ObjectName, ScramMechanism, mechanismFor
from protocols.auth._interfaces import IRemoteRoot
from protocols.auth._mechanisms import scramLogin
from protocols.auth._server import Authenticator
from protocols.auth._tokens import BearerToken, TokenChecker
from protocols.auth._users import UserFile, formatLine
from protocols.rpc._broker import Broker
from protocols.testing import connectedPair

from ...framing.test_vectors import FEEDINGS

VECTOR_FILE = Path(__file__).resolve().parents[2] / "vectors" / "login.json"
WIRE_FORMAT = Path(__file__).resolve().parents[3] / "docs" / "wire-format.md"
SECTION = "## 13. Logins"

# RFC 7677 section 3's example values, so that a peer can check its SCRAM
# code against the RFC and against this file alike.
USER = "user"
PASSWORD = "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
ITERATIONS = 4096

# Fixed secrets: the decoys of unknown names derive from them (no exchange here shows one).
DECOY_KEY = bytes(range(32))
SERVER_SECRET = bytes(range(32, 64))

TOKEN_OWNER = "alice"
TOKEN = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode("ascii")
OBJECT_NAME = "aaaqeayeaudaocajbifqydiob4ibceqtcqkrmfyydenbwha5dypq"

CAPTIONS = {
    "scram-sha-256": [
        "client → server: the preamble, then `start` carrying the client-first-message",
        "server → client: the preamble, then `challenge` carrying the server-first-message",
        "client → server: `continue` carrying the client-final-message",
        "server → client: `accepted` carrying the server-final-message; the connection is now plain RPC",
        "client → server: the first call, CALL request 1 on export 0 (the root), method `whoami`, no arguments",
        "server → client: its ANSWER, request 1, the text `user`",
    ],
}
"""What section 13's worked example says above each message's bytes (only the SCRAM exchange is shown there)."""


class Avatar(rpc.Referenceable):
    """What a logged-in client sees as its root: it says who logged in."""

    def __init__(self, avatarId: Any) -> None:
        self.avatarId = avatarId

    @rpc.remote
    def whoami(self) -> str:
        return self.avatarId.decode("utf-8") if isinstance(self.avatarId, bytes) else repr(self.avatarId)


@implementer(IRealm)
class Realm:
    """Gives every login an L{Avatar} of its own."""

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
        assert IRemoteRoot in interfaces
        return IRemoteRoot, Avatar(avatarId), lambda: None


class FixedNames:
    """A name table holding one object under L{OBJECT_NAME} (a real table draws its names at random)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def lookup(self, name: str) -> tuple[Any, str] | None:
        return (self.obj, "the published object") if name == OBJECT_NAME else None


def verifier() -> ScramVerifier:
    """The user's verifier, as the server's user file holds it."""
    return ScramVerifier.fromPassword(PASSWORD.encode("utf-8"), base64.b64decode(SALT), ITERATIONS)


def run(authenticator: Authenticator, mechanism: ClientMechanism, call: str | None = None) -> tuple[bytes, bytes]:
    """
    Log in with C{mechanism} through C{authenticator}'s gate, in memory; then call C{call} on the root, if given.

    @return: the bytes the client wrote and the bytes the server wrote, whole.
    """
    clock = Clock()
    server = Broker(clock=clock)
    authenticator.guard(server)
    client = Broker(clock=clock)
    login = ClientLogin(client, mechanism)
    roots: list[Any] = []
    login.done.addCallbacks(roots.append, lambda failure: failure.trap(LoginRefused))
    pair = connectedPair(server, client)
    clock.advance(0)  # the held preambles leave, as at the end of a reactor turn
    pair.flush()
    if call is not None:
        answers: list[Any] = []
        roots[0].callRemote(call).addCallback(answers.append)
        pair.flush()
        assert answers, "the call was not answered"
    return b"".join(pair.clientTransport.writes), b"".join(pair.serverTransport.writes)


def portalAuthenticator(*checkers: Any, **options: Any) -> Authenticator:
    return Authenticator(Portal(Realm(), list(checkers)), clock=Clock(), secret=SERVER_SECRET, **options)


def scramExchange(password: str, user: str = USER) -> tuple[bytes, bytes]:
    """A SCRAM-SHA-256 login with the fixed nonces and salt; with the right password, the first call too."""
    with tempfile.TemporaryDirectory() as directory:
        users = Path(directory) / "users"
        users.write_text(formatLine(USER, verifier()) + "\n", "utf-8")
        authenticator = portalAuthenticator(
            UserFile(users, decoyKey=DECOY_KEY),
            mechanisms={SCRAM: functools.partial(scramLogin, nonce=SERVER_NONCE)},
        )
        mechanism = ScramMechanism(user.encode("utf-8"), password.encode("utf-8"), nonce=CLIENT_NONCE)
        return run(authenticator, mechanism, "whoami" if (user, password) == (USER, PASSWORD) else None)


class UnknownMechanism:
    """A client mechanism the server does not offer (it only ever sends its first message)."""

    name = "PLAIN"

    def first(self) -> bytes:
        return b"\0user\0pencil"

    def respond(self, challenge: bytes) -> bytes:
        raise AssertionError("the server challenged a mechanism it does not offer")

    def verify(self, final: bytes) -> None:
        raise AssertionError("the server accepted a mechanism it does not offer")


EXCHANGES: dict[str, tuple[str, Callable[[], tuple[bytes, bytes]]]] = {
    "scram-sha-256": (
        "A SCRAM-SHA-256 login that succeeds (RFC 7677's example values), then the first call on the root, export 0.",
        lambda: scramExchange(PASSWORD),
    ),
    "scram-sha-256-wrong-password": (
        "The same login with the password 'pencils': the proof is wrong, the server answers 'refused' with an "
        "empty payload and closes the connection (an unknown user name gets the same answer).",
        lambda: scramExchange("pencils"),
    ),
    "scram-sha-256-unknown-user": (
        "The same login as the user 'nobody', whom the server does not know: the server-first-message has the "
        "same form (a decoy salt, fixed for that name, and an iteration count real users have), and the "
        "refusal comes at the same step, exactly as for a wrong password.",
        lambda: scramExchange(PASSWORD, "nobody"),
    ),
    "unknown-mechanism": (
        "A mechanism the server does not offer: refused at once, the mechanism's name echoed, the payload empty.",
        lambda: run(portalAuthenticator(AllowAnonymousAccess()), UnknownMechanism()),
    ),
    "token": (
        "A bearer token login: the token's ASCII is the whole payload; 'accepted' carries nothing.",
        lambda: run(
            portalAuthenticator(TokenChecker({TOKEN_OWNER.encode(): TOKEN})), mechanismFor(BearerToken(TOKEN.encode()))
        ),
    ),
    "anonymous": (
        "An anonymous login, accepted because the server's portal allows anonymous access.",
        lambda: run(portalAuthenticator(AllowAnonymousAccess()), mechanismFor(Anonymous())),
    ),
    "object-name": (
        "An object URL's name presented after the pinned TLS handshake: the name's ASCII is the whole payload.",
        lambda: run(
            Authenticator(names=FixedNames(Avatar(b"object")), clock=Clock(), secret=SERVER_SECRET),
            mechanismFor(ObjectName(OBJECT_NAME)),
        ),
    ),
}
"""Each exchange's note and how to run it."""


# -- reading streams -----------------------------------------------------------------


def objects(stream: bytes) -> Iterator[bytes]:
    """The bytes of each top-level object in C{stream} (after its preamble), in order."""
    assert stream.startswith(PREAMBLE)
    position, depth, start = len(PREAMBLE), 0, len(PREAMBLE)
    while position < len(stream):
        header = decode_header(stream, position, len(stream))
        assert header is not None, "a stream ends inside a header"
        kind, value, length = header
        position += length + (value if kind in BODY_KINDS else 0)
        depth += {OPEN: 1, CLOSE: -1}.get(kind, 0)
        if depth == 0:
            yield stream[start:position]
            start = position


def registry() -> Registry:
    """The login and RPC message types."""
    result = Registry(DEFAULT_REGISTRY)
    addLoginTypes(result)
    result.add_slicer(Message, MessageSlicer())
    result.add_unslicer(RPC_OPEN_TYPE, MessageUnslicer)
    return result


def decodeOne(data: bytes) -> Any:
    """The one object C{data} (no preamble) holds."""
    (obj,) = Decoder(registry=registry(), preamble=False).feed(data)
    return obj


def tagged(value: Any) -> dict[str, Any]:
    """C{value} in the tagged form of the vectors (section 9)."""
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if value is None:
        return {"none": None}
    raise TypeError(f"no tagged form for {value!r} here")


def describeMessage(sender: str, data: bytes) -> dict[str, Any]:
    """One message of an exchange as the vector file lists it."""
    obj = decodeOne(data)
    if type(obj) is LoginMessage:
        entry: dict[str, Any] = {"from": sender, "openType": "login", "fields": [tagged(field) for field in obj]}
        if obj.payload and all(0x20 <= byte < 0x7F for byte in obj.payload):
            entry["payloadText"] = obj.payload.decode("ascii")
    else:
        assert type(obj) is Message, obj
        entry = {"from": sender, "openType": "rpc", "fields": [tagged(field) for field in wireFields(obj)]}
    entry["tokensHex"] = data.hex()
    return entry


def wireFields(message: Message) -> tuple[Any, ...]:
    """An RPC message's fields in wire order (a CALL is handed on as (tag, id, target, name, args, kwargs))."""
    if message[0] != 0:
        return tuple(message)
    tag, requestId, target, name, args, kwargs = message
    return (tag, requestId, target, name, kwargs or None, *args)


def interleaved(clientStream: bytes, serverStream: bytes) -> list[tuple[str, bytes]]:
    """The messages of an exchange in the order they are sent: each side answers the other's last, in turn."""
    clientMessages, serverMessages = list(objects(clientStream)), list(objects(serverStream))
    assert len(clientMessages) - len(serverMessages) in (0, 1), "the exchange does not alternate"
    order: list[tuple[str, bytes]] = []
    for index, data in enumerate(clientMessages):
        order.append(("client", data))
        if index < len(serverMessages):
            order.append(("server", serverMessages[index]))
    return order


def scramTexts() -> dict[str, Any]:
    """The SCRAM messages and the intermediate values of the example, from the sans-IO SCRAM code."""
    salt = base64.b64decode(SALT)
    stored = verifier()
    client = ScramClient(USER, PASSWORD.encode("utf-8"), nonce=CLIENT_NONCE)
    server = ScramServer(lambda name: stored if name == USER else None, SERVER_SECRET, nonce=SERVER_NONCE)
    clientFirst = client.first()
    serverFirst = server.first(clientFirst)
    clientFinal = client.final(serverFirst)
    response = server.response(clientFinal)
    assert response.checkProof(stored.storedKey)
    serverFinal = server.final()
    client.verify(serverFinal)
    return {
        "user": USER,
        "password": PASSWORD,
        "clientNonce": CLIENT_NONCE,
        "serverNonce": SERVER_NONCE,
        "salt": SALT,
        "iterations": ITERATIONS,
        "saltedPasswordHex": saltedPassword(PASSWORD.encode("utf-8"), salt, ITERATIONS).hex(),
        "storedKeyHex": stored.storedKey.hex(),
        "serverKeyHex": stored.serverKey.hex(),
        "authMessage": response.authMessage.decode("ascii"),
        "clientFirst": clientFirst.decode("ascii"),
        "serverFirst": serverFirst.decode("ascii"),
        "clientFinal": clientFinal.decode("ascii"),
        "serverFinal": serverFinal.decode("ascii"),
    }


def generate() -> dict[str, Any]:
    """The whole vector file, from the implementation."""
    exchanges = []
    for name, (note, exchange) in EXCHANGES.items():
        clientStream, serverStream = exchange()
        messages = [describeMessage(sender, data) for sender, data in interleaved(clientStream, serverStream)]
        exchanges.append(
            {
                "name": name,
                "note": note,
                "messages": messages,
                "clientHex": clientStream.hex(),
                "serverHex": serverStream.hex(),
            }
        )
    return {
        "description": (
            "chunkwire logins (docs/wire-format.md, section 13). 'scram': the inputs, intermediate values and "
            "SCRAM-SHA-256 messages of the worked example. 'exchanges': whole exchanges, each as 'messages' in the "
            "order they are sent ({from, openType, fields (tagged, section 9), payloadText when printable, "
            "tokensHex: the message's tokens alone, no preamble}) and as the complete stream each side sent "
            "('clientHex', 'serverHex', preamble included)."
        ),
        "scram": scramTexts(),
        "exchanges": exchanges,
    }


# -- the worked example in section 13 ---------------------------------------------------


def tokenLines(data: bytes) -> Iterator[tuple[bytes, str]]:
    """Each token of C{data} (which may start with the preamble) as its bytes and a short description."""
    position = 0
    if data.startswith(PREAMBLE):
        yield PREAMBLE, "preamble, version 1"
        position = len(PREAMBLE)
    while position < len(data):
        header = decode_header(data, position, len(data))
        assert header is not None
        kind, value, length = header
        end = position + length + (value if kind in BODY_KINDS else 0)
        body = data[position + length : end]
        name = KIND_NAMES[kind]
        if kind in (OPEN, STRING):
            text = f'{name} "{body.decode("utf-8")}"'
        elif kind in BODY_KINDS:
            text = f"{name}, {value} bytes"
        elif kind == CLOSE:
            text = name
        else:
            text = f"{name} {'None' if name == 'SIMPLE' and value == 0 else value}"
        yield data[position:end], text
        position = end


def hexBlock(data: bytes) -> str:
    """C{data} as lines of at most 16 uppercase hex bytes, each token from a new line, described once."""
    lines = []
    for token, text in tokenLines(data):
        for offset in range(0, len(token), 16):
            chunk = " ".join(f"{byte:02X}" for byte in token[offset : offset + 16])
            lines.append(f"{chunk:<47}  {text}".rstrip() if offset == 0 else chunk)
    return "\n".join(lines)


def workedExample(vectors: dict[str, Any]) -> str:
    """The markdown of section 13's worked example: each message of the SCRAM exchange, captioned, in hex."""
    (exchange,) = [e for e in vectors["exchanges"] if e["name"] == "scram-sha-256"]
    captions = CAPTIONS["scram-sha-256"]
    assert len(captions) == len(exchange["messages"])
    shownPreamble = {"client": False, "server": False}
    parts = []
    for number, (caption, message) in enumerate(zip(captions, exchange["messages"], strict=True), 1):
        data = bytes.fromhex(message["tokensHex"])
        if not shownPreamble[message["from"]]:
            data = PREAMBLE + data
            shownPreamble[message["from"]] = True
        parts.append(f"{number}. {caption}:\n\n   ```\n" + _indent(hexBlock(data)) + "\n   ```\n")
    return "\n".join(parts)


def scramBlock(vectors: dict[str, Any]) -> str:
    """The markdown block of the example's SCRAM inputs, intermediate values (hex) and four messages (text)."""
    scram = vectors["scram"]
    rows = [(label, str(scram[key])) for label, key in SCRAM_ROWS]
    return "```\n" + "\n".join(f"{label:<15} {text}" for label, text in rows) + "\n```\n"


SCRAM_ROWS = (
    ("user name", "user"),
    ("password", "password"),
    ("client nonce", "clientNonce"),
    ("server nonce", "serverNonce"),
    ("salt (base64)", "salt"),
    ("iterations", "iterations"),
    ("SaltedPassword", "saltedPasswordHex"),
    ("StoredKey", "storedKeyHex"),
    ("ServerKey", "serverKeyHex"),
    ("AuthMessage", "authMessage"),
    ("client-first", "clientFirst"),
    ("server-first", "serverFirst"),
    ("client-final", "clientFinal"),
    ("server-final", "serverFinal"),
)
"""The rows of the worked example's SCRAM block: label, key in the vector file's C{scram}."""

MESSAGE_ROWS = SCRAM_ROWS[-4:]


def _indent(text: str) -> str:
    return "\n".join("   " + line for line in text.split("\n"))


# -- the tests ----------------------------------------------------------------------------


def loadVectors() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(VECTOR_FILE.read_text("utf-8"))
    return result


class LoginVectorTests(SynchronousTestCase):
    """The login vectors are what the implementation sends, and section 13 shows them."""

    def setUp(self) -> None:
        self.vectors = loadVectors()

    def test_exchangesAreGenerated(self) -> None:
        """Running every exchange again writes exactly the streams and messages of the vector file."""
        self.assertEqual(self.vectors, generate())

    def test_everyExchange(self) -> None:
        """The file holds each exchange this module runs, and each is whole: its messages make its streams."""
        self.assertEqual([e["name"] for e in self.vectors["exchanges"]], list(EXCHANGES))
        for exchange in self.vectors["exchanges"]:
            for side in ("client", "server"):
                tokens = "".join(m["tokensHex"] for m in exchange["messages"] if m["from"] == side)
                self.assertEqual(PREAMBLE.hex() + tokens, exchange[f"{side}Hex"], (exchange["name"], side))

    def test_messagesEncode(self) -> None:
        """Each message's fields, encoded by the login and RPC slicers, give exactly its tokens."""
        encoder = Encoder(registry())
        for exchange in self.vectors["exchanges"]:
            for message in exchange["messages"]:
                fields = [_untagged(field) for field in message["fields"]]
                obj: Any = LoginMessage(fields) if message["openType"] == "login" else Message(fields)
                self.assertEqual(encoder.encode(obj).hex(), message["tokensHex"], exchange["name"])

    def test_payloadText(self) -> None:
        """A printable payload's text is its bytes; the SCRAM exchange carries the four SCRAM messages in order."""
        for exchange in self.vectors["exchanges"]:
            for message in exchange["messages"]:
                if "payloadText" in message:
                    self.assertEqual(message["payloadText"], bytes.fromhex(message["fields"][2]["bytes"]).decode())
        (scram,) = [e for e in self.vectors["exchanges"] if e["name"] == "scram-sha-256"]
        payloads = [m.get("payloadText") for m in scram["messages"] if m["openType"] == "login"]
        self.assertEqual(payloads, [self.vectors["scram"][key] for _, key in MESSAGE_ROWS])

    def test_scram(self) -> None:
        """The SCRAM texts and keys are what the sans-IO SCRAM code derives from the example's inputs."""
        self.assertEqual(self.vectors["scram"], scramTexts())
        scram = self.vectors["scram"]
        self.assertEqual(
            scram["authMessage"],
            ",".join([scram["clientFirst"][3:], scram["serverFirst"], scram["clientFinal"].rpartition(",p=")[0]]),
        )

    def test_loginMessagesDecodeBeforeLogin(self) -> None:
        """Every login message a client sends decodes under the pre-login limits, whole, split and byte by byte."""
        for exchange in self.vectors["exchanges"]:
            for message in exchange["messages"]:
                if message["from"] != "client" or message["openType"] != "login":
                    continue
                data = bytes.fromhex(message["tokensHex"])
                for how, feeding in FEEDINGS.items():
                    for pieces in feeding(data):
                        decoder = Decoder(PRE_LOGIN_LIMITS, loginRegistry(), preamble=False)
                        results = [obj for piece in pieces for obj in decoder.feed(piece)]
                        self.assertEqual([type(obj) for obj in results], [LoginMessage], (exchange["name"], how))
                        self.assertEqual(
                            [tagged(field) for field in results[0]], message["fields"], (exchange["name"], how)
                        )

    def test_firstCallIsOnRootZero(self) -> None:
        """After 'accepted', the client's first message is a CALL on export id 0, with request id 1."""
        (scram,) = [e for e in self.vectors["exchanges"] if e["name"] == "scram-sha-256"]
        call = decodeOne(bytes.fromhex(scram["messages"][4]["tokensHex"]))
        self.assertEqual(wireFields(call), (0, 1, 0, "whoami", None))
        answer = decodeOne(bytes.fromhex(scram["messages"][5]["tokensHex"]))
        self.assertEqual(tuple(answer), (1, 1, USER))

    def test_documented(self) -> None:
        """Section 13 shows the worked example exactly as rendered from the vectors, and names the vector file."""
        document = WIRE_FORMAT.read_text("utf-8")
        section = document[document.index(SECTION) :]
        self.assertIn(workedExample(self.vectors), section)
        self.assertIn(scramBlock(self.vectors), section)
        self.assertIn("tests/vectors/login.json", section)
        for exchange in self.vectors["exchanges"]:
            self.assertIn(f"`{exchange['name']}`", section)

    def test_renderedTokens(self) -> None:
        """The rendering shows every byte once: joining its hex gives back the message."""
        (scram,) = [e for e in self.vectors["exchanges"] if e["name"] == "scram-sha-256"]
        for message in scram["messages"]:
            data = bytes.fromhex(message["tokensHex"])
            shown = "".join(line[:47].replace(" ", "") for line in hexBlock(data).split("\n"))
            self.assertEqual(shown.lower(), data.hex())


UNTAGGED: dict[str, Callable[[Any], Any]] = {
    "int": int,
    "str": str,
    "bytes": bytes.fromhex,
    "none": lambda _: None,
    "bool": bool,
}
"""How each tag of a message's fields turns back into its value."""


def _untagged(field: dict[str, Any]) -> Any:
    ((tag, value),) = field.items()
    return UNTAGGED[tag](value)


def main(arguments: list[str]) -> None:
    """Print the worked example's markdown; with C{--write}, write the vector file first."""
    vectors = generate()
    if "--write" in arguments:
        VECTOR_FILE.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(scramBlock(vectors))
    print(workedExample(vectors))


if __name__ == "__main__":
    main(sys.argv[1:])
