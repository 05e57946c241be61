"""What the file service may hold for its clients: open files per address and in all.

Contract: a L{FileBudget} is shared by every L{protocols.bulk.files.BulkService}
of a process (one per user, with logins) and counts the files they hold
open for clients: unfinished uploads, files being received by C{put},
files being sent.  Each is taken (L{FileBudget.take}) for the address of
the connection that asked, and given back once when it closes.  Past
C{maxOpenPerAddress} for one address, or C{maxOpen} in all, a new one is
refused with L{TooManyOpenFiles} (the connection stays up): per-connection
caps alone let a few addresses with many connections hold every
descriptor of the process, and then no new client could even be accepted.
By default C{maxOpen} is a quarter of the process's descriptor limit, so
the rest stays for connections, listening sockets, logs and hashing.  Each
call is O(1).
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass

from .fileerrors import TooManyOpenFiles

OPEN_SHARE = 4
"""By default the service holds at most 1/OPEN_SHARE of the process's descriptors open for clients."""


@dataclass(frozen=True)
class FileLimits:
    """
    The file service's limits across connections and users.

    @ivar maxOpen: the most files held open for clients in all; C{None}: a
        quarter of C{RLIMIT_NOFILE}'s soft limit (256 of 1,024), at least 16.
    @ivar maxOpenPerAddress: the most files held open for one client
        address: 32, twice a connection's C{maxUploads}, so that one
        address cannot take the whole budget (at 1,024 descriptors, eight
        addresses fill it).
    """

    maxOpen: int | None = None
    maxOpenPerAddress: int = 32

    def openLimit(self) -> int:
        """C{maxOpen}, or the default from the process's descriptor limit."""
        if self.maxOpen is not None:
            return self.maxOpen
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 16
        return max(16, soft // OPEN_SHARE)


class FileBudget:
    """
    The open files of the file services of one process; see the module docstring.

    @ivar limits: its L{FileLimits}.
    @ivar maxOpen: the most files open in all.
    @ivar open: the files open now.
    """

    def __init__(self, limits: FileLimits | None = None) -> None:
        self.limits = limits or FileLimits()
        self.maxOpen = self.limits.openLimit()
        self.open = 0
        self._byAddress: dict[str, int] = {}

    def openFor(self, address: str) -> int:
        """The files open now for C{address}."""
        return self._byAddress.get(address, 0)

    def take(self, address: str) -> Callable[[], None]:
        """
        Count one more open file for C{address}; returns the function that
        gives it back (calling it more than once gives back once).

        @raise TooManyOpenFiles: C{address} or the process holds its most.
        """
        mine = self._byAddress.get(address, 0)
        if mine >= self.limits.maxOpenPerAddress:
            raise TooManyOpenFiles(f"the server holds its most open files for one address ({mine}): try later")
        if self.open >= self.maxOpen:
            raise TooManyOpenFiles(f"the server holds its most open files ({self.open}): try later")
        self._byAddress[address] = mine + 1
        self.open += 1
        given: list[bool] = []

        def giveBack() -> None:
            if given:
                return
            given.append(True)
            self.open -= 1
            left = self._byAddress[address] - 1
            if left:
                self._byAddress[address] = left
            else:
                del self._byAddress[address]

        return giveBack
