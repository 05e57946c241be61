# -*- test-case-name: tests.protocols.serving.test_kv_postgresql,tests.examples.test_template_store -*-
"""The kv store on PostgreSQL: one database shared by every worker on every host.

Contract: L{PostgresStorage} keeps keys and values in the table
C{chunkwire_kv} of the database a C{postgresql://} URL names, through psycopg 3
(the C{postgresql} extra).  Each put or delete is one transaction under the
lock of the totals row, so the store's limits hold against every host's
writes, and it returns only once C{COMMIT} has; it logs the change and sends
C{NOTIFY}, which L{listen} turns into wake-ups of other processes' watchers
(nothing polls).  Any failure of the database fails the call with
L{protocols.kv._storage.StoreUnavailable} in the storage's own words, leaves
nothing half done and reconnects on the next call.  Keys sort by code point.

Cost: get, put and delete are O(log n), in one round trip for a get and five
for a put or delete; C{keys} is O(log n + the keys listed), through a
server-side cursor.

Design: docs/design/kv.md
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ._sqlite import prefixEnd
from ._storage import (
    DEFAULT_LIMITS,
    ChangeLog,
    StoreLimits,
    StoreUnavailable,
    Unstorable,
    checkedKeys,
    fullError,
)

T = TypeVar("T")

TIMEOUT = 5.0
"""
Seconds a call waits for the database (to connect, for a lock, for a
statement) before it fails with L{StoreUnavailable}: far longer than a
put's few statements take, shorter than a client's usual call deadline.
"""

LISTEN_TICK = 0.1
"""Seconds the listening thread waits for a notification before it looks whether it should stop (a select's timeout)."""

_SCHEMA = (
    'CREATE TABLE IF NOT EXISTS chunkwire_kv (key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL)',
    "CREATE TABLE IF NOT EXISTS chunkwire_kv_changes (seq BIGSERIAL PRIMARY KEY, key TEXT NOT NULL,"
    " deleted BOOLEAN NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chunkwire_kv_totals"
    " (id INTEGER PRIMARY KEY CHECK (id = 0), keys BIGINT NOT NULL, size BIGINT NOT NULL)",
    "INSERT INTO chunkwire_kv_totals SELECT 0, count(*), coalesce(sum(length(key) + length(value)), 0)"
    " FROM chunkwire_kv ON CONFLICT (id) DO NOTHING",
    # Up to which number changes were forgotten (forgetChanges): a reader behind it lost track.
    "CREATE TABLE IF NOT EXISTS chunkwire_kv_forgotten (id INTEGER PRIMARY KEY CHECK (id = 0), up_to BIGINT NOT NULL)",
    "INSERT INTO chunkwire_kv_forgotten VALUES (0, 0) ON CONFLICT (id) DO NOTHING",
)

_CHANGES = "SELECT seq, key, deleted FROM chunkwire_kv_changes WHERE seq > %s ORDER BY seq LIMIT %s"

_LOCKED_TOTALS = "SELECT keys, size FROM chunkwire_kv_totals WHERE id = 0 FOR UPDATE"
# A statement of its own, after the lock: under READ COMMITTED each statement reads what was committed when it
# began, so this one sees every write made before the lock was granted (a join in the locking statement read
# the key as it was before the wait: two deletes both found it, and a new key was counted twice).
_OLD_LENGTH = "SELECT length(value) FROM chunkwire_kv WHERE key = %s"
# Data-modifying WITH clauses all run, referenced or not: the three writes and the notice in one statement.
_PUT = (
    "WITH w AS (INSERT INTO chunkwire_kv (key, value) VALUES (%(key)s, %(value)s)"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value),"
    " c AS (INSERT INTO chunkwire_kv_changes (key, deleted) VALUES (%(key)s, false)),"
    " t AS (UPDATE chunkwire_kv_totals SET keys = %(keys)s, size = %(size)s WHERE id = 0)"
    " SELECT pg_notify(%(channel)s, '')"
)
_DELETE = (
    "WITH w AS (DELETE FROM chunkwire_kv WHERE key = %(key)s),"
    " c AS (INSERT INTO chunkwire_kv_changes (key, deleted) VALUES (%(key)s, true)),"
    " t AS (UPDATE chunkwire_kv_totals SET keys = keys - 1, size = size - %(freed)s WHERE id = 0)"
    " SELECT pg_notify(%(channel)s, '')"
)


