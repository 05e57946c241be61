"""Issue 28's login attacks (round three): raw, blocking SCRAM probes and guesses, and an honest client process.

The attacker side is plain blocking sockets (each call one connection,
every wait bounded), so a test can run it in a thread next to an honest
client process.  L{probe} asks for an unknown (or known) name's salt and
iteration count; L{guess} makes one whole wrong-password login and says
whether the server ran a check (answered the first message with a
challenge) or refused at once (throttled); L{halfOpen} starts logins it
never finishes.  Run as a module, C{honest PORT USER} (password from
C{$CHUNKWIRE_PASSWORD}) logs in C{--count} times to a kv server, putting
and getting a value each time, and prints one JSON line of what happened.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

from framing import Decoder, Encoder, ProtocolError, Registry
from framing.login._scram import ScramClient
from framing.login._wire import CONTINUE, START, LoginMessage, addLoginTypes, loginRegistry
from framing.wire import PREAMBLE

SCRAM = "SCRAM-SHA-256"
TIMEOUT = 10.0
"""Seconds any one read may wait: only a hang misses it."""


class Raw:
    """One blocking connection speaking the login exchange by hand."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT, source_address=(host, 0))
        registry = Registry()
        addLoginTypes(registry)
        self.encoder = Encoder(registry)
        self.decoder = Decoder(registry=loginRegistry())
        self.pending: list[Any] = []
        self.started = False

    def send(self, verb: str, payload: bytes) -> None:
        data = self.encoder.encode(LoginMessage.of(verb, SCRAM, payload))
        self.sock.sendall(data if self.started else PREAMBLE + data)
        self.started = True

    def next(self) -> Any:
        """The server's next login message, or C{None} once it closed the connection."""
        while not self.pending:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return None
            if not data:
                return None
            try:
                self.pending.extend(self.decoder.feed(data))
            except ProtocolError as error:
                self.pending.extend([*error.results, None])
        return self.pending.pop(0)

    def close(self) -> None:
        self.sock.close()


def serverFirst(port: int, name: str, host: str = "127.0.0.1") -> bytes | None:
    """The server-first-message answering a SCRAM start as C{name}, or C{None} if it refused at once."""
    raw = Raw(port, host)
    try:
        raw.send(START, ScramClient(name, b"-").first())
        answer = raw.next()
        return answer.payload if answer is not None and answer.verb == "challenge" else None
    finally:
        raw.close()


def probe(port: int, name: str, host: str = "127.0.0.1") -> tuple[str, int] | None:
    """The salt (base64) and iteration count the server shows for C{name}, or C{None} if refused at once."""
    first = serverFirst(port, name, host)
    if first is None:
        return None
    fields = dict(part.split(b"=", 1) for part in first.split(b","))
    return fields[b"s"].decode("ascii"), int(fields[b"i"])


def guess(port: int, name: str, password: bytes, host: str = "127.0.0.1") -> str:
    """
    One whole login as C{name} with C{password}: C{"throttled"} (refused
    before any check), C{"refused"} (checked and refused), C{"accepted"}, or C{"lost"}.
    """
    raw = Raw(port, host)
    try:
        client = ScramClient(name, password)
        raw.send(START, client.first())
        challenge = raw.next()
        if challenge is None:
            return "lost"
        if challenge.verb != "challenge":
            return "throttled"
        raw.send(CONTINUE, client.final(challenge.payload))
        answer = raw.next()
        return "lost" if answer is None else str(answer.verb)
    finally:
        raw.close()


def halfOpen(port: int, name: str, count: int, host: str = "127.0.0.1") -> tuple[list[Raw], int]:
    """
    Start C{count} SCRAM logins as C{name} and never finish them; the open
    connections (the caller closes them) and how many got a challenge.
    """
    opened, challenged = [], 0
    for _ in range(count):
        raw = Raw(port, host)
        raw.send(START, ScramClient(name, b"-").first())
        answer = raw.next()
        challenged += answer is not None and answer.verb == "challenge"
        opened.append(raw)
    return opened, challenged


async def _honest(reactor: Any, port: int, user: str, password: bytes, count: int, pause: float) -> dict[str, Any]:
    from twisted.cred.credentials import UsernamePassword
    from twisted.internet.task import deferLater

    from protocols import rpc
    from protocols.auth import LoginRefused

    result: dict[str, Any] = {"ok": 0, "refused": 0, "wrong": 0, "errors": []}
    for number in range(count):
        try:
            root = await rpc.login(
                reactor, f"tcp:host=127.0.0.1:port={port}", UsernamePassword(user.encode(), password)
            )
        except LoginRefused:
            result["refused"] += 1
        except Exception as error:
            result["errors"].append(repr(error)[:200])
        else:
            await root.callRemote("put", f"k{number}", f"v{number}")
            answer = await root.callRemote("get", f"k{number}")
            result["ok" if answer == f"v{number}" else "wrong"] += 1
            await root.broker.disconnect()
        await deferLater(reactor, pause)
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["honest"])
    parser.add_argument("port", type=int)
    parser.add_argument("user")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.05)
    args = parser.parse_args(argv)
    from twisted.internet import defer, task

    password = os.environ["CHUNKWIRE_PASSWORD"].encode()
    started = time.monotonic()

    def run(reactor: Any) -> Any:
        return defer.ensureDeferred(_honest(reactor, args.port, args.user, password, args.count, args.pause))

    def report(result: dict[str, Any]) -> None:
        result["seconds"] = round(time.monotonic() - started, 2)
        print(json.dumps(result), flush=True)

    task.react(lambda reactor: run(reactor).addCallback(report))


if __name__ == "__main__":
    main(sys.argv[1:])
