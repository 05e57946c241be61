"""The campaign's report refresh: generated sections are replaced between their markers, nothing else."""

from __future__ import annotations

from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .extras import Case, refreshReport, sections


class RefreshReportTests(SynchronousTestCase):
    """refreshReport rewrites marked sections only."""

    def test_replacesMarkedSections(self) -> None:
        """A marked section gets the new text; text around it and unmarked names are left alone."""
        path = Path(self.mktemp())
        path.write_text("intro\n<!-- BEGIN generated: push -->\nold figures\n<!-- END generated: push -->\noutro\n")
        written = refreshReport(path, {"push": "new figures", "netem": "not in the page"})
        self.assertEqual(written, ["push"])
        self.assertEqual(
            path.read_text(),
            "intro\n<!-- BEGIN generated: push -->\nnew figures\n<!-- END generated: push -->\noutro\n",
        )

    def test_fillsEmptySection(self) -> None:
        """A section with nothing between its markers yet is filled too."""
        path = Path(self.mktemp())
        path.write_text("<!-- BEGIN generated: slowreader -->\n<!-- END generated: slowreader -->\n")
        self.assertEqual(refreshReport(path, {"slowreader": "rows"}), ["slowreader"])
        self.assertEqual(
            path.read_text(), "<!-- BEGIN generated: slowreader -->\nrows\n<!-- END generated: slowreader -->\n"
        )

    def test_failedCaseShowsFail(self) -> None:
        """A case that failed is shown as FAIL in its section."""
        body = sections([Case("segments", False, "table", "cmd")])["segments"]
        self.assertIn("Verdict: FAIL", body)
