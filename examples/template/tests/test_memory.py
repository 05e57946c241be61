"""The job queue's calls in memory: a client and the server joined without a reactor or a socket."""

from pathlib import Path

from framing import Violation
from protocols.testing import brokerPair
from twisted.trial.unittest import SynchronousTestCase

from jobqueue.interface import IJobQueue, NoSuchJob
from jobqueue.service import JobQueue


class JobQueueTests(SynchronousTestCase):
    """Each call goes through the wire format and the interface's checks, as over a socket."""

    def setUp(self) -> None:
        self.pair = brokerPair(JobQueue(Path(self.mktemp())))
        self.queue = self.pair.root.typed(IJobQueue)

    def test_takenInOrder(self) -> None:
        """Jobs are taken in the order they were submitted, and a taken job is running."""
        first = self.queue.submit("first")
        second = self.queue.submit("second")
        taken = self.queue.take()
        self.pair.flush()  # deliver the calls, then their answers
        self.assertEqual(self.successResultOf(first), 1)
        self.assertEqual(self.successResultOf(second), 2)
        self.assertEqual(self.successResultOf(taken), (1, "first"))
        state = self.queue.state(1)
        self.pair.flush()
        self.assertEqual(self.successResultOf(state), "running")

    def test_finished(self) -> None:
        """A finished job is done, and an empty queue gives nothing to take."""
        self.queue.submit("only")
        self.queue.take()
        self.queue.finish(1)
        state, taken = self.queue.state(1), self.queue.take()
        self.pair.flush()
        self.assertEqual(self.successResultOf(state), "done")
        self.assertIsNone(self.successResultOf(taken))

    def test_unknownJob(self) -> None:
        """A job that does not exist fails the call with NoSuchJob itself, registered on both ends."""
        state = self.queue.state(7)
        self.pair.flush()
        self.failureResultOf(state, NoSuchJob)

    def test_badArgumentNotSent(self) -> None:
        """A name the interface refuses (empty) fails the call at once, and nothing is sent."""
        writes = len(self.pair.memory.clientTransport.writes)
        refused = self.queue.submit("")
        self.failureResultOf(refused, Violation)
        self.assertEqual(len(self.pair.memory.clientTransport.writes), writes)
