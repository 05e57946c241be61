"""What may be called remotely, under its old import path: L{Referenceable} and L{remote}.

The exposure rule (only L{remote} methods of L{Referenceable} objects are
reachable) is sans-IO and lives in L{framing.rpc.referenceable}, shared with
the clients without Twisted; the declarations of remote methods are in
L{framing.rpc.signatures}.  This module re-exports both, where the Twisted
layer has always had them.
"""

from __future__ import annotations

from framing.rpc.referenceable import Referenceable as Referenceable
from framing.rpc.signatures import ArgumentCheck as ArgumentCheck
from framing.rpc.signatures import RemoteMethod as RemoteMethod
from framing.rpc.signatures import remote as remote
from framing.rpc.signatures import remoteMethod as remoteMethod