class PostgresStorage:
    """
    A L{protocols.kv._storage.Storage} in the PostgreSQL database C{url}
    names, with its own L{ChangeLog}: open one per process on the same
    database, from any host.

    @ivar url: the C{postgresql://} URL (libpq's connection string).
    @ivar channel: the C{NOTIFY} channel of this store (its schema's name in it).
    """

    def __init__(self, url: str, timeout: float = TIMEOUT) -> None:
        """
        Connect, and make the tables if missing.

        @raise StoreUnavailable: the database cannot be reached or used.
        @raise ImportError: psycopg is not installed (the C{postgresql} extra).
        """
        import psycopg  # noqa: F401 - the extra's absence is this call's error, not an import of the package

        self.url = url
        self.timeout = timeout
        self.changeLog: ChangeLog | None = self
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: set[Any] = set()
        self._stopping = threading.Event()
        self._listener: threading.Thread | None = None
        with self._transaction() as db:
            # One maker at a time (workers on several hosts start together): an advisory lock for this transaction.
            db.execute("SELECT pg_advisory_xact_lock(7271436)")
            for statement in _SCHEMA:
                db.execute(statement)
            schema = db.execute("SELECT current_schema()").fetchone()[0]
        # (a channel's name is an identifier: at most 63 bytes)
        self.channel = f"chunkwire_kv.{schema}".encode()[:63].decode("utf-8", "ignore")

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> Any:
        import psycopg

        try:
            db = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=max(2, int(self.timeout + 0.999)),
                keepalives=1,
                keepalives_idle=max(1, int(self.timeout)),
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=int(self.timeout * 1000),
            )
            waited = str(int(self.timeout * 1000))
            db.execute(
                "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)",
                (waited, waited),
            )
        except psycopg.Error as error:
            raise StoreUnavailable(f"the store's database cannot be reached now ({_said(error)})") from None
        with self._lock:
            self._connections.add(db)
        return db

    def _connection(self) -> Any:
        """This thread's connection, (re)opened if it has none or it broke."""
        db = getattr(self._local, "db", None)
        if db is None or db.closed or db.broken:
            if db is not None:
                self._drop(db)
            db = self._local.db = self._connect()
        return db

    def _drop(self, db: Any) -> None:
        with self._lock:
            self._connections.discard(db)
        try:
            db.close()
        except Exception:
            pass
        if getattr(self._local, "db", None) is db:
            self._local.db = None

    @contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[Any]:
        """
        This thread's connection in one transaction (begun with C{begin}),
        committed if the block returns, rolled back if it raises; a database
        failure is a L{StoreUnavailable} (the connection dropped, to be made
        again by the next call).
        """
        import psycopg

        db = self._reusing(lambda db: db.execute(begin))
        try:
            yield db
        except psycopg.Error as error:
            self._drop(db)  # (the transaction dies with the connection)
            said = _said(error)
            raise StoreUnavailable(f"the store's database failed the call ({said}); nothing was changed") from None
        except BaseException:
            try:
                db.execute("ROLLBACK")
            except psycopg.Error:
                self._drop(db)
            raise
        try:
            db.execute("COMMIT")
        except psycopg.Error as error:
            self._drop(db)
            raise StoreUnavailable(f"the store's database failed the commit ({_said(error)})") from None

    def _reusing(self, first: Callable[[Any], Any]) -> Any:
        """
        This thread's connection, once C{first(connection)} has run on it:
        if a connection kept from an earlier call turns out dead (the
        database restarted, or the network cut it while idle), C{first} is
        run once more on a new one; C{first} must be safe to repeat (a
        read, or C{BEGIN}).  A failure on a new connection is a L{StoreUnavailable}.
        """
        import psycopg

        kept = getattr(self._local, "db", None)
        db = self._connection()
        try:
            first(db)
            return db
        except psycopg.OperationalError as error:
            self._drop(db)
            if db is not kept or not _connectionLost(error):
                raise StoreUnavailable(f"the store's database failed the call ({_said(error)})") from None
        except psycopg.Error as error:
            self._drop(db)
            raise StoreUnavailable(f"the store's database failed the call ({_said(error)})") from None
        db = self._connection()
        try:
            first(db)
        except psycopg.Error as error:
            self._drop(db)
            raise StoreUnavailable(f"the store's database failed the call ({_said(error)})") from None
        return db

    def _read(self, query: str, args: tuple[Any, ...]) -> Any:
        """One statement in autocommit: its first row (or C{None})."""
        found: list[Any] = []
        self._reusing(lambda db: found.append(db.execute(query, args).fetchone()))
        return found[0]

    # -- the storage ---------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        if "\x00" in key:
            return None  # (never stored)
        row = self._read("SELECT value FROM chunkwire_kv WHERE key = %s", (key,))
        return None if row is None else str(row[0])

    def put(self, key: str, value: str, limits: StoreLimits = DEFAULT_LIMITS) -> None:
        """@raise Unstorable: C{key} or C{value} holds NUL (PostgreSQL's text cannot)."""
        if "\x00" in key or "\x00" in value:
            raise Unstorable("this store cannot hold a key or value with the character NUL; nothing was stored")
        with self._transaction() as db:
            keys, size = db.execute(_LOCKED_TOTALS).fetchone()
            old = _scalar(db.execute(_OLD_LENGTH, (key,)).fetchone())
            keys += old is None
            size += len(value) + (len(key) if old is None else -int(old))
            full = fullError(limits, keys, size)
            if full is not None:
                raise full  # rolled back: nothing was written
            db.execute(_PUT, {"key": key, "value": value, "keys": keys, "size": size, "channel": self.channel})

    def delete(self, key: str) -> bool:
        if "\x00" in key:
            return False
        with self._transaction() as db:
            db.execute(_LOCKED_TOTALS)
            old = _scalar(db.execute(_OLD_LENGTH, (key,)).fetchone())
            if old is None:
                return False
            db.execute(_DELETE, {"key": key, "freed": len(key) + int(old), "channel": self.channel})
        return True

    def keys(self, prefix: str, maxBytes: int | None = None) -> list[str]:
        if "\x00" in prefix:
            return []
        end = prefixEnd(prefix)
        with self._transaction() as db:
            # A server-side cursor, read a batch at a time: a listing past maxBytes stops there.
            cursor = db.cursor(name="chunkwire_kv_keys")
            cursor.itersize = 1000
            if end is None:
                cursor.execute("SELECT key FROM chunkwire_kv WHERE key >= %s ORDER BY key", (prefix,))
            else:
                cursor.execute("SELECT key FROM chunkwire_kv WHERE key >= %s AND key < %s ORDER BY key", (prefix, end))
            found = checkedKeys((str(key) for (key,) in cursor), maxBytes)
            cursor.close()
        return found

    def close(self) -> None:
        """Stop listening and close every connection (once no call runs)."""
        self.stopListening()
        with self._lock:
            connections, self._connections = self._connections, set()
        for db in connections:
            try:
                db.close()
            except Exception:
                pass

    # -- the change log ------------------------------------------------------------------

    def lastChange(self) -> int:
        row = self._read("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM chunkwire_kv_changes_seq_seq", ())
        return int(row[0])

    def changedElsewhere(self) -> bool:
        """Always C{False}: other processes' changes are pushed by L{listen}, never polled for."""
        return False

    def changesSince(self, sequence: int, limit: int) -> list[tuple[int, str, bool]]:
        found: list[Any] = []
        self._reusing(lambda db: found.extend(db.execute(_CHANGES, (sequence, limit)).fetchall()))
        return [(int(seq), str(key), bool(deleted)) for seq, key, deleted in found]

    def changesAndValues(
        self, sequence: int, limit: int, wanted: Callable[[str], bool], also: Iterable[str] = ()
    ) -> tuple[list[tuple[int, str, bool]], dict[str, str | None] | None]:
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as db:
            found = db.execute(_CHANGES, (sequence, limit))
            rows = [(int(seq), str(key), bool(deleted)) for seq, key, deleted in found]
            values: dict[str, str | None] | None = None
            if len(rows) < limit:
                keys = {key for _seq, key, _deleted in rows if wanted(key)}.union(also)
                values = dict.fromkeys(keys)
                stored = [key for key in keys if "\x00" not in key]  # (one with NUL is never stored)
                read = db.execute("SELECT key, value FROM chunkwire_kv WHERE key = ANY(%s)", (stored,))
                values.update((str(key), str(value)) for key, value in read)
        return rows, values

    def forgetChanges(self, upTo: int) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM chunkwire_kv_changes WHERE seq <= %s", (upTo,))
            db.execute("UPDATE chunkwire_kv_forgotten SET up_to = GREATEST(up_to, %s) WHERE id = 0", (upTo,))

    def forgottenUpTo(self) -> int:
        return int(self._read("SELECT up_to FROM chunkwire_kv_forgotten WHERE id = 0", ())[0])

    def tidy(self) -> None:
        """Nothing: PostgreSQL's autovacuum gives the space of deleted rows back."""

    def listen(self, wake: Callable[[], None]) -> bool:
        """
        Call C{wake} (from a thread of this storage's) whenever a change is
        committed through any process, and once whenever listening
        (re)starts; until L{stopListening}.  Returns C{True}: this log
        pushes its changes.
        """
        if self._listener is None:
            self._stopping.clear()
            self._listener = threading.Thread(target=self._listen, args=(wake,), name="kv-listen", daemon=True)
            self._listener.start()
        return True

    def stopListening(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            self._stopping.set()
            listener.join(self.timeout + 5)

    def _listen(self, wake: Callable[[], None]) -> None:
        import psycopg
        from psycopg import sql

        delay = 0.1
        while not self._stopping.is_set():
            try:
                db = self._connect()
            except StoreUnavailable:
                self._stopping.wait(delay)
                delay = min(delay * 2, 1.0)
                continue
            try:
                db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                delay = 0.1
                wake()  # what was committed while this process was not listening
                while not self._stopping.is_set():
                    heard = False
                    for _notice in db.notifies(timeout=LISTEN_TICK, stop_after=1):
                        heard = True
                    if heard:
                        wake()
            except psycopg.Error:
                self._stopping.wait(delay)
            finally:
                self._drop(db)


def _scalar(row: Any) -> Any:
    """The one column of C{row}, or C{None} if there was no row."""
    return None if row is None else row[0]


def _connectionLost(error: Exception) -> bool:
    """Whether C{error} says the connection is gone (no SQLSTATE; class 08, connection; 57P, the server stopping)."""
    state = getattr(error, "sqlstate", None)
    return not state or state.startswith(("08", "57P"))


def _said(error: Exception) -> str:
    """What a driver's error may say in the storage's words: its SQLSTATE, or that it could not connect."""
    state = getattr(error, "sqlstate", None)
    return f"SQLSTATE {state}" if state else "no connection"
