"""The Sphinx docs in C{docs/} build cleanly, cover every module and public name, and read as pages."""

from __future__ import annotations

import atexit
import functools
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import SkipTest

from twisted.trial.unittest import SynchronousTestCase

from tests.test_exports import publicModules, publicPackages

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"


def loadCheckPages():  # type: ignore[no-untyped-def]
    """Import docs/check_pages.py (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("check_pages", DOCS / "check_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loadApiPages():  # type: ignore[no-untyped-def]
    """Import docs/apipages.py, which writes the API reference's pages from the packages."""
    spec = importlib.util.spec_from_file_location("apipages", DOCS / "apipages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD_TIMEOUT = 1200.0
"""Seconds the one build may take: about 40 CPU-s, so only a hang misses this on a loaded machine."""


@functools.cache
def build() -> tuple[int, str, Path]:
    """
    Build the site once per process with C{-W}: the exit status, the
    output, and the HTML directory.  A build that does not end within
    L{BUILD_TIMEOUT} is a failure of status -1, kept like any other result:
    each test reports it at once rather than building again.
    """
    out = Path(tempfile.mkdtemp(prefix="chunkwire-docs-"))
    atexit.register(shutil.rmtree, out, True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    html = out / "html"
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-E", "-b", "html", "-d", str(out / "doctrees"), str(DOCS)]
    try:
        result = subprocess.run([*command, str(html)], env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return -1, f"sphinx-build did not end within {BUILD_TIMEOUT:g} s", html
    return result.returncode, result.stderr + result.stdout, html


def requireSphinx() -> None:
    """Skip unless Sphinx and MyST (the docs extra) are installed."""
    for name in ("sphinx", "myst_parser"):
        if importlib.util.find_spec(name) is None:
            raise SkipTest(f"{name} is not installed (the docs extra has it)")


class DocsBuildTests(SynchronousTestCase):
    """The docs build without warnings and document the whole framing and protocols packages."""

    def test_a_page_per_public_module(self) -> None:
        """
        The reference's pages (apipages.PUBLIC) are exactly the public
        packages and modules, and no private module has one: every other
        module of framing/ and protocols/ is private by name.
        """
        apiPages = loadApiPages()
        self.assertEqual(sorted(apiPages.PUBLIC), sorted(publicPackages() + publicModules()))
        private = apiPages.private_modules()
        self.assertEqual([m for m in private if not any(p.startswith("_") for p in m.split("."))], [])
        self.assertIn("protocols.rpc._broker", private)
        self.assertEqual(list(apiPages.SKIPPED_MODULES), ["framing._speedups"])

    def test_reference_pages_in_the_site(self) -> None:
        """Each public package and module has its page in docs/api/, in the index; docs/api/ has no other page."""
        index = (DOCS / "api.rst").read_text("utf-8")
        pages = loadApiPages().PUBLIC.values()
        for name in pages:
            text = (DOCS / "api" / f"{name}.rst").read_text("utf-8")
            self.assertIn(f".. include:: ../_generated/api/{name}.rst\n", text)
            self.assertIn(f"   api/{name}\n", index)
        self.assertEqual(sorted(p.stem for p in (DOCS / "api").glob("*.rst")), sorted(pages))

    def test_parseable_signature(self) -> None:
        """Reprs in a signature become Python Sphinx parses: interfaces and functions by name, the rest as ...."""
        apiPages = loadApiPages()
        signature = (
            "(a: Deferred[<InterfaceClass twisted.internet.interfaces.IListeningPort>],"
            " b: type[E] = <class 'x.E'>, c: Callable = <function commonName>, d: list = <factory>)"
        )
        self.assertEqual(
            apiPages.parseable_signature(signature),
            "(a: Deferred[~twisted.internet.interfaces.IListeningPort], b: type[E] = x.E, c: Callable = commonName,"
            " d: list = ...)",
        )
        self.assertEqual(apiPages.readable("(<InterfaceClass a.b.IName>,)"), "(a.b.IName,)")

    def test_build_timeout_reported_once(self) -> None:
        """A build past BUILD_TIMEOUT is a failed result (status -1, saying so), not an exception to retry per test."""

        def hang(*args: object, **kwargs: object) -> None:
            raise subprocess.TimeoutExpired("sphinx", BUILD_TIMEOUT)

        self.patch(subprocess, "run", hang)
        status, output, _ = build.__wrapped__()
        self.assertEqual((status, output), (-1, f"sphinx-build did not end within {BUILD_TIMEOUT:g} s"))

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

    def test_public_names_anchored(self) -> None:
        """Every name in the __all__ of the public packages has an anchor under its import path: protocols.rpc.serve."""
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        found = loadCheckPages().anchors(html)
        missing = [f"{p}.{name}" for p in loadApiPages().PUBLIC for name in importlib.import_module(p).__all__]
        self.assertEqual([path for path in missing if path not in found], [])
        self.assertIn("protocols.rpc.serve", found)

    def test_only_exported_names_documented(self) -> None:
        """
        The built site has a module anchor for each public package and
        module, and every anchor under framing or protocols is a public one:
        C{module-P} or C{P.name} (a member after it) for P public and name
        in its C{__all__}; nothing of a private module is documented.
        """
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        found = loadCheckPages().anchors(html)
        public = loadApiPages().PUBLIC
        self.assertEqual([p for p in public if f"module-{p}" not in found], [])
        exported = {f"{p}.{name}" for p in public for name in importlib.import_module(p).__all__}
        unexported = []
        for anchor in sorted(found):
            path = anchor.removeprefix("module-")
            if path.split(".")[0] not in ("framing", "protocols"):
                continue
            parts = path.split(".")
            prefixes = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
            if not (path in public if anchor.startswith("module-") else prefixes & exported):
                unexported.append(anchor)
        self.assertEqual(unexported, [])

    def test_old_anchors_lead_to_their_names(self) -> None:
        """
        Each anchor of the old one-page reference leads on: a module's (by
        its name now or before issue 40 made it private), a public name's
        defining path (either name of its module), a removed module's and
        every name it held; a private module's name that is not public, to
        its package's page.
        """
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        apiPages = loadApiPages()
        moved = apiPages.moved_anchors()
        modules = [m for root in ("framing", "protocols") for m in apiPages.all_modules(root)]
        old = [f"module-{m}" for m in modules] + [f"module-{apiPages.old_name(m)}" for m in apiPages.private_modules()]
        # Old paths are spelled through old_name, so that privatize.py, run again, leaves them old.
        was = apiPages.old_name
        old += list(apiPages.public_paths()) + [
            was("protocols.rpc._broker") + ".Broker.sendObject",
            was("protocols._guard") + ".GuardPolicy",
            was("protocols.rpc._calls") + ".OutgoingCalls",
            was("framing.rpc._session") + ".ClientSession.receive",
        ]
        # The removed modules' own anchors, and every name each held (protocols.rpc.errors.RemoteError).
        old += [f"module-{m}" for m in apiPages.REMOVED_MODULES]
        old += [a for a in moved if a.rpartition(".")[0] in apiPages.REMOVED_MODULES]
        broken = []
        for anchor in old:
            page, _, now = apiPages.moved_anchor(anchor, moved).partition("#")
            if f'id="{now}"' not in (html / page).read_text("utf-8"):
                broken.append(f"{anchor} -> {page}#{now}")
        self.assertEqual(broken, [])
        expected = {
            was("protocols.rpc._endpoints") + ".serve": "api/rpc.html#protocols.rpc.serve",
            "protocols.rpc._endpoints.serve": "api/rpc.html#protocols.rpc.serve",
            was("protocols._guard") + ".GuardPolicy": "api/serving.html#protocols.serving.GuardPolicy",
            was("protocols.rpc._calls") + ".OutgoingCalls": "api/rpc.html#module-protocols.rpc",
        }
        self.assertEqual({anchor: apiPages.moved_anchor(anchor, moved) for anchor in expected}, expected)
        self.assertIn(apiPages.redirect_script(), (html / "api.html").read_text("utf-8"))

    def test_old_anchor_redirect_script(self) -> None:
        """api.html's script sends an old anchor where moved_anchor says, and stays put for an unknown one (node)."""
        node = shutil.which("node")
        if node is None:
            raise SkipTest("no node on PATH: the redirect script is not run")
        apiPages = loadApiPages()
        script = apiPages.redirect_script().removeprefix("<script>").removesuffix("</script>")
        results = []
        calls = apiPages.old_name("protocols.rpc._calls")  # spelled so that privatize.py, run again, leaves it old
        anchors = (apiPages.old_name("protocols.rpc._endpoints") + ".serve", f"module-{calls}", f"{calls}.X", "no", "")
        for anchor in anchors:
            stub = f"const window = {{location: {{hash: '#{anchor}', replace: (to) => console.log(to)}}}};"
            ran = subprocess.run([node, "-e", stub + script], capture_output=True, text=True, timeout=60)
            results.append(ran.stdout.strip())
        module = "api/rpc.html#module-protocols.rpc"
        self.assertEqual(results, ["api/rpc.html#protocols.rpc.serve", module, module, "", ""])
        self.assertEqual([apiPages.moved_anchor(a, apiPages.moved_anchors()) or "" for a in anchors], results)

    def test_signatures_readable(self) -> None:
        """No built page shows an <InterfaceClass ...> repr, and every signature is balanced and was parsed."""
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        self.assertEqual(loadCheckPages().broken_signatures(html), [])

    def test_broken_signatures_detected(self) -> None:
        """The check finds an interface's repr, an unbalanced signature and one Sphinx showed unparsed (a ~ left)."""
        site = Path(self.mktemp())
        site.mkdir()
        signature = '<dl><dt class="sig sig-object py" id="x">{}<a class="headerlink">¶</a></dt></dl>'
        (site / "a.html").write_text("<p>= (&lt;InterfaceClass a.IName&gt;,)</p>", "utf-8")
        (site / "b.html").write_text(signature.format("serve(reactor) &#x2192; IListeningPort&gt;]"), "utf-8")
        (site / "c.html").write_text(signature.format("f(a: ~typing.Any = &lt;factory&gt;)"), "utf-8")
        (site / "d.html").write_text(signature.format("serve(a: Any) &#x2192; Deferred[IListeningPort]"), "utf-8")
        problems = loadCheckPages().broken_signatures(site)
        self.assertEqual([problem.split(":")[0] for problem in problems], ["a.html", "b.html", "c.html"])

    def test_reference_pages_sized(self) -> None:
        """Each page of the API reference is a page, not a book: under 20,000 words (the one page had 73,000)."""
        requireSphinx()
        status, output, html = build()
        self.assertEqual(status, 0, output)
        counts = loadCheckPages().word_counts(html)
        self.assertEqual(len(counts), len(loadApiPages().PUBLIC), counts)
        self.assertEqual({page: words for page, words in counts.items() if words > 20_000}, {}, counts)

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
