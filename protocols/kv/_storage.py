# -*- test-case-name: tests.protocols.kv.test_state,tests.protocols.kv.test_limits -*-
"""Where the kv store keeps its values: the interface of a storage backend, and the in-memory one.

Contract: a L{Storage} maps string keys to string values, synchronously
(each method returns once the change is done; a durable storage has
committed it).  One that other processes may write as well (with
C{--workers}) also keeps a L{ChangeLog}: every change, numbered in the
order it was committed, so that each process can tell its own watchers of
changes made through any other (L{protocols.kv._feed}).  Kept apart from
the watches (L{protocols.kv._watches}) and from the RPC interface
(L{protocols.kv}), so that a backend is only storage: L{MemoryStorage} (a
dict, one process, the default), L{protocols.kv._sqlite.SQLiteStorage}
(a file shared by every worker, surviving restarts) and
L{protocols.kv._postgresql.PostgresStorage} (a database shared by every
worker on every host).  A durable storage's methods block their caller;
the store calls them in its threads (L{protocols.kv._threads}), never on the
reactor thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class StoreLimits:
    """
    What one store may hold; C{None} turns a limit off.  Sizes count
    characters (code points) of keys and values, as the interface's
    constraints do.

    @ivar maxKeys: most keys in the store.  100,000.
    @ivar maxBytes: most characters of keys and values in all.  256 Mi: a
        put over it is refused, so a client cannot make the server hold
        more than this (the kv example's values are up to 1 MiB each, and a
        flood of puts otherwise grows the store until the process dies).
    @ivar maxListBytes: most characters of keys one C{list} answer may
        carry.  1 Mi: an answer is held whole until the peer reads it, so
        this bounds what one call can make the server hold; a longer
        listing is refused, and a longer prefix lists less.
    """

    maxKeys: int | None = 100_000
    maxBytes: int | None = 256 * 1024 * 1024
    maxListBytes: int | None = 1024 * 1024


DEFAULT_LIMITS = StoreLimits()
"""The limits of a store made without its own."""


class StoreFull(Exception):
    """A put would take the store past a L{StoreLimits} limit; nothing was stored.  Registered as C{"kv.StoreFull"}."""


class StoreUnavailable(Exception):
    """
    The storage cannot do the call now: its file is locked by another
    process for longer than the storage waits, or cannot be read or
    written.  Nothing was changed; the call may be tried again.  The
    message is the storage's own words, never its driver's.  Registered as
    C{"kv.StoreUnavailable"}.
    """


class Unstorable(Exception):
    """
    A key or value the storage cannot hold: the character NUL, in a
    PostgreSQL store (whose text cannot hold it).  Nothing was stored.
    Registered as C{"kv.Unstorable"}.
    """


class ListTooLarge(Exception):
    """A listing past L{StoreLimits.maxListBytes}.  Registered as C{"kv.ListTooLarge"}."""


def checkedKeys(keys: Iterable[str], limit: int | None) -> list[str]:
    """
    C{keys} as a list, or L{ListTooLarge} as soon as their characters pass
    C{limit}: the listing stops there, so a refused one costs no more than
    an allowed one.
    """
    found: list[str] = []
    size = 0
    for key in keys:
        size += len(key)
        if limit is not None and size > limit:
            raise ListTooLarge(f"the keys listed pass {limit} characters; list a longer prefix")
        found.append(key)
    return found


def fullError(limits: StoreLimits, keys: int, size: int) -> StoreFull | None:
    """The L{StoreFull} for a store that would hold C{keys} keys of C{size} characters, or C{None} if that fits."""
    if limits.maxKeys is not None and keys > limits.maxKeys:
        return StoreFull(f"the store holds its most keys ({limits.maxKeys})")
    if limits.maxBytes is not None and size > limits.maxBytes:
        return StoreFull(f"the store holds its most characters of keys and values ({limits.maxBytes})")
    return None


class ChangeLog(Protocol):
    """The changes of a storage shared by several processes, each numbered, in commit order."""

    def lastChange(self) -> int:
        """The number of the last change made (0 if none yet)."""

    def changedElsewhere(self) -> bool:
        """Whether another process (or connection) committed a change since the last time this was asked."""

    def changesSince(self, sequence: int, limit: int) -> list[tuple[int, str, bool]]:
        """
        At most C{limit} changes numbered above C{sequence}, in order: C{(number, key, deleted)}.
        Numbers may skip (a transaction that failed took one); what was
        forgotten unread is told by L{forgottenUpTo}, not by a gap.
        A change is a notice only: the value is read from the storage.
        """

    def changesAndValues(
        self, sequence: int, limit: int, wanted: Callable[[str], bool], also: Iterable[str] = ()
    ) -> tuple[list[tuple[int, str, bool]], dict[str, str | None] | None]:
        """
        L{changesSince}, and the values of the keys among those changes for
        which C{wanted(key)} holds and of C{also}, read in the same snapshot,
        so that each value is the one its key's last change read left
        (C{None}: deleted); C{None} instead of the values when C{limit}
        changes were read (more may follow: read on).  One read transaction:
        the changes, then one read of the values.
        """

    def forgetChanges(self, upTo: int) -> None:
        """
        Forget the changes numbered C{upTo} and below (kept until then for the
        watchers of other processes), and raise L{forgottenUpTo} to C{upTo}.
        """

    def forgottenUpTo(self) -> int:
        """The highest C{upTo} any process has forgotten changes up to (0 if none): one row read."""

    def tidy(self) -> None:
        """Give back the space writes freed (a file's free pages, its journal past a bound); called now and then."""

    def listen(self, wake: Callable[[], None]) -> bool:
        """
        Call C{wake} (from any thread) whenever another process commits a
        change, until L{stopListening}, and say C{True}; or say C{False}: this
        log cannot, and L{changedElsewhere} must be polled.
        """

    def stopListening(self) -> None:
        """Stop what L{listen} started (nothing if it started nothing)."""


class Storage(Protocol):
    """
    A storage backend of L{protocols.kv.KeyValueStore}.

    @ivar changeLog: its L{ChangeLog} if other processes may write it too,
        else C{None} (then the store tells its watchers of each change itself).
    """

    changeLog: ChangeLog | None

    def get(self, key: str) -> str | None:
        """The value of C{key}, or C{None} if it has none."""

    def put(self, key: str, value: str, limits: StoreLimits = DEFAULT_LIMITS) -> None:
        """
        Set C{key} to C{value}.

        @raise StoreFull: the store would pass C{limits}; nothing changed.
        """

    def delete(self, key: str) -> bool:
        """Delete C{key}; whether it was there."""

    def keys(self, prefix: str, maxBytes: int | None = None) -> list[str]:
        """
        The keys that start with C{prefix}, sorted (by code point).

        @raise ListTooLarge: their characters pass C{maxBytes}.
        """

    def close(self) -> None:
        """Release what the storage holds (a file); it is not used afterwards."""


class MemoryStorage:
    """
    A dict: fast, private to one process, gone when it exits.  Every
    operation is O(1) except L{keys} (O(n log n) in the keys).

    @ivar data: key to value.
    @ivar size: characters of every key and value held.
    """

    changeLog: ChangeLog | None = None

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.size = 0

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def put(self, key: str, value: str, limits: StoreLimits = DEFAULT_LIMITS) -> None:
        old = self.data.get(key)
        keys = len(self.data) + (old is None)
        size = self.size + len(value) + (len(key) if old is None else -len(old))
        full = fullError(limits, keys, size)
        if full is not None:
            raise full
        self.data[key] = value
        self.size = size

    def delete(self, key: str) -> bool:
        old = self.data.pop(key, None)
        if old is None:
            return False
        self.size -= len(key) + len(old)
        return True

    def keys(self, prefix: str, maxBytes: int | None = None) -> list[str]:
        return checkedKeys(sorted(key for key in self.data if key.startswith(prefix)), maxBytes)

    def close(self) -> None:
        pass
