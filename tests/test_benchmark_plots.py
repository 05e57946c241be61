"""docs/make_plots.py draws the benchmark page from bench-results/*.json, and says what is missing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import SkipTest

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT

MACHINE = {
    "cpu": "Test CPU",
    "nproc": 2,
    "python": "CPython 3.11.7",
    "twisted": "26.10.0",
    "foolscap": "24.9.0",
    "msgpack": "1.2.4",
    "platform": "Linux-test",
    "date": "2026-11-22T00:00:00+00:00",
}

RPC: dict[str, Any] = {
    "benchmark": "rpc",
    "machine": MACHINE,
    "options": {"quick": True},
    "config": {"runs": 3, "duration": 0.5},
    "peers": ["chunkwire", "amp", "pb", "foolscap", "handrolled"],
    "columns": [["seq_int", "int", 1, "sequential int"], ["w100_int", "int", 100, "100 in flight int"]],
    "summary": {
        "cells": {
            peer: {
                "seq_int": {"calls_per_s": rate, "min": rate * 0.9, "max": rate * 1.1},
                "w100_int": {"calls_per_s": rate * 4, "min": rate * 3.5, "max": rate * 4.2},
            }
            for peer, rate in [
                ("chunkwire", 9000),
                ("amp", 7000),
                ("pb", 6000),
                ("foolscap", 3000),
                ("handrolled", 1e4),
            ]
        }
    },
}

BULK: dict[str, Any] = {
    "benchmark": "bulk transfer over loopback TCP",
    "config": {"size": 2**30, "runs": 3, "python": "3.11.7", "platform": "Linux-test", "cpus": 2},
    "cases": {
        "raw": {
            "label": "raw Twisted producer (ceiling)",
            "mb_s": 1900.0,
            "mb_s_min": 1800,
            "mb_s_max": 2000,
            "vs_raw": 1,
        },
        "chunkwire": {"label": "chunkwire Stream", "mb_s": 870.0, "mb_s_min": 860, "mb_s_max": 890, "vs_raw": 0.46},
        "foolscap": {"label": "Foolscap", "mb_s": 660.0, "mb_s_min": 630, "mb_s_max": 700, "vs_raw": 0.35},
    },
}


def requireModules(*names: str) -> None:
    """Skip the test unless every module in C{names} is installed (the docs and bench extras have them)."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if missing:
        raise SkipTest(f"not installed: {', '.join(missing)}")


