"""What clients may call on the job queue, and with what: imported by the server and by its clients."""

from typing import Annotated, Literal, Protocol

from protocols import bulk, rpc

JobName = Annotated[str, rpc.MinLength(1), rpc.MaxLength(100)]
"""A job's name: 1 to 100 bytes of text."""

JobId = Annotated[int, rpc.Range(1, 2**31 - 1)]
"""A job's number, given by the queue."""

State = Literal["queued", "running", "done"]
"""Where a job is: waiting to be taken, taken by a worker, or finished."""


class NoSuchJob(Exception):
    """No job has this number; the client's call fails with this same type."""


# Both ends import this module, so both register the error under one name
# and it travels as itself instead of as a generic RemoteError.
rpc.registerError(NoSuchJob, "jobqueue.NoSuchJob")


class IJobQueue(rpc.RemoteInterface, Protocol, name="jobqueue.IJobQueue"):
    """The job queue: workers take jobs in the order they were submitted."""

    async def submit(self, name: JobName) -> JobId:
        """Queue a job; return its number."""
        ...

    async def take(self) -> tuple[JobId, JobName] | None:
        """Take the oldest queued job (it becomes running), or C{None} when none waits."""
        ...

    async def finish(self, job: JobId) -> None:
        """Mark a job done."""
        ...

    async def state(self, job: JobId) -> State:
        """Where the job is."""
        ...

    async def attach(self, job: JobId, data: bulk.IncomingStream) -> int:
        """Store the job's input, sent as a stream; return its size in bytes."""
        ...
