"""The API reference's pages, written from the public packages' and modules' own C{__all__}.

The reference documents exported names only (issue 40): one page per public
package or public module (L{PUBLIC}), each a short hand-written file in
C{docs/api/} that includes what this module writes into
C{docs/_generated/api/}: C{docs/api/NAME.rst}, the public names, the
package's docstring, a summary table, then every name of its C{__all__}
documented under the path people import it by (C{protocols.rpc.serve}, not
C{protocols.rpc._endpoints.serve}), grouped as functions, classes,
interfaces, errors, and constants and types.  A name two of them export is
documented in full once (L{home}); the other links to it.  The private
modules (C{_name.py}) have no page: their source is the reference for what
they hold beyond the public names.

L{PUBLIC} is read by the tests against the tree (every public package and
module has its page, no other), and each page's names from the code when the
site is built, so a name added to an C{__all__} is in the reference without
an edit here.  C{docs/conf.py} calls L{write_pages}; L{public_path} makes a
link to a defining path (C{L{protocols.rpc._endpoints.serve}}) land on the
public entry; L{moved_anchors} sends a link to the old one-page reference
(C{api.html#...}, named by the paths modules had before) to where that name
is now.

Sphinx is imported only by what runs while the site is built, so the docs
tests use L{public_paths} and L{parseable_signature} without it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path

from zope.interface.interface import InterfaceClass

# Each public package and public module, in the order of the reference's
# index, and the name of its page in docs/api/ (NAME.rst).
PUBLIC: dict[str, str] = {
    "framing": "framing",
    "framing.wire": "framing-wire",
    "framing.slicing": "framing-slicing",
    "framing.rpc": "framing-rpc",
    "framing.login": "framing-login",
    "framing.bulk": "framing-bulk",
    "protocols": "protocols",
    "protocols.rpc": "rpc",
    "protocols.rpc.otel": "rpc-otel",
    "protocols.bulk": "bulk",
    "protocols.auth": "auth",
    "protocols.serving": "serving",
    "protocols.serving.metrics": "serving-metrics",
    "protocols.kv": "kv",
    "protocols.echo": "echo",
    "protocols.testing": "testing",
    "protocols.options": "options",
    "protocols.blocking": "blocking",
    "protocols.blockingbulk": "blockingbulk",
    "protocols.asyncioclient": "asyncioclient",
    "protocols.asynciobulk": "asynciobulk",
    "protocols.interop": "interop",
}

# Modules that are gone (CHANGELOG.md), each mapped to the module that defines
# what it held: an old anchor of one leads there, and of a class or function
# in it to that one's entry (those of REMOVED_NAMES are defined elsewhere).
REMOVED_MODULES: dict[str, str] = {
    "protocols.auth.errors": "framing.login._errors",
    "protocols.auth.scram": "framing.login._scram",
    "protocols.auth.wire": "framing.login._wire",
    "protocols.bulk.credit": "framing.bulk._credit",
    "protocols.bulk.errors": "framing.bulk._errors",
    "protocols.bulk.fileerrors": "framing.bulk._fileerrors",
    "protocols.bulk.hello": "framing.bulk._hello",
    "protocols.bulk.ranges": "framing.bulk._ranges",
    "protocols.bulk.wire": "framing.bulk._wire",
    "protocols.rpc.errors": "framing.rpc._errors",
    "protocols.rpc.hints": "framing.rpc._signatures",
    "protocols.rpc.limits": "framing.rpc._limits",
    "protocols.rpc.referenceable": "framing.rpc._referenceable",
    "protocols.rpc.wire": "framing.rpc._wire",
}
REMOVED_NAMES: dict[str, str] = {
    "protocols.auth.scram.IScramResponse": "protocols.auth._users.IScramResponse",
    **{
        f"protocols.rpc.referenceable.{name}": f"framing.rpc._signatures.{name}"
        for name in ("RemoteMethod", "remote", "remoteMethod")
    },
}

# Private modules that were private before issue 40 too (old_name leaves them).
PRIVATE_BEFORE = {"framing._core"}

# Modules walk_packages finds that the reference leaves out, and why.
SKIPPED_MODULES = {"framing._speedups": "the compiled core: framing._core, which chooses it, documents it"}

# How zope.interface shows an interface; Sphinx uses that text for a type hint
# or a value, and its "<" and ">" break the signature parser.
_INTERFACE_REPR = re.compile(r"<InterfaceClass ([\w.]+)>")
# Any other repr in angle brackets: <function f>, <class 'a.B'>, <factory>, ...
_REPR = re.compile(r"<(?:(?:built-in )?function ([\w.]+)|class '([\w.]+)'|module '([\w.]+)'[^<>]*|[^<>]*)>")
_MISSING = object()

# The sections of a public page, in order.
GROUPS = ("Functions", "Classes", "Interfaces", "Errors", "Constants and types")


def readable(text: str) -> str:
    """C{text} with each zope interface's repr (C{<InterfaceClass a.b.IName>}) written as its dotted name."""
    return _INTERFACE_REPR.sub(r"\1", text)


