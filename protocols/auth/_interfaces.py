# -*- test-case-name: tests.protocols.auth.test_tls_logins,tests.protocols.auth.test_realms -*-
"""The interface a realm's avatars are asked for.

Contract: a realm used with C{rpc.ServerOptions(portal=...)} is asked for
L{IRemoteRoot}, and answers with a L{protocols.rpc.Referenceable}: the root
object that client sees.
"""

from __future__ import annotations

from zope.interface import Interface


class IRemoteRoot(Interface):  # type: ignore[misc]
    """
    The avatar interface of chunkwire logins: the avatar is the
    L{protocols.rpc.Referenceable} a logged-in client reaches as its root.
    Realms check for it in C{requestAvatar}'s interfaces and return
    C{(IRemoteRoot, avatar, logout)}.
    """


class IThrottleState(Interface):  # type: ignore[misc]
    """
    Where a L{protocols.auth._throttle.LoginThrottle} keeps its counts: in
    this process (L{protocols.auth._drains.MemoryThrottleState}) or shared by
    worker processes (L{protocols.auth._sharedthrottle.SQLiteThrottleState}).

    A bucket is stored as one number, the time its attempts will have
    drained to none (its level at time C{t} is C{(until - t) * rate} when
    positive).  There are two tables of buckets, C{"address"} (per peer
    address) and C{"pair"} (per address and claimed name), each bounded:
    when one is full, the entry whose attempts drain soonest is forgotten
    first, never the one being set.  The trusted pairs (an address and a
    name that logged in there) are bounded too, the least recently trusted
    forgotten first.  Every method may raise
    L{protocols.auth._throttle.ThrottleStateError}.
    """

    def atomically():  # type: ignore[no-untyped-def,misc]
        """A context manager: the reads and writes inside it are one transaction (a no-op in memory)."""

    def until(table, key):  # type: ignore[no-untyped-def]
        """When the bucket C{key} of C{table} drains; C{0.0} if it is not remembered."""

    def setUntil(table, key, until):  # type: ignore[no-untyped-def]
        """Remember that C{key}'s bucket drains at C{until}, forgetting another entry if the table is full."""

    def forget(table, key):  # type: ignore[no-untyped-def]
        """Forget C{key}'s bucket."""

    def size(table):  # type: ignore[no-untyped-def]
        """How many entries C{table} holds."""

    def isTrusted(key):  # type: ignore[no-untyped-def]
        """Whether the pair C{key} has logged in (and is still remembered)."""

    def trust(key):  # type: ignore[no-untyped-def]
        """Remember that the pair C{key} logged in."""
