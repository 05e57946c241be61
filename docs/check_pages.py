"""Check the built HTML site as a reader sees it, and take screenshots of it.

    python docs/check_pages.py BUILT_HTML_DIR [--screenshots DIR] [--width 1280]

Three checks, each a list of problems (empty when the site is right):

- L{literal_markdown}: no page shows Markdown as a literal block (a block
  highlighted as Markdown, a table rule C{|---|} or a C{## heading} inside a
  C{<pre>}), which is what an included C{.md} file looks like when it is
  not rendered.
- L{raw_epytext}: no narrative page (one that is not API reference)
  shows epytext markup such as C{C{name}} or C{L{name}}, in its prose or
  in its code: the docstrings of the code a page includes are read there
  as written, not rendered.
- L{clipped_code}: in headless Chromium at 1280 px, no code block is wider
  than its box (its text would be cut off or hidden behind a scroll bar).

- L{broken_signatures}: no page shows a zope interface's repr
  (C{<InterfaceClass ...>}), and every signature of the reference reads as
  Python: brackets balanced, no C{~} (the mark of one Sphinx could not
  parse and showed raw, as C{-> IListeningPort>]} once was).

L{word_counts} gives the size of each page of the API reference, which the
run prints.  C{--screenshots DIR} also writes one PNG per page (the top 2400 px of it, at
the given width) for a person to look at.  Chromium is found on C{PATH}
(C{chromium}, C{chromium-browser}, C{google-chrome}); without it the
Chromium check and the screenshots are refused with a message saying so.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_PRE = re.compile(
    r'<div class="(highlight-[\w-]+)[^"]*">\s*<div class="highlight"><pre>(.*?)</pre>|<pre[^>]*>(.*?)</pre>', re.S
)
_MARKDOWN_LINE = re.compile(r"^(#{2,6} \S|\|?\s*:?-{3,}:?\s*\|)")
# Run in each page once it is laid out: name every code block wider than its box.
_PROBE = """<script>window.addEventListener("load", () => {
  const clipped = [...document.querySelectorAll("pre")].filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => e.scrollWidth + ">" + e.clientWidth + ": " + e.textContent.split("\\n")[0].slice(0, 60));
  const out = document.createElement("pre");
  out.id = "clipped-report";
  out.style.whiteSpace = "pre-wrap";
  out.textContent = "CLIPPED:" + JSON.stringify(clipped);
  document.body.appendChild(out);
});</script>"""


def pages(built: Path) -> list[Path]:
    """The site's content pages (not the search and index pages Sphinx adds)."""
    skip = {"genindex.html", "search.html", "py-modindex.html"}
    return sorted(p for p in built.rglob("*.html") if p.name not in skip and "_static" not in p.parts)


def literal_markdown(built: Path) -> list[str]:
    """Each page that holds Markdown in a literal block, with the first line that shows it."""
    problems = []
    for page in pages(built):
        for match in _PRE.finditer(page.read_text("utf-8")):
            language, body = match.group(1), match.group(2) or match.group(3) or ""
            text = html.unescape(re.sub(r"<[^>]+>", "", body))
            if language in ("highlight-markdown", "highlight-md"):
                problems.append(f"{page.relative_to(built)}: a block highlighted as Markdown")
                continue
            lines = [line for line in text.splitlines() if _MARKDOWN_LINE.match(line)]
            if lines:
                problems.append(f"{page.relative_to(built)}: {lines[0]!r}")
    return problems


# Epytext's inline markup: C{code}, L{link}, I{italic}, B{bold}, U{url}, M{math}, E{escape}.
_EPYTEXT = re.compile(r"\b[CLIBUME]\{[^{}\n]*\}")
# An autodoc entry: pages holding one are API reference, whose docstrings Sphinx converts.
_AUTODOC = '<dl class="py '


def raw_epytext(built: Path) -> list[str]:
    """Each narrative page (one with no autodoc entry) whose text shows epytext markup, with the first found."""
    problems = []
    for page in pages(built):
        source = page.read_text("utf-8")
        if _AUTODOC in source:
            continue
        body = source.split("<body", 1)[-1]
        text = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<script.*?</script>", "", body, flags=re.S)))
        found = _EPYTEXT.search(text)
        if found is not None:
            problems.append(f"{page.relative_to(built)}: {found.group(0)!r}")
    return problems


