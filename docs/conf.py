"""Sphinx configuration for the chunkwire documentation.

Build with ``python -m sphinx -W -b html docs <outdir>`` from the repository
root.  The docstrings use epydoc markup (``@param``, ``@ivar``, ``C{...}``,
``L{...}``), as Twisted's do; ``epydoc_to_rest`` below rewrites it to reST
fields and roles before autodoc renders it, so no extension beyond
``sphinx.ext.autodoc`` is needed.  The two Markdown pages
(``reliability.md``, ``wire-format.md``) are rendered by MyST
(``myst_parser``, in the ``docs`` extra) as pages of their own, tables and
all.  autodoc skips zope.interface
interfaces (they are not classes), so the ``zope-interface`` directive below
documents them.

The API reference's page bodies are written from the packages' ``__all__``
and modules by ``apipages.py`` (next to this file) before the build reads
them; the hooks below keep its signatures parseable (no ``<InterfaceClass
...>`` repr) and send a link to a public name's defining path to its entry.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.domains.python import PythonDomain
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import apipages  # noqa: E402  (docs/apipages.py, found through the line above)

project = "chunkwire"
author = "the chunkwire developers"
copyright = "the chunkwire developers"
release = "0.1.0.dev0"

extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# Headings get anchors so that the pages' own "#section" links resolve.
myst_heading_anchors = 3
exclude_patterns = ["_build", "_generated", "snippets", "bench-reference"]
root_doc = "index"
html_theme = "alabaster"
# alabaster's default body is 800 px wide inside a 940 px page, which clips
# 120-column code and the reliability tables; use the window instead.
html_theme_options = {"page_width": "96%", "body_max_width": "none", "sidebar_width": "230px"}
html_static_path = ["_static"]
html_css_files = ["chunkwire.css"]

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}

# Epydoc fields: "@param x:" -> ":param x:", "@raise E:" -> ":raises E:".
_FIELD = re.compile(r"^(\s*)@(\w+)((?:\s+[^:\s]+)?)\s*:", re.MULTILINE)
_FIELD_NAMES = {"raise": "raises", "return": "returns", "type": "type", "kwarg": "keyword"}
# Epydoc inline markup: C{code}, L{link}, I{italic}, B{bold}, U{url}.
_INLINE = re.compile(r"([CLIBU])\{([^{}]*)\}")
_INLINE_FORMS = {"C": "``{}``", "L": ":py:obj:`{}`", "I": "*{}*", "B": "**{}**", "U": "{}"}


def _inline(match: re.Match[str]) -> str:
    text = match.group(2)
    if match.group(1) == "L":
        text = text.strip("()")
    rendered = _INLINE_FORMS[match.group(1)].format(text)
    # reST inline markup must not touch a letter or digit: escape the join.
    source, start, end = match.string, match.start(), match.end()
    if start and source[start - 1].isalnum():
        rendered = "\\ " + rendered
    if end < len(source) and source[end].isalnum():
        rendered += "\\ "
    return rendered


def epydoc_to_rest(text: str) -> str:
    """Rewrite epydoc fields and inline markup in C{text} as reST."""
    text = _FIELD.sub(lambda m: f"{m.group(1)}:{_FIELD_NAMES.get(m.group(2), m.group(2))}{m.group(3)}:", text)
    return _INLINE.sub(_inline, text)


class ZopeInterfaceDirective(SphinxDirective):
    """``.. zope-interface:: module.IName``: document an interface and its methods and attributes."""

    required_arguments = 1

    def run(self):  # type: ignore[no-untyped-def]
        module_name, _, name = self.arguments[0].rpartition(".")
        interface = getattr(importlib.import_module(module_name), name)
        lines = [f".. py:class:: {name}", f"   :module: {module_name}", ""]
        lines += _indented(interface.__doc__, "   ")
        for member, description in interface.namesAndDescriptions():
            if hasattr(description, "getSignatureString"):
                lines += [f"   .. py:method:: {member}{description.getSignatureString()}", ""]
            else:
                lines += [f"   .. py:attribute:: {member}", ""]
            lines += _indented(description.__doc__, "      ")
        return self.parse_text_to_nodes("\n".join(lines))


def _indented(doc: str | None, prefix: str) -> list[str]:
    text = epydoc_to_rest(inspect.cleandoc(doc or ""))
    return [prefix + line if line else "" for line in text.splitlines()] + [""]


def _process_docstring(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    lines[:] = epydoc_to_rest("\n".join(lines)).split("\n")


def _process_signature(app, what, name, obj, options, signature, returns):  # type: ignore[no-untyped-def]
    """Signatures Sphinx can parse: no C{<...>} reprs in type hints or defaults (L{apipages.parseable_signature})."""
    return (signature and apipages.parseable_signature(signature), returns and apipages.parseable_signature(returns))


def _readable_values(app, doctree):  # type: ignore[no-untyped-def]
    """The same for a value autodoc shows (C{= (<InterfaceClass a.IName>,)}), which no event passes through."""
    for signature in doctree.findall(addnodes.desc_signature):
        for text in list(signature.findall(nodes.Text)):
            if "<InterfaceClass " in text:
                text.parent.replace(text, nodes.Text(apipages.readable(str(text))))


def _public_reference(app, env, node, contnode):  # type: ignore[no-untyped-def]
    """
    Resolve a link Sphinx could not: a public name's defining path
    (C{L{protocols.rpc._endpoints.serve}}, or C{L{serve}} inside that module)
    to its entry under its public path, where the reference documents it;
    else a bare name (C{L{SendingState}} in a docstring shown on a public
    page, away from its module) to the one documented object so named, if
    only one is.
    """
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    target, module = node["reftarget"], node.get("py:module")
    for candidate in (target, f"{module}.{target}" if module else None):
        public = candidate and apipages.public_path(candidate, _PUBLIC_PATHS)
        if public:
            return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], public, node, contnode)
    found = domain.find_obj(env, module, node.get("py:class"), target, None, 1)
    found = [(name, entry) for name, entry in found if not entry.aliased]
    if len(found) != 1:
        return None
    name, entry = found[0]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


_PUBLIC_PATHS = apipages.public_paths()


class _IndexedPythonDomain(PythonDomain):
    """
    Sphinx's Python domain, with the lookups of names it holds no object
    for answered at once.  A C{searchmode=1} lookup (each type in a
    signature, and L{_public_reference}'s) ends, for a name not found
    exactly, in a "fuzzy" scan of every object's full name for one ending in
    C{.NAME}; some 19,000 of them (C{int}, C{Deferred}, ...) scanned the
    ~3,600 documented objects' entries each, a fifth of the build's time.
    Every match any branch of that lookup can return ends in NAME's last
    dotted part, so a name whose last part is no object's gets the same
    empty answer from a set of the objects' last parts (kept per count of
    objects: the set only grows as pages are read); any other name goes to
    Sphinx's own lookup, unchanged.
    """

    _lastParts: tuple[int, frozenset[str]] = (-1, frozenset())

    def find_obj(self, env, modname, classname, name, type, searchmode=0):  # type: ignore[no-untyped-def]
        if searchmode == 1 and name:
            count, parts = self._lastParts
            if count != len(self.objects):
                parts = frozenset(full.rpartition(".")[2] for full in self.objects)
                self._lastParts = (len(self.objects), parts)
            if name.removesuffix("()").rpartition(".")[2] not in parts:
                return []
        return super().find_obj(env, modname, classname, name, type, searchmode)


def _generate_includes() -> None:
    """
    Write the page body that depends on files other commands produce, so the
    site builds whether or not they exist yet: C{_generated/benchmarks.rst}
    (drawn by C{make_plots.py}; a note until then).
    """
    docs = Path(__file__).resolve().parent
    generated = docs / "_generated"
    generated.mkdir(exist_ok=True)
    bench = generated / "benchmarks.rst"
    if not bench.exists():
        bench.write_text(
            "The figures have not been drawn: run ``python3 dev.py bench`` and then ``python3 dev.py docs``\n"
            "(or ``python docs/make_plots.py`` before building).\n",
            "utf-8",
        )


_generate_includes()
apipages.write_pages(Path(__file__).resolve().parent / "_generated" / "api", epydoc_to_rest)


def setup(app):  # type: ignore[no-untyped-def]
    app.add_domain(_IndexedPythonDomain, override=True)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("autodoc-process-signature", _process_signature)
    app.connect("doctree-read", _readable_values)
    app.connect("missing-reference", _public_reference)
    app.add_directive("zope-interface", ZopeInterfaceDirective)
