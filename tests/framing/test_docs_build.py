"""The Sphinx docs in C{docs/} build cleanly, cover every framing and protocols module, and read as pages."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import SkipTest

from twisted.trial.unittest import SynchronousTestCase

import framing

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"


def loadCheckPages():  # type: ignore[no-untyped-def]
    """Import docs/check_pages.py (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("check_pages", DOCS / "check_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def build() -> tuple[int, str, Path]:
    """Build the site once per process with C{-W}: the exit status, the output, and the HTML directory."""
    out = Path(tempfile.mkdtemp(prefix="chunkwire-docs-"))
    atexit.register(shutil.rmtree, out, True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    html = out / "html"
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-E", "-b", "html", "-d", str(out / "doctrees"), str(DOCS)]
    result = subprocess.run([*command, str(html)], env=env, capture_output=True, text=True, timeout=300)
    return result.returncode, result.stderr + result.stdout, html


def requireSphinx() -> None:
    """Skip unless Sphinx and MyST (the docs extra) are installed."""
    for name in ("sphinx", "myst_parser"):
        if importlib.util.find_spec(name) is None:
            raise SkipTest(f"{name} is not installed (the docs extra has it)")


class DocsBuildTests(SynchronousTestCase):
    """The docs build without warnings and document the whole framing and protocols packages."""

    def test_every_framing_module_documented(self) -> None:
        """docs/api.rst has an automodule directive for every module of the framing package."""
        api = (DOCS / "api.rst").read_text("utf-8")
        modules = ["framing"] + [m.name for m in pkgutil.walk_packages(framing.__path__, "framing.")]
        # The optional C extension is documented by framing._core, which chooses it.
        missing = [name for name in modules if f".. automodule:: {name}\n" not in api and name != "framing._speedups"]
        self.assertEqual(missing, [])

    def test_every_protocols_module_documented(self) -> None:
        """docs/api.rst has an automodule directive for every module of protocols/."""
        import protocols

        api = (DOCS / "api.rst").read_text("utf-8")
        modules = ["protocols"] + [m.name for m in pkgutil.walk_packages(protocols.__path__, "protocols.")]
        missing = [name for name in modules if f".. automodule:: {name}\n" not in api]
        self.assertEqual(missing, [])

    def test_sphinx_build_without_warnings(self) -> None:
        """sphinx-build -W (warnings are errors) succeeds on docs/."""
        requireSphinx()
        status, output, _ = build()
        self.assertEqual(status, 0, output)

    def test_markdown_rendered(self) -> None:
        """No built page holds Markdown in a literal block: the .md pages are rendered, tables and headings."""
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        self.assertEqual(loadCheckPages().literal_markdown(html), [])
        reliability = (html / "reliability.html").read_text("utf-8")
        self.assertIn("<table", reliability)
        self.assertIn("<h2>Guards", reliability)

    def test_literal_markdown_detected(self) -> None:
        """The check finds a Markdown table or a block highlighted as Markdown inside a literal block."""
        site = Path(self.mktemp())
        site.mkdir()
        (site / "a.html").write_text('<div class="highlight-markdown notranslate"><div class="highlight"><pre>x</pre>')
        (site / "b.html").write_text("<pre>| a | b |\n|---|---|\n</pre>")
        (site / "c.html").write_text("<pre># a Python comment\nx = 1</pre>")
        problems = loadCheckPages().literal_markdown(site)
        self.assertEqual([problem.split(":")[0] for problem in problems], ["a.html", "b.html"])

    def test_no_raw_epytext(self) -> None:
        """No narrative page shows raw epytext markup (C{...}, L{...}), in prose or in the code it includes."""
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        self.assertEqual(loadCheckPages().raw_epytext(html), [])

    def test_raw_epytext_detected(self) -> None:
        """The check finds epytext in a narrative page's prose or code, and leaves API reference pages alone."""
        site = Path(self.mktemp())
        site.mkdir()
        (site / "tutorial.html").write_text("<body><pre>fires <span>C{self.answer}</span></pre></body>")
        (site / "howto.html").write_text("<body><p>see L{rpc.serve} and I{this}</p></body>")
        (site / "api.html").write_text('<body><dl class="py function"><dd>C{x}</dd></dl></body>')
        (site / "plain.html").write_text("<body><pre>d = {'a': 1}; f'{C}' and Limits()</pre></body>")
        problems = loadCheckPages().raw_epytext(site)
        self.assertEqual(problems, ["howto.html: 'L{rpc.serve}'", "tutorial.html: 'C{self.answer}'"])

    def test_howto_openings_short(self) -> None:
        """
        Each how-to opens with a short paragraph (at most 100 words) before
        its details: the compiled-core page once opened with 285.
        """
        long = {}
        for page in sorted((DOCS / "howto").glob("*.rst")):
            paragraphs = [p for p in re.split(r"\n\s*\n", page.read_text("utf-8")) if p.strip()]
            # The first paragraph after the title (the title and its underline are one paragraph).
            opening = next((p for p in paragraphs[1:] if not p.lstrip().startswith("..")), "")
            if len(opening.split()) > 100:
                long[page.name] = len(opening.split())
        self.assertEqual(long, {})

    def test_code_not_clipped(self) -> None:
        """In headless Chromium at 1280 px no code block on any page is wider than its box."""
        requireSphinx()
        checkPages = loadCheckPages()
        browser = checkPages.find_browser()
        if browser is None:
            raise SkipTest("no Chromium on PATH (apt-get install chromium): the 1280 px layout is not checked")
        status, output, html = build()
        self.assertEqual(status, 0, output)
        self.assertEqual(checkPages.clipped_code(browser, html), [])

    def test_screenshots(self) -> None:
        """check_pages.py writes a 1280-pixel-wide PNG of every page, given relative paths as dev.py docs does."""
        requireSphinx()
        checkPages = loadCheckPages()
        browser = checkPages.find_browser()
        if browser is None:
            raise SkipTest("no Chromium on PATH (apt-get install chromium): no screenshots to check")
        status, output, html = build()
        self.assertEqual(status, 0, output)
        # Three pages of the site (every page: dev.py docs --screenshots), with its styles, nested page included.
        site = Path(self.mktemp())
        shutil.copytree(html / "_static", site / "_static")
        for name in ("index.html", "tutorial.html", "howto/compiled-core.html"):
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(html / name, site / name)
        out = Path(self.mktemp())
        relative = Path(os.path.relpath(site))
        written = checkPages.screenshots(browser, relative, out)
        self.assertEqual(len(written), len(checkPages.pages(site)))
        self.assertEqual(len(written), 3)
        for png in written:
            header = png.read_bytes()[:24]
            self.assertEqual((header[:8], int.from_bytes(header[16:20], "big")), (b"\x89PNG\r\n\x1a\n", 1280), png)
