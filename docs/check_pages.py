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

C{--screenshots DIR} also writes one PNG per page (the top 2400 px of it, at
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
    problems = literal_markdown(args.built) + raw_epytext(args.built)
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
