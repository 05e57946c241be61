# -*- test-case-name: tests.attack.test_round3_auth -*-
"""The login throttle's counts in SQLite, shared by the worker processes of one service.

Contract: L{SQLiteThrottleState} is an L{IThrottleState} in one SQLite
file (stdlib C{sqlite3}, WAL mode), which every worker of a service opens:
an attempt counted by one worker is seen by all, so N workers allow an
address the attempts one process would, not N times as many.  Each
throttle decision is one C{BEGIN IMMEDIATE} transaction (a few indexed
reads and writes, no fsync with C{synchronous=NORMAL}: a crash may lose the
last counts, never corrupt the file), run in the reactor thread: a few
tens of microseconds when uncontended.  A transaction that cannot get the
lock within C{busyTimeout} seconds (or any other SQLite error) raises
L{ThrottleStateError}, and the throttle refuses that login.  Each table
holds at most its bound of rows, evicted as L{protocols.auth._drains}
says (the rows draining soonest first, never the row being set; trusted
pairs least recently trusted first); user names claimed at the gate and
peer addresses are stored, no secret.  The file is created mode 0600.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from zope.interface import implementer

from ._interfaces import IThrottleState
from ._throttle import ThrottleStateError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS address (key TEXT PRIMARY KEY, until REAL NOT NULL);
CREATE INDEX IF NOT EXISTS address_until ON address (until);
CREATE TABLE IF NOT EXISTS pair (key TEXT PRIMARY KEY, until REAL NOT NULL);
CREATE INDEX IF NOT EXISTS pair_until ON pair (until);
CREATE TABLE IF NOT EXISTS trusted (key TEXT PRIMARY KEY, used REAL NOT NULL);
CREATE INDEX IF NOT EXISTS trusted_used ON trusted (used);
"""

_TABLES = ("address", "pair")


@implementer(IThrottleState)
class SQLiteThrottleState:
    """
    A throttle's counts in the SQLite file at C{path}, shared with every process that opens it.

    @ivar path: the database file.
    @ivar bounds: the most rows of C{"address"}, C{"pair"} and C{"trusted"}.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        maxAddresses: int = 10_000,
        maxPairs: int = 10_000,
        maxTrusted: int = 10_000,
        busyTimeout: float = 2.0,
    ) -> None:
        """
        @param path: the database file; created (mode 0600) with its tables if missing.
        @param busyTimeout: seconds a transaction waits for another process's.
        @raise ThrottleStateError: the file cannot be opened or is not such a database.
        """
        if min(maxAddresses, maxPairs, maxTrusted) < 1:
            raise ValueError("every table holds at least one row")
        self.path = os.fspath(path)
        self.bounds = {"address": maxAddresses, "pair": maxPairs, "trusted": maxTrusted}
        try:
            # Made private before SQLite writes anything into it.
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            self._db = sqlite3.connect(self.path, timeout=busyTimeout, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise ThrottleStateError(f"the login throttle's database {self.path}: {error}") from None
        self._depth = 0

    def close(self) -> None:
        """Close this process's connection to the file."""
        self._db.close()

    @contextmanager
    def atomically(self) -> Iterator[None]:
        """One C{BEGIN IMMEDIATE} transaction, committed at the end (rolled back on an error)."""
        if self._depth:
            yield
            return
        self._depth += 1
        try:
            self._run("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._run("COMMIT")
        finally:
            self._depth -= 1

    def _run(self, sql: str, *arguments: Any) -> Any:
        try:
            return self._db.execute(sql, arguments)
        except sqlite3.Error as error:
            if self._db.in_transaction and sql != "BEGIN IMMEDIATE":
                self._db.execute("ROLLBACK")
            raise ThrottleStateError(f"the login throttle's database {self.path}: {error}") from None

    def until(self, table: str, key: str) -> float:
        row = self._run(f"SELECT until FROM {_table(table)} WHERE key = ?", key).fetchone()
        return 0.0 if row is None else float(row[0])

    def setUntil(self, table: str, key: str, until: float) -> None:
        name = _table(table)
        with self.atomically():
            if self._run(f"UPDATE {name} SET until = ? WHERE key = ?", until, key).rowcount:
                return
            self._run(f"INSERT INTO {name} (key, until) VALUES (?, ?)", key, until)
            self._evict(name, "until", key)

    def _evict(self, name: str, order: str, keep: str) -> None:
        (count,) = self._run(f"SELECT count(*) FROM {name}").fetchone()
        excess = count - self.bounds[name]
        if excess > 0:
            self._run(
                f"DELETE FROM {name} WHERE key IN (SELECT key FROM {name} WHERE key != ? ORDER BY {order} LIMIT ?)",
                keep,
                excess,
            )

    def forget(self, table: str, key: str) -> None:
        self._run(f"DELETE FROM {_table(table)} WHERE key = ?", key)

    def size(self, table: str) -> int:
        (count,) = self._run(f"SELECT count(*) FROM {_table(table)}").fetchone()
        return int(count)

    def isTrusted(self, key: str) -> bool:
        return self._run("SELECT 1 FROM trusted WHERE key = ?", key).fetchone() is not None

    def trust(self, key: str) -> None:
        # Wall-clock time orders the trusted pairs across processes; only its order matters.
        with self.atomically():
            now = time.time()
            if self._run("UPDATE trusted SET used = ? WHERE key = ?", now, key).rowcount:
                return
            self._run("INSERT INTO trusted (key, used) VALUES (?, ?)", key, now)
            self._evict("trusted", "used", key)


def _table(table: str) -> str:
    # Table names come from this package's constants, never from a peer; checked all the same.
    if table not in _TABLES:
        raise ValueError(f"no throttle table {table!r}")
    return table
