"""The durable kv storages the tests run the store's contract against: a SQLite file, a PostgreSQL schema.

Contract: L{STORES} names each durable storage; L{Scratch} is one test's
place for one (a file in a new directory, or a new schema of the test
process's private PostgreSQL, L{tests.postgres}), opened as often as the
test likes (each opening a storage on the same data: another worker), and
the handles with which a test holds the storage's write lock from outside
(L{Scratch.holdWriteLock}), as another process or session would.  The
PostgreSQL one raises C{SkipTest} with the reason when there can be no
server.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import uuid
from typing import Any
from urllib.parse import quote

from protocols.kv import PostgresStorage, SQLiteStorage, Storage

STORES = ("sqlite", "postgresql")
"""The durable storages, by the name the tests are parametrised with."""


class Scratch:
    """One test's store of kind C{kind}: where it is, how to open it, how to lock it from outside."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._cleanups: list[Any] = []
        if kind == "sqlite":
            directory = tempfile.mkdtemp(prefix="chunkwire-kv-")
            self._cleanups.append(lambda: shutil.rmtree(directory, ignore_errors=True))
            self.where = os.path.join(directory, "kv.sqlite")
        else:
            import psycopg

            from tests.postgres import postgresOrSkip

            server = postgresOrSkip()
            self.schema = "t_" + uuid.uuid4().hex[:12]
            with psycopg.connect(server.url, autocommit=True) as db:
                db.execute(f"CREATE SCHEMA {self.schema}")
            self.baseURL = server.url
            self.where = f"{server.url}?options={quote(f'-csearch_path={self.schema}')}"
            self._cleanups.append(self._dropSchema)

    def _dropSchema(self) -> None:
        import psycopg

        from tests.postgres import server

        try:
            with psycopg.connect(server().url, autocommit=True, connect_timeout=10) as db:
                db.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        except psycopg.Error:
            pass  # (the server is being restarted by the test: the schema goes with the process's server)

    def open(self, timeout: float | None = None) -> Storage:
        """A storage on this test's data (a new connection: another worker's view); C{timeout}: its wait for locks."""
        if self.kind == "sqlite":
            return SQLiteStorage(self.where) if timeout is None else SQLiteStorage(self.where, busyTimeout=timeout)
        return PostgresStorage(self.where) if timeout is None else PostgresStorage(self.where, timeout=timeout)

    def holdWriteLock(self) -> Any:
        """
        Take the store's write lock from outside, as another process would
        (SQLite: C{BEGIN IMMEDIATE}; PostgreSQL: C{LOCK TABLE} in another
        session); the returned function lets it go.
        """
        if self.kind == "sqlite":
            holder = sqlite3.connect(self.where, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")

            def release() -> None:
                holder.execute("ROLLBACK")
                holder.close()

            return release
        import psycopg

        session = psycopg.connect(self.where)
        session.execute("LOCK TABLE chunkwire_kv_totals IN ACCESS EXCLUSIVE MODE")

        def releaseTable() -> None:
            session.rollback()
            session.close()

        return releaseTable

    def cleanUp(self) -> None:
        for cleanup in reversed(self._cleanups):
            cleanup()
