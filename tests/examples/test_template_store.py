"""The template project's job queue on SQLite and on PostgreSQL: its own tests, run against the tests' private server.

The template's C{tests/test_store.py} runs its PostgreSQL cases only when
C{JOBQUEUE_TEST_POSTGRESQL} names a database; here it names a schema of
its own in the test process's private PostgreSQL (L{tests.postgres}), and
the template's suite runs as the template's own users run it (C{trial
tests.test_store} in its directory), chunkwire found through C{PYTHONPATH}.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from twisted.trial.unittest import SynchronousTestCase

from tests.kv_stores import Scratch
from tests.processes import ENV, ROOT

TEMPLATE = ROOT / "examples" / "template"


class TemplateStoreTests(SynchronousTestCase):
    """The job queue keeps its jobs in either store: across a restart, each taken once."""

    def test_sqliteAndPostgreSQL(self) -> None:
        """The template's store tests pass on SQLite and on PostgreSQL, none skipped."""
        scratch = Scratch("postgresql")  # (SkipTest, saying why, when no PostgreSQL can be had)
        self.addCleanup(scratch.cleanUp)
        env = dict(ENV, JOBQUEUE_TEST_POSTGRESQL=scratch.where)
        # trial's directory outside the template (whose files are checked to be only its own).
        temporary = tempfile.mkdtemp(prefix="jobqueue-trial-")
        self.addCleanup(shutil.rmtree, temporary, True)
        trialDirectory = os.path.join(temporary, "trial")
        command = [sys.executable, "-m", "twisted.trial", "--temp-directory", trialDirectory, "tests.test_store"]
        done = subprocess.run(command, cwd=TEMPLATE, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout[-4000:] + done.stderr[-2000:])
        # Three cases on each store, and none skipped: PostgreSQL's ran too.
        self.assertIn("PostgreSQLStoreTests", done.stdout)
        self.assertRegex(done.stdout, r"PASSED \(successes=6\)")