_SIGNATURE = re.compile(r'<dt class="sig[^"]*"[^>]*>(.*?)</dt>', re.S)
_ID = re.compile(r'\bid="([^"]+)"')
_CLOSING = {")": "(", "]": "[", "}": "{"}


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _balanced(text: str) -> bool:
    opened: list[str] = []
    for char in text:
        if char in "([{":
            opened.append(char)
        elif char in _CLOSING and (not opened or opened.pop() != _CLOSING[char]):
            return False
    return not opened


def broken_signatures(built: Path) -> list[str]:
    """Each page showing an interface's repr, and each signature that is unbalanced or was not parsed, by page."""
    problems = []
    for page in pages(built):
        markup = page.read_text("utf-8")
        name = page.relative_to(built)
        if "InterfaceClass" in _text(markup):
            problems.append(f"{name}: an <InterfaceClass ...> repr")
        for match in _SIGNATURE.finditer(markup):
            signature = _text(match.group(1)).strip().rstrip("\u00b6")
            if not _balanced(signature) or "~" in signature:
                problems.append(f"{name}: {signature[:160]}")
    return problems


def anchors(built: Path) -> set[str]:
    """Every C{id} of every page: what a link's C{#fragment} may name."""
    return {anchor for page in pages(built) for anchor in _ID.findall(page.read_text("utf-8"))}


def word_counts(built: Path, folder: str = "api") -> dict[str, int]:
    """The words a reader sees in the body of each page under C{folder} (the API reference), by page."""
    counts = {}
    for page in pages(built / folder):
        markup = page.read_text("utf-8")
        body = markup[markup.find('<div class="body"') : markup.find('<div class="sphinxsidebar"')]
        counts[str(page.relative_to(built))] = len(_text(body).split())
    return counts


def find_browser() -> str | None:
    """The first headless-capable Chromium on C{PATH}, or C{None}."""
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def _chromium(browser: str, width: int, height: int, *args: str) -> subprocess.CompletedProcess[str]:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    command += [f"--window-size={width},{height}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def clipped_code(browser: str, built: Path, width: int = 1280) -> list[str]:
    """Each code block that is wider than its box in a C{width}-pixel window, by page."""
    problems = []
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "html"
        shutil.copytree(built, copy)
        for page in pages(copy):
            page.write_text(page.read_text("utf-8").replace("</body>", _PROBE + "</body>"), "utf-8")
            result = _chromium(browser, width, 900, "--virtual-time-budget=5000", "--dump-dom", page.as_uri())
            found = re.search(r"CLIPPED:(\[.*?\])</pre>", result.stdout, re.S)
            name = page.relative_to(copy)
            if found is None:
                problems.append(f"{name}: the page did not load in Chromium ({result.stderr.strip()[-200:]})")
            elif found.group(1) != "[]":
                problems.append(f"{name}: {html.unescape(found.group(1))}")
    return problems


def screenshots(browser: str, built: Path, out: Path, width: int = 1280) -> list[Path]:
    """Write a PNG of the top of every page, C{width} pixels wide, into C{out}; return their paths."""
    built, out = built.resolve(), out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages(built):
        png = out / (str(page.relative_to(built).with_suffix("")).replace("/", "-") + ".png")
        _chromium(browser, width, 2400, f"--screenshot={png}", page.as_uri())
        if png.is_file():
            written.append(png)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("built", type=Path, help="the built HTML directory (docs/_build/html)")
    parser.add_argument("--screenshots", type=Path, help="write a PNG of each page here")
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args(argv)
    args.built = args.built.resolve()  # Chromium is given file: URIs
    problems = literal_markdown(args.built) + raw_epytext(args.built) + broken_signatures(args.built)
    counts = word_counts(args.built)
    print("API reference pages, words:", ", ".join(f"{page} {words}" for page, words in sorted(counts.items())))
    browser = find_browser()
    if browser is None:
        print("no Chromium on PATH (apt-get install chromium): code blocks not checked, no screenshots taken")
    else:
        problems += clipped_code(browser, args.built, args.width)
        if args.screenshots:
            written = screenshots(browser, args.built, args.screenshots, args.width)
            print(f"{len(written)} screenshots at {args.width} px in {args.screenshots}")
    for problem in problems:
        print("PROBLEM", problem)
    print(f"checked {len(pages(args.built))} pages: {len(problems) or 'no'} problems")
    return 1 if problems or (args.screenshots and browser is None) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
