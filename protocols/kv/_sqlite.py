# -*- test-case-name: tests.protocols.kv.test_sqlite,tests.protocols.kv.test_state -*-
"""The kv store's embedded durable storage: one SQLite file, shared by every worker process.

Contract: L{SQLiteStorage} keeps keys and values in the table C{kv} of a
SQLite database in WAL mode.  Each put or delete is one short C{BEGIN
IMMEDIATE} transaction that also logs the change for other processes'
watchers, and returns only once committed with C{synchronous=FULL} (it
survives C{kill -9} and a power loss).  A writer waits up to C{busyTimeout}
(L{BUSY_TIMEOUT}) for the lock; a call that cannot take it, or that the file
refuses, fails with L{protocols.kv._storage.StoreUnavailable}, nothing
changed.  L{tidy} keeps the file and its WAL within a small multiple of the
store's limit.

Cost: get, put and delete are O(log n), C{keys} O(log n + the keys listed),
the limits checked in O(1); every call blocks its thread (a commit's sync
included), so the store makes them in its thread pool
(L{protocols.kv._threads}), never on the reactor thread.

Design: docs/design/kv.md
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from ._storage import DEFAULT_LIMITS, ChangeLog, StoreLimits, StoreUnavailable, checkedKeys, fullError

BUSY_TIMEOUT = 5.0
"""
Seconds a call waits for another process's transaction before it fails
with L{StoreUnavailable}: far longer than any of theirs takes (a few
statements and a sync, though on a loaded machine a waiting writer may
not run for a second or more: 1 s failed so in a fresh clone beside four
busy loops), and well within a call's deadline.  The wait holds one of the
store's pool threads, never the reactor.
"""

JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024
"""Bytes the WAL is cut back to when SQLite restarts it (C{PRAGMA journal_size_limit})."""

_INCREMENTAL = 2
"""C{PRAGMA auto_vacuum}'s value for INCREMENTAL."""

_SCHEMA = (
    # A rowid table with the key indexed: values may be large (up to 1 MiB), which WITHOUT ROWID tables handle badly.
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)",
    # AUTOINCREMENT: a number is never reused, even once every change up to it is forgotten.
    "CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, value TEXT)",
    # How much kv holds, kept by each write in its own transaction: the limits are checked in O(1).
    "CREATE TABLE IF NOT EXISTS totals"
    " (id INTEGER PRIMARY KEY CHECK (id = 0), keys INTEGER NOT NULL, size INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO totals SELECT 0, count(*), coalesce(sum(length(key) + length(value)), 0) FROM kv",
    # Up to which number changes were forgotten (forgetChanges): a reader behind it lost track.
    "CREATE TABLE IF NOT EXISTS forgotten (id INTEGER PRIMARY KEY CHECK (id = 0), upTo INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO forgotten VALUES (0, 0)",
)
_TABLES = ("kv", "changes", "totals", "forgotten")


def _changes(db: sqlite3.Connection, sequence: int, limit: int) -> list[tuple[int, str, bool]]:
    """The changes numbered above C{sequence}, C{limit} at most, in order."""
    query = "SELECT seq, key, value IS NULL FROM changes WHERE seq > ? ORDER BY seq LIMIT ?"
    return [(int(seq), str(key), bool(deleted)) for seq, key, deleted in db.execute(query, (sequence, limit))]


def _value(cursor: sqlite3.Cursor) -> str | None:
    """The value a C{SELECT value} found, or C{None}."""
    row = cursor.fetchone()
    return None if row is None else str(row[0])


