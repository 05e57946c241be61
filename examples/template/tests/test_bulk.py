"""A job's input uploaded as a stream, in memory."""

from pathlib import Path

from protocols import bulk
from protocols.testing import brokerPair
from twisted.trial.unittest import SynchronousTestCase

from jobqueue.interface import IJobQueue, NoSuchJob
from jobqueue.service import JobQueue


class AttachTests(SynchronousTestCase):
    """attach() receives a bulk stream into the job's input file."""

    def setUp(self) -> None:
        self.inputs = Path(self.mktemp())
        self.inputs.mkdir()
        self.pair = brokerPair(JobQueue(self.inputs), bulk=True)  # both ends carry streams
        self.queue = self.pair.root.typed(IJobQueue)

    def test_inputStored(self) -> None:
        """The stream's bytes end up in the job's input file, whole, and its size is answered."""
        data = bytes(range(256)) * 4096  # 1 MiB, a few frames
        self.queue.submit("with input")
        size = self.queue.attach(1, bulk.Stream(data))
        self.pair.flush()
        self.assertEqual(self.successResultOf(size), len(data))
        self.assertEqual((self.inputs / "1.input").read_bytes(), data)

    def test_unknownJobStoresNothing(self) -> None:
        """An input for a job that does not exist is refused with NoSuchJob, and no file is written."""
        refused = self.queue.attach(9, bulk.Stream(b"stray"))
        self.pair.flush()
        self.failureResultOf(refused, NoSuchJob)
        self.assertEqual(list(self.inputs.iterdir()), [])
