# -*- test-case-name: tests.attack.test_round3_bulk -*-
"""What the file service may hold for its clients: open files per address and in all; unfinished uploads' bytes.

Contract: a L{FileBudget} is shared by every
L{protocols.bulk._files.BulkService} of a process and counts the files they
hold open for clients, per address of the connection that asked: past
C{maxOpenPerAddress} or C{maxOpen} in all (by default a quarter of the
process's descriptor limit) a new one is refused with L{TooManyOpenFiles},
the connection staying up.  It also charges each unfinished upload its
declared size until it is committed, discarded or swept: past
C{maxPartialBytesPerUser} or C{maxPartialBytes} a new upload is refused with
L{QuotaExceeded}, so abandoned uploads cannot fill the disk.  With worker
processes, each counts its own.

Cost: O(1) per call.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass

from framing.bulk._fileerrors import QuotaExceeded, TooManyOpenFiles

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

    @ivar maxPartialBytes: the most bytes of unfinished uploads (their
        declared sizes) kept in all: 256 GiB.
    @ivar maxPartialBytesPerUser: the most bytes of unfinished uploads kept
        for one user (one service): 64 GiB; a larger file cannot be
        uploaded until the operator raises it.
    """

    maxOpen: int | None = None
    maxOpenPerAddress: int = 32
    maxPartialBytes: int = 256 << 30
    maxPartialBytesPerUser: int = 64 << 30

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
        self._charges: dict[object, dict[str, int]] = {}
        self._mine: dict[object, int] = {}
        self._partial = 0

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

    # -- unfinished bytes ------------------------------------------------------------

    @property
    def partialBytes(self) -> int:
        """The bytes of unfinished uploads charged now, in all."""
        return self._partial

    def partialFor(self, user: object) -> int:
        """The bytes of unfinished uploads charged now to C{user}."""
        return self._mine.get(user, 0)

    def charge(self, user: object, name: str, size: int) -> None:
        """
        Charge C{user}'s upload C{name} its C{size} (replacing what it was
        charged before: a resumed or restarted upload).

        @raise QuotaExceeded: it would take C{user} or the process past its quota.
        """
        charges = self._charges.setdefault(user, {})
        before = charges.get(name, 0)
        mine = self._mine.get(user, 0) - before + size
        total = self._partial - before + size
        if size > before and mine > self.limits.maxPartialBytesPerUser:
            raise QuotaExceeded(
                f"unfinished uploads may keep {self.limits.maxPartialBytesPerUser} bytes per user; "
                f"{mine - size} are kept, and this one is {size}"
            )
        if size > before and total > self.limits.maxPartialBytes:
            raise QuotaExceeded(f"the server keeps its most bytes of unfinished uploads ({self._partial}): try later")
        self._set(user, name, size)

    def record(self, user: object, name: str, size: int) -> None:
        """Charge C{user}'s upload C{name} C{size} without a check (one found on disk)."""
        self._set(user, name, size)

    def uncharge(self, user: object, name: str) -> None:
        """C{user}'s upload C{name} is over (committed, discarded, swept): it is charged nothing."""
        self._set(user, name, 0)

    def _set(self, user: object, name: str, size: int) -> None:
        charges = self._charges.setdefault(user, {})
        before = charges.pop(name, 0)
        if size:
            charges[name] = size
        elif not charges:
            del self._charges[user]
        self._partial += size - before
        mine = self._mine.get(user, 0) + size - before
        if mine:
            self._mine[user] = mine
        else:
            self._mine.pop(user, None)
