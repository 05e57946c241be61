"""SCRAM-SHA-256 under its old import path: L{framing.login.scram}, and the C{twisted.cred} interface of a proof.

The mechanism is sans-IO and free of Twisted, shared with the clients
without Twisted; what Twisted adds is L{IScramResponse}, the credentials a
C{twisted.cred} checker holding the user's StoredKey is given, which a
L{ScramResponse} provides.
"""

from __future__ import annotations

from twisted.cred.credentials import ICredentials
from zope.interface import Attribute, classImplements

from framing.login.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MAX_MESSAGE_BYTES,
    MAX_NAME_BYTES,
    MECHANISM,
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
    clientFirstName,
    decoyVerifier,
    escapeName,
    saltedPassword,
    serverError,
    unescapeName,
)

__all__ = [
    "BadServerSignature",
    "DEFAULT_ITERATIONS",
    "IScramResponse",
    "MAX_ITERATIONS",
    "MAX_MESSAGE_BYTES",
    "MAX_NAME_BYTES",
    "MECHANISM",
    "MIN_ITERATIONS",
    "MalformedMessage",
    "OutOfOrder",
    "ScramClient",
    "ScramError",
    "ScramResponse",
    "ScramServer",
    "ScramVerifier",
    "ServerRefused",
    "Unproven",
    "clientFirstName",
    "decoyVerifier",
    "escapeName",
    "saltedPassword",
    "serverError",
    "unescapeName",
]


class IScramResponse(ICredentials):
    """A client's SCRAM proof, for a C{twisted.cred} checker that holds the user's StoredKey."""

    username = Attribute("The UTF-8 user name (bytes) the client logs in as.")

    def checkProof(storedKey):  # type: ignore[no-untyped-def]
        """
        Whether the proof shows knowledge of the password behind C{storedKey}, compared in constant time.

        @param storedKey: the user's L{ScramVerifier.storedKey}.
        @rtype: C{bool}
        """


classImplements(ScramResponse, IScramResponse)
