# -*- test-case-name: tests.framing.test_outgoing,tests.protocols.rpc.test_sending,tests.protocols.test_receiver -*-
"""Outgoing: what sending one message promised, kept or undone as one.

Contract: an L{Outgoing} is made for each top-level object sent and handed
to the slicers (as C{encoder.outgoing}) while it is encoded.  A slicer that
changes state the peer will rely on (a new export, an announced stream)
registers how to keep it (C{on_commit}) and how to undo it
(C{on_rollback}).  The sender then calls exactly one of L{Outgoing.commit}
(the bytes were queued whole) or L{Outgoing.rollback} (nothing was queued),
so "what does sending do" is one encode followed by one of the two.  Cost:
nothing for a message whose slicers register nothing.
"""

from __future__ import annotations

from collections.abc import Callable


class OutgoingClosed(Exception):
    """An L{Outgoing} was used after its commit or rollback: a bug in the sender."""


class Outgoing:
    """
    One message on its way out.

    @ivar open: true until L{commit} or L{rollback} is called.
    """

    __slots__ = ("_commits", "_rollbacks", "open")

    def __init__(self) -> None:
        self._commits: list[Callable[[], object]] | None = None
        self._rollbacks: list[Callable[[], object]] | None = None
        self.open = True

    def on_commit(self, action: Callable[[], object]) -> None:
        """Call C{action} if the message is sent (in registration order)."""
        self._check()
        if self._commits is None:
            self._commits = []
        self._commits.append(action)

    def on_rollback(self, action: Callable[[], object]) -> None:
        """Call C{action} if the message is not sent (in reverse registration order)."""
        self._check()
        if self._rollbacks is None:
            self._rollbacks = []
        self._rollbacks.append(action)

    def commit(self) -> None:
        """The message was queued whole: run the commit actions, forget the rest."""
        self._check()
        self.open = False
        actions, self._commits, self._rollbacks = self._commits, None, None
        for action in actions or ():
            action()

    def rollback(self) -> None:
        """Nothing of the message was queued: undo what its encoding did, newest first."""
        self._check()
        self.open = False
        actions, self._commits, self._rollbacks = self._rollbacks, None, None
        for action in reversed(actions or ()):
            action()

    def _check(self) -> None:
        if not self.open:
            raise OutgoingClosed("this message was already committed or rolled back")
