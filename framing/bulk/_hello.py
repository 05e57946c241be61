# -*- test-case-name: tests.framing.bulk.test_connection,tests.protocols.bulk.test_states -*-
"""The HELLO of a bulk connection: each side's digests and initial window, and the digest a stream gets.

Contract: each side sends one HELLO (L{HELLO}) before its first call, its
first stream and its first control message: the digests it computes and
accepts, in its order of preference, and the initial window every stream it
receives starts with.  A L{Hello} keeps both sides' of one connection and
answers, in O(digests), which digest a stream is checked with: the first of
the sender's list that the receiver lists.  Both ends compute the same
answer, the sender from the receiver's HELLO, the receiver from the
sender's (which always comes first on the wire), so a stream sent before
the receiver's HELLO arrived announces L{NEGOTIATED} and the receiver
settles it.  Refusals are typed and come before any data moves:
L{DigestUnavailable} on the sender, L{DigestRefused} (a Violation: the
message is refused, the connection stays up) on the receiver.
"""

from __future__ import annotations

from typing import Any

from ._digests import NEGOTIATED, DigestUnavailable, chooseDigest
from ._errors import DigestRefused, HelloMissing
from ._wire import HELLO, Control


class Hello:
    """
    This side's and the peer's HELLO on one connection.

    @ivar sent: whether this side's HELLO was sent.
    @ivar peerDigests: the digests the peer stated, in its order of
        preference, or C{None} before its HELLO.
    @ivar peerWindow: the initial window the peer stated.
    """

    def __init__(self) -> None:
        self.sent = False
        self.peerDigests: tuple[str, ...] | None = None
        self.peerWindow = 0

    def message(self, options: Any) -> Control:
        """This side's HELLO, to send now (once), of C{options}' C{digests} and C{startWindow}."""
        self.sent = True
        return Control((HELLO, 0, ",".join(options.digests), options.startWindow))

    def first(self, options: Any) -> Control | None:
        """
        This side's HELLO (L{message}) if it has not gone yet, else C{None}:
        what a shell sends before this side's first CALL, stream or control
        message, and in answer to the peer's HELLO, so that it goes once
        and first.
        """
        return None if self.sent else self.message(options)

    def decoded(self, control: Any) -> bool:
        """
        Take the peer's HELLO as it is decoded; C{False} if it is malformed
        (ignored).  A repeated HELLO changes nothing.
        """
        digests, window = control[2], control[3]
        if type(digests) is not str or type(window) is not int or window < 0:
            return False
        if self.peerDigests is None:
            self.peerDigests = tuple(name for name in digests.split(",") if name)
            self.peerWindow = window
        return True

    def digestFor(self, wanted: str | None, ours: tuple[str, ...]) -> str | None:
        """
        The digest a stream asking for C{wanted} announces: C{None} for
        none; for L{NEGOTIATED}, the first of C{ours} that the peer listed
        (L{NEGOTIATED} itself before the peer's HELLO); C{wanted} itself if
        the peer listed it (or before its HELLO).

        @raise DigestUnavailable: the peer's HELLO shares no digest with
            C{ours}, or lacks the one C{wanted}.
        """
        peer = self.peerDigests
        if wanted is None or peer is None:
            return wanted
        if wanted == NEGOTIATED:
            chosen = chooseDigest(ours, peer)
            if chosen is None:
                raise DigestUnavailable(f"no digest in common: this side has {ours}, the peer {peer}")
            return chosen
        if wanted not in peer:
            raise DigestUnavailable(f"the peer does not accept {wanted} (it accepts {', '.join(peer)})")
        return wanted

    def accepted(self, announced: str | None, ours: tuple[str, ...]) -> str | None:
        """
        The digest a stream the peer announced with C{announced} is checked
        with, this side accepting C{ours}.

        @raise DigestRefused: C{ours} lacks it, or (for L{NEGOTIATED})
            shares none with the sender's HELLO.
        @raise HelloMissing: the sender's HELLO has not arrived (or was
            malformed): it broke 5.5's order, whatever the digest.
        """
        if self.peerDigests is None:
            raise HelloMissing("a stream announced before the sender's HELLO")
        if announced == NEGOTIATED:
            chosen = chooseDigest(self.peerDigests or (), ours)
            if chosen is None:
                raise DigestRefused(f"no digest in common with the sender's {self.peerDigests}: this side has {ours}")
            return chosen
        if announced is not None and announced not in ours:
            raise DigestRefused(f"a stream checked with {announced}, which this side does not accept ({ours})")
        return announced