def parseable_signature(text: str) -> str:
    """
    C{text}, a signature or a return annotation as autodoc writes it, with
    every repr in angle brackets replaced by Python Sphinx can parse: a zope
    interface by its dotted name (C{~} shows it short), a function, class or
    module by its name, anything else (C{<factory>}, an instance) by C{...}.
    Sphinx shows a signature it cannot parse as raw text, so that one
    C{<InterfaceClass a.IName>} in a hint gave C{-> IListeningPort>]}.
    """
    text = _INTERFACE_REPR.sub(r"~\1", text)
    return _REPR.sub(lambda m: next((name for name in m.groups() if name), "..."), text)


def public_names(package: str) -> list[str]:
    """The names of C{package}'s C{__all__}, in their order there."""
    return list(importlib.import_module(package).__all__)


def kind(obj: object) -> str:
    """Which of L{GROUPS} C{obj} is listed under."""
    if isinstance(obj, InterfaceClass):
        return "Interfaces"
    if inspect.isclass(obj):
        return "Errors" if issubclass(obj, BaseException) else "Classes"
    if inspect.isroutine(obj):
        return "Functions"
    return "Constants and types"


def _defines(obj: object) -> bool:
    """Whether C{obj} is a class, function or interface: something with a defining module and name of its own."""
    return kind(obj) in ("Functions", "Classes", "Interfaces", "Errors")


@functools.cache
def _exporters() -> dict[int, list[str]]:
    """Each exported object's C{id}, mapped to the public packages and modules that export it, in L{PUBLIC}'s order."""
    found: dict[int, list[str]] = {}
    for package in PUBLIC:
        module = importlib.import_module(package)
        for name in public_names(package):
            exporting = found.setdefault(id(getattr(module, name)), [])
            if package not in exporting:
                exporting.append(package)
    return found


def home(obj: object) -> str | None:
    """
    The public package or module whose page documents C{obj} in full: of
    those that export it, the one its defining module is in (the deepest),
    else the first of L{PUBLIC}; C{None} if none exports it.
    """
    exporting = _exporters().get(id(obj), [])
    if not exporting:
        return None
    defining = getattr(obj, "__module__", "") or ""
    inside = [p for p in exporting if defining == p or defining.startswith(p + ".")]
    return max(inside, key=len) if inside else exporting[0]


def page_of(module: str) -> str | None:
    """The public package or module whose page C{module} belongs to (the deepest that contains it)."""
    owners = [p for p in PUBLIC if module == p or module.startswith(p + ".")]
    return max(owners, key=len) if owners else None


def all_modules(package: str) -> list[str]:
    """C{package} and every module below it (just C{package} if it is a module), sorted, without L{SKIPPED_MODULES}."""
    root = importlib.import_module(package)
    below = pkgutil.walk_packages(root.__path__, package + ".") if hasattr(root, "__path__") else []
    names = [package] + [m.name for m in below]
    return sorted(name for name in names if name not in SKIPPED_MODULES)


@functools.cache
def private_modules() -> tuple[str, ...]:
    """Every module of C{framing} and C{protocols} that is not in L{PUBLIC} (but L{SKIPPED_MODULES}): no page has it."""
    return tuple(m for root in ("framing", "protocols") for m in all_modules(root) if m not in PUBLIC)


def old_name(module: str) -> str:
    """C{module}'s path before issue 40 made it private: the same without the underscore of its last part."""
    parent, _, leaf = module.rpartition(".")
    return module if module in PRIVATE_BEFORE else f"{parent}.{leaf.removeprefix('_')}"


def _old_path(defining: str) -> str:
    """C{defining} (C{a._b.Name}) under its module's old name (C{a.b.Name})."""
    parts = defining.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in private_modules():
            return ".".join([old_name(module), *parts[end:]])
    return defining


@functools.cache
def _public_objects() -> dict[int, str]:
    """Every class, function and interface some package exports, by C{id}, mapped to its full public path."""
    found: dict[int, str] = {}
    for package in PUBLIC:
        module = importlib.import_module(package)
        for name in public_names(package):
            obj = getattr(module, name)
            if _defines(obj) and home(obj) == package:
                found.setdefault(id(obj), f"{package}.{name}")
    return found


