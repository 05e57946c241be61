"""What clients may call on the job queue, and with what: imported by the server and by its clients."""

from typing import Annotated, Literal, Protocol

from protocols import bulk, rpc
from twisted.internet.defer import Deferred

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
    """
    The job queue: workers take jobs in the order they were submitted.

    Each method returns a Deferred, as a client's call does: await it, or
    keep it to cancel it or give it a timeout.
    """

    def submit(self, name: JobName) -> Deferred[JobId]:
        """Queue a job; its number."""
        ...

    def take(self) -> Deferred[tuple[JobId, JobName] | None]:
        """Take the oldest queued job (it becomes running), or `None` when none waits."""
        ...

    def finish(self, job: JobId) -> Deferred[None]:
        """Mark a job done."""
        ...

    def state(self, job: JobId) -> Deferred[State]:
        """Where the job is."""
        ...

    def attach(self, job: JobId, data: bulk.StreamArg) -> Deferred[int]:
        """Store the job's input, sent as a stream (a `bulk.Stream` of any size); its size in bytes."""
        ...