class SQLiteStorage:
    """
    A L{protocols.kv._storage.Storage} in the SQLite file C{path} (created
    if missing), with its own L{ChangeLog}: open one per process on the
    same file.

    Each thread that calls it (the store's L{protocols.kv._threads.ThreadedCalls})
    has a connection of its own, so that one call waiting for the write
    lock leaves the others running.

    @ivar path: the database file.
    """

    def __init__(self, path: str, busyTimeout: float = BUSY_TIMEOUT) -> None:
        """
        Open (or make) the file.

        @raise sqlite3.Error: it cannot be opened as a store (a missing
            directory, no permission, not a SQLite file).
        """
        self.path = path
        self.busyTimeout = busyTimeout
        self.changeLog: ChangeLog | None = self
        self._local = threading.local()
        self._lock = threading.Lock()
        self._writer = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        db = self._open()
        self._local.dataVersion = self._version()  # (a thread's later connection cannot know: it answers yes first)
        try:
            if self._tables() < len(_TABLES):
                # Only if missing: opening a made file takes no write lock (workers open it side by side).
                with self._writing() as writing:
                    for statement in _SCHEMA:
                        writing.execute(statement)
            if int(db.execute("PRAGMA auto_vacuum").fetchone()[0]) != _INCREMENTAL:
                self._convert()
        except BaseException:
            self.close()
            raise

    def _open(self) -> sqlite3.Connection:
        """This thread's connection, made now (the file's pragmas set): one per thread that calls the storage."""
        db = sqlite3.connect(self.path, timeout=self.busyTimeout, isolation_level=None, check_same_thread=False)
        try:
            if not int(db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]):
                # A new file: auto_vacuum first, as it can be set only before the first table is made (or by a VACUUM).
                db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            # WAL is a property of the file (set once, kept); synchronous and the journal's limit are per connection.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        except BaseException:
            db.close()
            raise
        self._local.db = db
        self._local.dataVersion = None
        with self._lock:
            self._connections.append(db)
        return db

    @property
    def db(self) -> sqlite3.Connection:
        """The calling thread's connection (autocommit: transactions are explicit), opened on its first call."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        return db if db is not None else self._open()

    def _convert(self) -> None:
        """Make a file made without incremental auto-vacuum use it (one VACUUM); left as it is if others hold it."""
        try:
            self.db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            self.db.execute("VACUUM")
        except sqlite3.OperationalError:
            pass  # busy (another worker has it open and reading): the next opening tries again

    def _tables(self) -> int:
        query = f"SELECT count(*) FROM sqlite_master WHERE name IN ({', '.join('?' * len(_TABLES))})"
        return int(self.db.execute(query, _TABLES).fetchone()[0])

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """
        One write transaction: C{BEGIN IMMEDIATE} takes the write lock at
        once (a deferred transaction that reads first could fail to upgrade
        its lock, which no busy timeout retries), then commits, or rolls back
        if the block raised.  One thread of this process writes at a time
        (the others wait for their turn here, as they once waited on the
        reactor): SQLite's busy handler retries by sleeping, not in a
        queue, so several writers of one process would only starve each
        other, and the other processes, past C{busyTimeout}.
        """
        db = self.db
        with self._writer:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _available(self) -> Iterator[None]:
        """Turn the driver's errors into L{StoreUnavailable}, in the storage's own words."""
        try:
            yield
        except sqlite3.OperationalError as error:
            code = getattr(error, "sqlite_errorname", "")
            if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(error):
                raise StoreUnavailable(
                    f"the store is locked by another process (waited {self.busyTimeout:g} s); nothing was changed"
                ) from None
            raise StoreUnavailable(f"the store cannot be used now ({code or 'an I/O error'})") from None
        except sqlite3.DatabaseError as error:
            code = getattr(error, "sqlite_errorname", "") or type(error).__name__
            raise StoreUnavailable(f"the store cannot be used now ({code})") from None

    def get(self, key: str) -> str | None:
        with self._available():
            row = self.db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, value: str, limits: StoreLimits = DEFAULT_LIMITS) -> None:
        with self._available():
            self._put(key, value, limits)

    def _put(self, key: str, value: str, limits: StoreLimits) -> None:
        with self._writing() as db:
            # Inside the transaction: the totals every process's puts keep, read under the write lock.
            keys, size = db.execute("SELECT keys, size FROM totals WHERE id = 0").fetchone()
            old = db.execute("SELECT length(value) FROM kv WHERE key = ?", (key,)).fetchone()
            keys += old is None
            size += len(value) + (len(key) if old is None else -int(old[0]))
            full = fullError(limits, keys, size)
            if full is not None:
                raise full  # rolled back: nothing was written
            db.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))
            db.execute("INSERT INTO changes (key, value) VALUES (?, '')", (key,))
            db.execute("UPDATE totals SET keys = ?, size = ? WHERE id = 0", (keys, size))

    def delete(self, key: str) -> bool:
        with self._available():
            return self._delete(key)

    def _delete(self, key: str) -> bool:
        with self._writing() as db:
            old = db.execute("SELECT length(value) FROM kv WHERE key = ?", (key,)).fetchone()
            if old is None:
                return False
            db.execute("DELETE FROM kv WHERE key = ?", (key,))
            db.execute("INSERT INTO changes (key, value) VALUES (?, NULL)", (key,))
            freed = len(key) + int(old[0])
            db.execute("UPDATE totals SET keys = keys - 1, size = size - ? WHERE id = 0", (freed,))
        return True

    def keys(self, prefix: str, maxBytes: int | None = None) -> list[str]:
        # A range over the primary key's index: SQLite compares TEXT as UTF-8 bytes, which sort as code points do.
        end = prefixEnd(prefix)
        with self._available():
            if end is None:
                rows = self.db.execute("SELECT key FROM kv WHERE key >= ? ORDER BY key", (prefix,))
            else:
                rows = self.db.execute("SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key", (prefix, end))
            # Read row by row: a listing past maxBytes stops there.
            return checkedKeys((str(key) for (key,) in rows if str(key).startswith(prefix)), maxBytes)

    def close(self) -> None:
        """Close every thread's connection (once no call runs)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for db in connections:
            db.close()

    # -- the change log ----------------------------------------------------------------

    def lastChange(self) -> int:
        with self._available():
            row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
        return 0 if row is None else int(row[0])

    def changedElsewhere(self) -> bool:
        # data_version changes when another connection commits: one cheap call when nothing happened.  Each
        # thread's connection keeps its own; one opened after the storage answers yes to its first question.
        with self._available():
            version = self._version()
        changed = bool(version != self._local.dataVersion)
        self._local.dataVersion = version
        return changed

    def _version(self) -> int:
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def changesSince(self, sequence: int, limit: int) -> list[tuple[int, str, bool]]:
        with self._available():
            return _changes(self.db, sequence, limit)

    def changesAndValues(
        self, sequence: int, limit: int, wanted: Callable[[str], bool], also: Iterable[str] = ()
    ) -> tuple[list[tuple[int, str, bool]], dict[str, str | None] | None]:
        db = self.db
        with self._available():
            db.execute("BEGIN")  # (deferred: the snapshot is taken by the first read, and holds for the second)
            try:
                rows = _changes(db, sequence, limit)
                values = None
                if len(rows) < limit:
                    keys = {key for _seq, key, _deleted in rows if wanted(key)}.union(also)
                    values = {key: _value(db.execute("SELECT value FROM kv WHERE key = ?", (key,))) for key in keys}
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return rows, values

    def forgetChanges(self, upTo: int) -> None:
        with self._available(), self._writing() as db:
            db.execute("DELETE FROM changes WHERE seq <= ?", (upTo,))
            db.execute("UPDATE forgotten SET upTo = max(upTo, ?) WHERE id = 0", (upTo,))

    def forgottenUpTo(self) -> int:
        with self._available():
            return int(self.db.execute("SELECT upTo FROM forgotten WHERE id = 0").fetchone()[0])

    def listen(self, wake: Callable[[], None]) -> bool:
        """C{False}: SQLite cannot push changes to other processes; the feed polls L{changedElsewhere}."""
        return False

    def stopListening(self) -> None:
        pass

    def tidy(self) -> None:
        """
        Give the file's free pages back (C{incremental_vacuum}) and
        checkpoint the WAL, truncating it (C{wal_checkpoint(TRUNCATE)}),
        without waiting for other processes: what they hold is left for the
        next time.  O(the pages freed + the WAL's pages).
        """
        db = self.db
        db.execute("PRAGMA busy_timeout=0")
        try:
            if int(db.execute("PRAGMA freelist_count").fetchone()[0]):
                db.executescript("PRAGMA incremental_vacuum")  # (run to its end: one step frees one page)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError:
            pass  # another process is writing: the next tidying does it
        finally:
            db.execute(f"PRAGMA busy_timeout={int(self.busyTimeout * 1000)}")


def prefixEnd(prefix: str) -> str | None:
    """
    The least string above every string starting with C{prefix}, or C{None}
    if there is none (an empty prefix, or one of U+10FFFF only): the end of
    the range of keys L{SQLiteStorage.keys} reads.
    """
    while prefix:
        last = ord(prefix[-1]) + 1
        if last == 0xD800:
            last = 0xE000  # surrogates cannot be stored as UTF-8: the next character is U+E000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None