def public_paths() -> dict[str, str]:
    """Each public class, function and interface's defining path (C{a.b.c.Name}) mapped to its public path."""
    paths: dict[str, str] = {}
    for package in PUBLIC:
        module = importlib.import_module(package)
        for name in public_names(package):
            obj = getattr(module, name)
            if _defines(obj) and home(obj) == package:
                defining = f"{obj.__module__}.{getattr(obj, '__qualname__', obj.__name__)}"
                if defining != f"{package}.{name}":
                    paths.setdefault(defining, _public_objects()[id(obj)])
    return paths


def public_path(target: str, paths: dict[str, str]) -> str | None:
    """
    C{target} (a defining path, perhaps of a member: C{a.b.Class.method})
    rewritten under the public path of its longest prefix in C{paths}, or
    C{None} if no prefix is a public object's defining path.
    """
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        public = paths.get(".".join(parts[:end]))
        if public is not None:
            return ".".join([public, *parts[end:]])
    return None


def _doc_lines(text: str | None) -> list[str]:
    return inspect.cleandoc(text or "").splitlines()


def _summary(lines: list[str], rewrite: Callable[[str], str]) -> str:
    """The first paragraph of a docstring, on one line, as reST (a C{::} that opens an example made C{:})."""
    first: list[str] = []
    for line in lines:
        if not line.strip():
            if first:
                break
            continue
        if line.lstrip().startswith("@"):
            break
        first.append(line.strip())
    text = " ".join(first)
    return rewrite(text[:-1] if text.endswith("::") else text) or "(no docstring)"


def attribute_doc(package: str, name: str) -> list[str]:
    """The doc comment or string of C{package.name}, a constant or type alias (see L{_data_source})."""
    found = _data_source(package, name)
    return found[1] if found else []


@functools.cache
def _data_source(package: str, name: str) -> tuple[str, list[str]] | None:
    """
    Where C{package.name}, a constant or type alias, is documented, and its
    doc: the package itself if it has a doc comment or string there, else the
    first module of the package that has one for the same object under the
    same name (the module that defines it); C{None} if none has.
    """
    from sphinx.pycode import ModuleAnalyzer  # only while the site is built

    obj = getattr(importlib.import_module(package), name)
    for module_name in [package, *all_modules(package)]:
        module = importlib.import_module(module_name)
        if getattr(module, name, _MISSING) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except Exception:  # a compiled module has no source to read
            continue
        if ("", name) in docs:
            return module_name, list(docs["", name])
    return None


def _indent(lines: list[str], prefix: str = "   ") -> list[str]:
    return [prefix + line if line else "" for line in lines]


def _heading(text: str, underline: str) -> list[str]:
    return [text, underline * len(text), ""]


def _entry(package: str, name: str, obj: object, rewrite: Callable[[str], str]) -> list[str]:
    """The directive documenting C{package.name}, or an entry naming its public path if that is another."""
    path = f"{package}.{name}"
    same = _public_objects()[id(obj)] if _defines(obj) else path
    if same != path:
        directive = {"Classes": "class", "Errors": "exception", "Interfaces": "class"}.get(kind(obj), "function")
        return [f".. py:{directive}:: {name}", f"   :module: {package}", "", f"   The same as :py:obj:`{same}`.", ""]
    from sphinx.util.inspect import object_description  # only while the site is built

    group = kind(obj)
    if group == "Interfaces":
        return [f".. zope-interface:: {path}", ""]
    if group == "Constants and types":
        lines = [f".. py:data:: {name}", f"   :module: {package}"]
        value = readable(object_description(obj))
        if len(value) <= 200 and "\n" not in value:
            lines.append(f"   :value: {value}")
        return lines + ["", *_indent(rewrite("\n".join(attribute_doc(package, name))).splitlines()), ""]
    directive = {"Functions": "autofunction", "Classes": "autoclass", "Errors": "autoexception"}[group]
    return [f".. {directive}:: {path}", ""]


def public_page(package: str, rewrite: Callable[[str], str]) -> str:
    """
    The body of C{package}'s public page: its docstring, a summary table of
    its C{__all__}, then each name, by group.  C{rewrite} turns epydoc markup
    into reST (C{conf.epydoc_to_rest}).
    """
    module = importlib.import_module(package)
    names = public_names(package)
    lines = [f".. automodule:: {package}", "   :no-members:", ""]
    lines += _heading("Summary", "-")
    lines += [".. list-table::", "   :widths: 25 75", ""]
    for name in names:
        obj = getattr(module, name)
        doc = attribute_doc(package, name) if kind(obj) == "Constants and types" else _doc_lines(obj.__doc__)
        same = _public_objects()[id(obj)] if _defines(obj) else f"{package}.{name}"
        summary = f"The same as :py:obj:`{same}`." if same != f"{package}.{name}" else _summary(doc, rewrite)
        lines += [f"   * - :py:obj:`{name} <{package}.{name}>`", f"     - {summary}"]
    lines.append("")
    for group in GROUPS:
        members = [name for name in names if kind(getattr(module, name)) == group]
        if members:
            lines += _heading(group, "-")
            for name in members:
                lines += _entry(package, name, getattr(module, name), rewrite)
    return "\n".join(lines) + "\n"