def loadMakePlots() -> ModuleType:
    """Import docs/make_plots.py (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("make_plots", ROOT / "docs" / "make_plots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BenchmarkPageTests(SynchronousTestCase):
    """The page body make_plots.render writes, and the figures it draws."""

    def setUp(self) -> None:
        requireModules("matplotlib")
        self.makePlots = loadMakePlots()
        self.work = Path(self.mktemp()).resolve()
        self.results = self.work / "bench-results"
        self.results.mkdir(parents=True)

    def write(self, name: str, data: dict[str, Any]) -> None:
        (self.results / name).write_text(json.dumps(data))

    def test_rpcAndBulk(self) -> None:
        """RPC calls/s bars and bulk MB/s bars are drawn as PNGs, each captioned with the machine and versions."""
        self.write("rpc.json", RPC)
        self.write("bulk.json", BULK)
        page = self.makePlots.render(self.results, self.work)
        for png in ("rpc-calls.png", "bulk-mbs.png"):
            self.assertTrue((self.work / "_static" / "bench" / png).read_bytes().startswith(b"\x89PNG"), png)
            self.assertIn(f".. figure:: /_static/bench/{png}", page)
        self.assertIn("Measured on: Test CPU, 2 CPUs, CPython 3.11.7, twisted 26.10.0, foolscap 24.9.0", page)
        self.assertIn("Measured on: 2 CPUs, Python 3.11.7, Twisted and peer versions not recorded", page)
        self.assertIn("a ``--quick`` run", page)
        self.assertNotIn("was not found", page)
        self.assertLess(page.index("RPC calls per second\n---"), page.index("Bulk transfer\n---"))

    def test_oneMissing(self) -> None:
        """Without bulk.json the page says so in the bulk section and still shows the RPC bars."""
        self.write("rpc.json", RPC)
        page = self.makePlots.render(self.results, self.work)
        self.assertIn("rpc-calls.png", page)
        self.assertIn("``bench-results/bulk.json`` was not found when this site was built", page)
        self.assertNotIn("``bench-results/rpc.json`` was not found", page)

    def test_noResults(self) -> None:
        """Without any results the page says how to produce them."""
        self.assertEqual(self.makePlots.render(self.results, self.work), self.makePlots.NO_RESULTS)

    def test_unreadable(self) -> None:
        """A result file of an unexpected shape is named on the page instead of failing the build."""
        self.write("rpc.json", {"columns": [["seq_int"]], "summary": {"cells": {"chunkwire": {"seq_int": {}}}}})
        page = self.makePlots.render(self.results, self.work)
        self.assertIn("``rpc.json`` could not be plotted", page)


class BenchToPageTests(SynchronousTestCase):
    """What C{tox -e bench} writes is what C{tox -e docs} draws from."""

    def test_quickEchoBenchmark(self) -> None:
        """
        The echo benchmark writes echo.json where C{tox -e bench} puts it,
        and make_plots.py turns it into a figure on the page.  The
        benchmark runs as the harness runs it (C{tests.benchmarks.bench_echo
        --json}), for one run of 0.05 s per cell: the figures are not read.
        """
        requireModules("matplotlib", "msgpack")
        work = Path(self.mktemp()).resolve()
        results, docs = work / "bench-results", work / "docs"
        results.mkdir(parents=True)
        bench = [sys.executable, "-m", "tests.benchmarks.bench_echo", "--json", str(results / "echo.json")]
        bench += ["--duration", "0.05", "--runs", "1", "--warmup", "20"]
        ran = subprocess.run(bench, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertTrue((results / "echo.json").is_file(), "the benchmark wrote no echo.json")
        plots = [sys.executable, "docs/make_plots.py", "--results", str(results), "--out", str(docs)]
        done = subprocess.run(plots, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        page = (docs / "_generated" / "benchmarks.rst").read_text()
        self.assertIn(".. figure:: /_static/bench/echo-calls.png", page)
        self.assertTrue((docs / "_static" / "bench" / "echo-calls.png").is_file())
        self.assertIn("``bench-results/rpc.json`` was not found", page)


class RecordingPyplot:
    """matplotlib.pyplot, except that closed figures are kept for the test to look at."""

    def __init__(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot

        self.pyplot = matplotlib.pyplot
        self.closed: list[Any] = []

    def subplots(self, *args: Any, **kwargs: Any) -> Any:
        return self.pyplot.subplots(*args, **kwargs)

    def close(self, fig: Any) -> None:
        self.closed.append(fig)


class FigureContentTests(SynchronousTestCase):
    """What the figures show: log axes where values differ by 10x, honest labels, the shipped reference run."""

    def setUp(self) -> None:
        requireModules("matplotlib")
        self.makePlots = loadMakePlots()
        self.plt = RecordingPyplot()
        self.addCleanup(lambda: [self.plt.pyplot.close(fig) for fig in self.plt.closed])
        self.out = Path(self.mktemp()).resolve()
        self.out.mkdir()

    def test_logAxisWhereSpread(self) -> None:
        """The RPC bars (10x apart here) get a log axis; bulk bars within 10x of each other keep a linear one."""
        self.makePlots.plot_rpc(self.plt, RPC, "rpc", self.out)
        self.makePlots.plot_bulk(self.plt, BULK, "bulk", self.out)
        rpc, bulk = (fig.axes[0] for fig in self.plt.closed)
        self.assertEqual((rpc.get_yscale(), bulk.get_xscale()), ("log", "linear"))
        self.assertTrue(self.makePlots.spread([100.0, 1000.0]))
        self.assertFalse(self.makePlots.spread([100.0, 999.0, 0.0]))

    def test_rawIsNotCalledCeiling(self) -> None:
        """The raw producer's bar and line are labelled a reference point, never a ceiling."""
        self.makePlots.plot_bulk(self.plt, BULK, "bulk", self.out)
        ax = self.plt.closed[0].axes[0]
        labels = [tick.get_text() for tick in ax.get_yticklabels()]
        self.assertIn("raw Twisted producer (reference)", labels)
        self.assertEqual([text.get_text() for text in ax.get_legend().get_texts()], [self.makePlots.RAW_LABEL])
        self.assertFalse(
            any("ceiling" in label and "not a ceiling" not in label for label in labels + [self.makePlots.RAW_LABEL])
        )

    def test_referenceFallback(self) -> None:
        """Without results of this machine's own, the reference run is drawn under a note saying so."""
        reference = self.out / "reference"
        reference.mkdir()
        (reference / "rpc.json").write_text(json.dumps(RPC))
        page = self.makePlots.render(self.out / "bench-results", self.out, reference)
        self.assertTrue(page.startswith(self.makePlots.REFERENCE_NOTE), page[:200])
        self.assertIn(".. figure:: /_static/bench/rpc-calls.png", page)

    def test_shippedReference(self) -> None:
        """The shipped reference run draws RPC, bulk and both log-log cost-per-byte figures, each with a date."""
        page = self.makePlots.render(self.out / "none", self.out, ROOT / "docs" / "bench-reference")
        for png in ("rpc-calls.png", "bulk-mbs.png", "receive-4096.png", "output-16.png"):
            self.assertIn(f".. figure:: /_static/bench/{png}", page)
        self.assertNotIn("date not recorded", page)
        self.assertNotIn("could not be plotted", page)
        measured = [line for line in page.splitlines() if "Measured on:" in line]
        self.assertTrue(measured)
        for line in measured:
            self.assertRegex(line, r"20\d\d-\d\d-\d\dT")

    def test_defaultDigestNamedHonestly(self) -> None:
        """
        A bulk case that measured the default digest is labelled with the
        digest it measured, and "the default" only if it is the first of
        protocols.bulk's preference (BLAKE3): the shipped reference run,
        made without blake3, once said "SHA-256 checked (default)".
        """
        from protocols.bulk._integrity import PREFERENCE

        self.assertEqual(PREFERENCE[0], "blake3")
        label = self.makePlots.bulk_label
        reference = json.loads((ROOT / "docs" / "bench-reference" / "bulk.json").read_text())
        shown = label("chunkwire", reference["cases"]["chunkwire"])
        self.assertEqual(shown, "chunkwire Stream, SHA-256 checked (not the default: BLAKE3 is, with chunkwire[fast])")
        measured = {"label": "chunkwire Stream, digest checked (default: negotiated)", "algorithm": "blake3"}
        self.assertEqual(label("chunkwire", measured), "chunkwire Stream, BLAKE3 checked (the default)")
        cli = {"label": "examples/bulk_client.py send, tmpfs to tmpfs (default digest)", "algorithm": "sha256"}
        self.assertTrue(
            label("cli", cli).startswith("examples/bulk_client.py send, tmpfs to tmpfs, SHA-256 checked (not")
        )
        self.assertEqual(label("raw", {"label": "raw (ceiling)"}), "raw (reference)")

    def test_oneRun(self) -> None:
        """A caption of one run says "median of 1 run", not "1 runs"; of three, "median of 3 runs"."""
        one = dict(BULK, config=dict(BULK["config"], runs=1))
        [(_, caption)] = self.makePlots.plot_bulk(self.plt, one, "bulk", self.out)
        self.assertIn("(median of 1 run; ", caption)
        [(_, caption)] = self.makePlots.plot_rpc(self.plt, RPC, "rpc", self.out)
        self.assertIn("(median of 3 runs of 0.5 s", caption)
        page = self.makePlots.render(self.out / "none", self.out, ROOT / "docs" / "bench-reference")
        self.assertNotIn(" 1 runs", page)

    def test_costPerByteLogLog(self) -> None:
        """The promised cost-per-byte figures are drawn from the shipped receive results, on log-log axes."""
        data = json.loads((ROOT / "docs" / "bench-reference" / "receive.json").read_text())
        figures = self.makePlots.plot_ns_per_byte(self.plt, data, "receive", self.out)
        self.assertTrue(figures)
        for fig in self.plt.closed:
            ax = fig.axes[0]
            self.assertEqual((ax.get_xscale(), ax.get_yscale()), ("log", "log"))
            self.assertGreaterEqual(len(ax.get_lines()), 2)
