"""The job queue itself: the object clients call through the remote interface."""

import json
from pathlib import Path

from protocols import bulk, rpc
from protocols.kv import StateStore, openState

from .interface import IJobQueue, JobId, JobName, NoSuchJob, State

PREFIX = "jobqueue/"
"""The queue's keys in its state store: a store may hold other services' keys too."""


_STATES: dict[str, State] = {"queued": "queued", "running": "running", "done": "done"}
"""A stored state as the interface's type."""


def _jobKey(job: int) -> str:
    return f"{PREFIX}job/{job:010d}"


def _queuedKey(job: int) -> str:
    # Zero-padded: the store lists keys sorted, so the oldest waiting job comes first.
    return f"{PREFIX}queued/{job:010d}"


class JobQueue(rpc.Referenceable, IJobQueue):
    """
    Jobs kept in a state store (`protocols.kv.StateStore`: this process's
    memory, a SQLite file or PostgreSQL), taken in the order they were
    submitted; each job's input in a file of its own under `inputs`.
    Every store call runs off the reactor thread and each change is
    committed before the call that made it is answered, so an answered
    `submit` survives a restart with a durable store.  Subclassing
    `IJobQueue` makes exactly its methods remote, with its hints checked
    on every call; `@rpc.deferred` makes each `async def` return the
    Deferred the interface declares.

    One server process numbers the jobs of one store (`openJobQueue`
    reads where the numbering stopped); any number of them may take jobs
    from it, since a job is taken by deleting its place in the queue,
    which only one taker can do.
    """

    def __init__(self, inputs: Path, state: StateStore | None = None, nextJob: int = 1) -> None:
        self.inputs = inputs
        self.store = state if state is not None else openState(None)
        self.nextJob = nextJob

    @rpc.deferred
    async def submit(self, name: JobName) -> JobId:
        job = self.nextJob
        self.nextJob += 1
        await self.store.put(f"{PREFIX}next", str(self.nextJob))
        await self.store.put(_jobKey(job), json.dumps({"name": name, "state": "queued"}))
        await self.store.put(_queuedKey(job), "")
        return job

    @rpc.deferred
    async def take(self) -> tuple[JobId, JobName] | None:
        for key in await self.store.keys(f"{PREFIX}queued/"):
            if await self.store.delete(key):  # taken by this call, not by another taker
                job = int(key.rsplit("/", 1)[1])
                name = (await self._load(job))["name"]
                await self._save(job, name, "running")
                return job, name
        return None

    @rpc.deferred
    async def finish(self, job: JobId) -> None:
        record = await self._load(job)
        await self._save(job, record["name"], "done")

    @rpc.deferred
    async def state(self, job: JobId) -> State:
        return _STATES[(await self._load(job))["state"]]

    @rpc.deferred
    async def attach(self, job: JobId, data: bulk.StreamArg) -> int:
        await self._load(job)
        # The file is named by the queue, never by the caller, and appears
        # only once the stream's digest checked out.
        result = await bulk.asIncoming(data).receive(self.inputs / f"{job}.input")
        return result.size

    async def _load(self, job: int) -> dict[str, str]:
        stored = await self.store.get(_jobKey(job))
        if stored is None:
            raise NoSuchJob(job)
        record: dict[str, str] = json.loads(stored)
        return record

    async def _save(self, job: int, name: str, state: State) -> None:
        await self.store.put(_jobKey(job), json.dumps({"name": name, "state": state}))


async def openJobQueue(inputs: Path, state: StateStore) -> JobQueue:
    """A `JobQueue` on `state`, numbering new jobs after the last one it holds."""
    stored = await state.get(f"{PREFIX}next")
    return JobQueue(inputs, state, int(stored) if stored is not None else 1)