def moved_anchors() -> dict[str, list[str]]:
    """
    Where the anchors of the old one-page reference (C{api.html#a.b.Name})
    went: each old anchor's prefix (a module, C{module-} and a module, or a
    public name's defining path) mapped to its page and new anchor.  A
    public package or module leads to its page; a private module (by its
    name now or before issue 40 made it private) to its package's page, and
    each public name it defines to that name's entry; a module of
    L{REMOVED_MODULES} leads where the module that defines what it held does.
    A new anchor that is a module's (C{module-...}) takes no suffix: a name
    of a private module that is not public leads to the top of the page.
    """
    moved = {}
    for name, page in PUBLIC.items():
        moved[name] = [f"api/{page}.html", name]
        moved[f"module-{name}"] = [f"api/{page}.html", f"module-{name}"]
    for module in private_modules():
        owner = page_of(module) or module.partition(".")[0]
        where = [f"api/{PUBLIC[owner]}.html", f"module-{owner}"]
        for name in {module, old_name(module)}:
            moved[name] = moved[f"module-{name}"] = where
    for defining, public in public_paths().items():
        moved[defining] = moved[_old_path(defining)] = [f"api/{PUBLIC[public.rpartition('.')[0]]}.html", public]
    for old, home in REMOVED_MODULES.items():
        moved[old] = moved[home]
        moved[f"module-{old}"] = moved[f"module-{home}"]
        moved.update({f"{old}.{name}": _moved_to(f"{home}.{name}", moved) for name in _defined_names(home)})
    moved.update({old: _moved_to(now, moved) for old, now in REMOVED_NAMES.items()})
    return moved


def _moved_to(anchor: str, moved: dict[str, list[str]]) -> list[str]:
    """The page and anchor C{anchor} leads to (see L{moved_anchor}), as a pair."""
    page, _, now = (moved_anchor(anchor, moved) or "").partition("#")
    return [page, now]


def _defined_names(module_name: str) -> list[str]:
    """The public classes, functions and interfaces C{module_name} defines, by the names they were defined with."""
    defined = []
    for name, obj in vars(importlib.import_module(module_name)).items():
        if _defines(obj) and getattr(obj, "__module__", None) == module_name and getattr(obj, "__name__", None) == name:
            defined += [] if name.startswith("_") else [name]
    return defined


def moved_anchor(anchor: str, moved: dict[str, list[str]]) -> str | None:
    """The page and anchor (C{api/rpc.html#protocols.rpc.serve}) where C{anchor} of the old page went, if known."""
    parts = anchor.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in moved:
            page, new = moved[prefix]
            return f"{page}#{new}" if new.startswith("module-") else f"{page}#{new}{anchor[len(prefix) :]}"
    return None


# The same as moved_anchor, run when api.html is opened with an anchor of the old page.
_REDIRECT = """<script>
(() => {
  const moved = MOVED;
  const anchor = decodeURIComponent(window.location.hash.slice(1));
  const parts = anchor.split(".");
  for (let end = parts.length; end > 0; end--) {
    const prefix = parts.slice(0, end).join(".");
    if (Object.hasOwn(moved, prefix)) {
      const [page, now] = moved[prefix];
      window.location.replace(page + "#" + now + (now.startsWith("module-") ? "" : anchor.slice(prefix.length)));
      return;
    }
  }
})();
</script>"""


def redirect_script() -> str:
    """The script C{api.html} runs to send a link to an anchor of the old one-page reference to where it went."""
    return _REDIRECT.replace("MOVED", json.dumps(moved_anchors(), sort_keys=True, indent=0))


def write_pages(out: Path, rewrite: Callable[[str], str]) -> list[Path]:
    """
    Write each public package's or module's page body, and the old anchors' redirect,
    into C{out} (only files whose text changed); return their paths.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = []
    pages = [(out / "moved.rst", ".. raw:: html\n\n" + "\n".join(_indent(redirect_script().splitlines())) + "\n")]
    pages += [(out / f"{page}.rst", public_page(package, rewrite)) for package, page in PUBLIC.items()]
    for path, text in pages:
        if not path.exists() or path.read_text("utf-8") != text:
            path.write_text(text, "utf-8")
        written.append(path)
    return written
