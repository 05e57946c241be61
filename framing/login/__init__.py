# -*- test-case-name: tests.test_exports,tests.framing.login.test_urls,tests.protocols.test_blocking_logins -*-
"""The sans-IO core of chunkwire's logins: what every client shares, whatever it waits with.

C{framing/login/_wire.py} is the login message (the open-type C{"login"}:
verb, mechanism, payload) and the limits before a login;
C{framing/login/_scram.py} is SCRAM-SHA-256's arithmetic and messages, both
sides; C{framing/login/_exchange.py} is the client's side of a login as a
state machine, with the credentials each mechanism takes;
C{framing/login/_errors.py} is how a login fails.  The Twisted layer
(L{protocols.auth}) and the blocking client (L{protocols.blocking}) drive
the same exchange, so the login is written once; its steps are those of
docs/wire-format.md, section 13.

Like the rest of L{framing}, nothing here imports Twisted, sockets or
asyncio.  Names are camelCase, as in L{framing.rpc}: these modules came
from L{protocols.auth}, which re-exports them unchanged.
"""

from __future__ import annotations

from ._errors import LoginBroken, LoginFailed, LoginRefused, ServerNotVerified, UnsupportedCredentials
from ._exchange import Anonymous, ClientCertificate, ClientExchange, ObjectName, Password, Token, clientMechanism
from ._scram import MIN_ITERATIONS

__all__ = [
    "Anonymous",
    "ClientCertificate",
    "ClientExchange",
    "LoginBroken",
    "LoginFailed",
    "LoginRefused",
    "ObjectName",
    "Password",
    "ServerNotVerified",
    "Token",
    "UnsupportedCredentials",
    "clientMechanism",
    "MIN_ITERATIONS",
]
