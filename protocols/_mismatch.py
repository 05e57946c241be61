# -*- test-case-name: tests.protocols.test_mismatch,tests.examples.test_logins -*-
"""A connection lost before the peer said anything: the TLS and plain mismatches, diagnosed on either side.

Contract: L{diagnoseLoss} runs once, when a connection is lost, and only
reads the reason and whether any byte of the peer's stream arrived.  A
connection on which the peer's stream started keeps its reason as it was;
so does any reason other than a clean close or a TLS error.

The two mistakes it names:

- A plain client on a TLS port: the client's preamble is not a TLS record,
  so the TLS server closes at once, without a byte.  The client sees a
  clean close before any preamble: L{ClosedBeforePreamble}.
- A TLS client on a plain port: the server's preamble is not a TLS record,
  so the client's TLS layer fails ("wrong version number") before any
  chunkwire byte: L{NotTLS}.  A TLS server that a plain client reached sees
  the same TLS failure and gets the same diagnosis.
- Both ends speak TLS but a certificate was refused (not verified here, or
  an alert from the peer): L{TLSHandshakeFailed}, which says which.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.python.failure import Failure


class ClosedBeforePreamble(ConnectionDone):
    """
    The peer closed the connection cleanly before sending a byte of its
    preamble, which is what a TLS server does to a plain client.  A
    L{ConnectionDone}, so code that expects a clean close still sees one.
    """

    code = "closed-before-preamble"

    def __str__(self) -> str:
        return (
            "the peer closed the connection before sending anything; a TLS server does this to a plain client:"
            " if the server listens with ssl:, connect with an ssl: endpoint (ssl:host=...:port=...)"
        )


class NotTLS(ConnectionLost):
    """
    TLS failed before the peer sent a byte of chunkwire: its first bytes
    were not TLS.  For a client, the server's port is plain; for a TLS
    server, a plain client connected.  C{reason} is the TLS library's error.
    """

    code = "not-tls"

    def __init__(self, reason: BaseException) -> None:
        super().__init__(str(reason))
        self.reason = reason

    def __str__(self) -> str:
        return (
            f"the peer does not speak TLS ({_tlsMessage(self.reason)}): a client connected with ssl: to a plain"
            " port (use a tcp: endpoint there), or a plain client reached an ssl: port"
        )


class TLSHandshakeFailed(ConnectionLost):
    """
    Both ends speak TLS, but the handshake failed on a certificate before
    any byte of chunkwire: this side did not verify the peer's certificate
    (C{certificate verify failed}: not signed by a CA in C{caCertsDir}, or
    not issued for C{hostname}), or the peer refused this side's (a TLS
    alert, such as a client certificate a server requires).  C{reason} is
    the TLS library's error.
    """

    code = "tls-handshake-failed"

    def __init__(self, reason: BaseException) -> None:
        super().__init__(str(reason))
        self.reason = reason

    def __str__(self) -> str:
        words = _tlsMessage(self.reason)
        if _VERIFY_FAILED in words:
            advice = (
                "the peer's certificate was not verified: give caCertsDir= the directory of the CA that signed it,"
                " and hostname= a name it was issued for"
            )
        else:
            advice = "the peer refused this side's certificate or TLS settings"
        return f"the TLS handshake failed ({words}): {advice}"


def diagnoseLoss(decoder: Any, reason: Failure) -> Failure:
    """
    The reason to report for a lost connection: C{reason} itself, or, when
    nothing of the peer's stream arrived, a L{ClosedBeforePreamble} or
    L{NotTLS} that says which mismatch it probably was.

    @param decoder: the connection's L{framing.Decoder} (C{None} before it was made).
    """
    if decoder is None or not isinstance(reason, Failure) or not decoder.nothing_received:
        return reason
    error = reason.value
    if type(error) is ConnectionDone:
        return Failure(ClosedBeforePreamble())  # type: ignore[no-untyped-call]
    if error is not None and type(error).__module__.startswith("OpenSSL"):
        if _isHandshakeRefusal(error):
            return Failure(TLSHandshakeFailed(error))  # type: ignore[no-untyped-call]
        return Failure(NotTLS(error))  # type: ignore[no-untyped-call]
    return reason


# OpenSSL's words when both ends speak TLS but one refused the other's
# certificate: a failed verification here, or an alert the peer sent.
_VERIFY_FAILED = "certificate verify failed"
_REFUSALS = (_VERIFY_FAILED, "alert")


def _isHandshakeRefusal(error: BaseException) -> bool:
    """Whether a TLS error is a refused certificate (both ends speak TLS), not a peer that does not."""
    message = _tlsMessage(error)
    return any(words in message for words in _REFUSALS)


def _tlsMessage(error: BaseException) -> str:
    """The reason strings of an OpenSSL error list, e.g. C{wrong version number}."""
    details = error.args[0] if error.args and isinstance(error.args[0], list) else []
    reasons = [item[-1] for item in details if isinstance(item, tuple) and item]
    return "; ".join(str(r) for r in reasons) or str(error) or type(error).__name__
