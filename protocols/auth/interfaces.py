"""The interface a realm's avatars are asked for.

Contract: a realm used with C{rpc.serve(portal=...)} is asked for
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
