"""The job queue itself: the object clients call through the remote interface."""

from collections import deque
from pathlib import Path

from protocols import bulk, rpc

from .interface import IJobQueue, JobId, JobName, NoSuchJob, State


class JobQueue(rpc.Referenceable, IJobQueue):
    """
    Jobs in memory, taken in the order they were submitted; each job's
    input in a file of its own under `inputs`.  Subclassing `IJobQueue`
    makes exactly its methods remote, with its hints checked on every call;
    `@rpc.deferred` makes each `async def` return the Deferred the
    interface declares.
    """

    def __init__(self, inputs: Path) -> None:
        self.inputs = inputs
        self.names: dict[int, str] = {}
        self.states: dict[int, State] = {}
        self.waiting: deque[int] = deque()

    @rpc.deferred
    async def submit(self, name: JobName) -> JobId:
        job = len(self.names) + 1
        self.names[job] = name
        self.states[job] = "queued"
        self.waiting.append(job)
        return job

    @rpc.deferred
    async def take(self) -> tuple[JobId, JobName] | None:
        if not self.waiting:
            return None
        job = self.waiting.popleft()
        self.states[job] = "running"
        return job, self.names[job]

    @rpc.deferred
    async def finish(self, job: JobId) -> None:
        self._known(job)
        self.states[job] = "done"

    @rpc.deferred
    async def state(self, job: JobId) -> State:
        self._known(job)
        return self.states[job]

    @rpc.deferred
    async def attach(self, job: JobId, data: bulk.StreamArg) -> int:
        self._known(job)
        # The file is named by the queue, never by the caller, and appears
        # only once the stream's digest checked out.
        result = await bulk.asIncoming(data).receive(self.inputs / f"{job}.input")
        return result.size

    def _known(self, job: int) -> None:
        if job not in self.names:
            raise NoSuchJob(job)
