"""Where the kv store keeps its values: the interface of a storage backend, and the in-memory one.

Contract: a L{Storage} maps string keys to string values, synchronously
(each method returns once the change is done; a durable storage has
committed it).  One that other processes may write as well (with
C{--workers}) also keeps a L{ChangeLog}: every change, numbered in the
order it was committed, so that each process can tell its own watchers of
changes made through any other (L{protocols.kv.feed}).  Kept apart from
the watches (L{protocols.kv.watches}) and from the RPC interface
(L{protocols.kv}), so that a backend is only storage: L{MemoryStorage} (a
dict, one process, the default) and L{protocols.kv.sqlite.SQLiteStorage}
(a file shared by every worker, surviving restarts).
"""

from __future__ import annotations

from typing import Protocol


class ChangeLog(Protocol):
    """The changes of a storage shared by several processes, each numbered, in commit order."""

    def lastChange(self) -> int:
        """The number of the last change made (0 if none yet)."""

    def changedElsewhere(self) -> bool:
        """Whether another process (or connection) committed a change since the last time this was asked."""

    def changesSince(self, sequence: int, limit: int) -> list[tuple[int, str, bool]]:
        """
        At most C{limit} changes numbered above C{sequence}, in order: C{(number, key, deleted)}.
        A gap between numbers means changes forgotten (L{forgetChanges}) before they were read.
        """

    def changeValue(self, sequence: int) -> str | None:
        """The value put by change C{sequence}, or C{None} if that change was forgotten since."""

    def forgetChanges(self, upTo: int) -> None:
        """Forget the changes numbered C{upTo} and below (their values are kept for the watchers of other processes)."""


class Storage(Protocol):
    """
    A storage backend of L{protocols.kv.KeyValueStore}.

    @ivar changeLog: its L{ChangeLog} if other processes may write it too,
        else C{None} (then the store tells its watchers of each change itself).
    """

    changeLog: ChangeLog | None

    def get(self, key: str) -> str | None:
        """The value of C{key}, or C{None} if it has none."""

    def put(self, key: str, value: str) -> None:
        """Set C{key} to C{value}."""

    def delete(self, key: str) -> bool:
        """Delete C{key}; whether it was there."""

    def keys(self, prefix: str) -> list[str]:
        """The keys that start with C{prefix}, sorted (by code point)."""

    def close(self) -> None:
        """Release what the storage holds (a file); it is not used afterwards."""


class MemoryStorage:
    """
    A dict: fast, private to one process, gone when it exits.  Every
    operation is O(1) except L{keys} (O(n log n) in the keys).

    @ivar data: key to value.
    """

    changeLog: ChangeLog | None = None

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def put(self, key: str, value: str) -> None:
        self.data[key] = value

    def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def keys(self, prefix: str) -> list[str]:
        return sorted(key for key in self.data if key.startswith(prefix))

    def close(self) -> None:
        pass
