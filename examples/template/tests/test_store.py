"""The job queue on durable stores: a SQLite file, and PostgreSQL when `JOBQUEUE_TEST_POSTGRESQL` names one.

The store's calls run in threads, so these tests run the reactor (trial's
`TestCase`) rather than stepping the calls by hand.
"""

import os
from pathlib import Path

from protocols.kv import StateStore, openState
from twisted.internet import reactor
from twisted.internet.defer import gatherResults
from twisted.trial.unittest import SkipTest, TestCase

from jobqueue.interface import JobId, JobName, NoSuchJob
from jobqueue.service import PREFIX, JobQueue, openJobQueue


class SQLiteStoreTests(TestCase):
    """The queue's jobs in a SQLite file: kept across a restart, each taken once."""

    def storeName(self) -> str:
        """Where the test's state is kept: a new file."""
        directory = Path(self.mktemp())
        directory.mkdir()
        return str(directory / "state.sqlite")

    def setUp(self) -> None:
        self.where = self.storeName()
        self.inputs = Path(self.mktemp())

    async def openStore(self) -> StateStore:
        """A state store on the test's data (opened again: a restarted server's), closed when the test ends."""
        state = openState(reactor, self.where)
        self.addCleanup(state.close)
        return state

    async def openQueue(self) -> JobQueue:
        return await openJobQueue(self.inputs, await self.openStore())

    async def test_keptAcrossRestart(self) -> None:
        """A restarted server finds every job where it was, and numbers new ones after them."""
        queue = await self.openQueue()
        self.assertEqual([await queue.submit("first"), await queue.submit("second")], [1, 2])
        self.assertEqual(await queue.take(), (1, "first"))
        queue.store.close()
        again = await self.openQueue()
        self.assertEqual([await again.state(1), await again.state(2)], ["running", "queued"])
        self.assertEqual(await again.submit("third"), 3)
        self.assertEqual(await again.take(), (2, "second"))

    async def test_eachJobTakenOnce(self) -> None:
        """Takers on two connections to the store (two servers) racing for three jobs get each job once."""
        queue = await self.openQueue()
        other = JobQueue(self.inputs, await self.openStore())
        for name in ("a", "b", "c"):
            await queue.submit(name)
        takes = [taker.take() for taker in (queue, other) for _ in range(4)]
        taken: list[tuple[JobId, JobName] | None] = await gatherResults(takes)
        jobs = sorted(job for job in taken if job is not None)
        self.assertEqual(jobs, [(1, "a"), (2, "b"), (3, "c")])
        self.assertEqual(taken.count(None), 5)

    async def test_unknownJob(self) -> None:
        """A job the store does not hold fails with NoSuchJob."""
        queue = await self.openQueue()
        with self.assertRaises(NoSuchJob):
            await queue.state(7)


class PostgreSQLStoreTests(SQLiteStoreTests):
    """The same in PostgreSQL (skipped unless `JOBQUEUE_TEST_POSTGRESQL` names a database the test may empty)."""

    def storeName(self) -> str:
        url = os.environ.get("JOBQUEUE_TEST_POSTGRESQL")
        if not url:
            raise SkipTest("set JOBQUEUE_TEST_POSTGRESQL to a postgresql:// URL to run these")
        return url

    emptied = False

    async def openQueue(self) -> JobQueue:
        state = await self.openStore()
        if not self.emptied:
            # The database outlives each test: start from no jobs (once: a restart must find them).
            self.emptied = True
            for key in await state.keys(PREFIX):
                await state.delete(key)
        return await openJobQueue(self.inputs, state)
