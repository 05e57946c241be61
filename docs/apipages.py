"""The API reference's pages, written from the packages' own C{__all__} and modules.

The reference has two pages per public package (L{PACKAGES}), each a short
hand-written file in C{docs/api/} that includes what this module writes into
C{docs/_generated/api/}:

- C{docs/api/NAME.rst}, the public names: the package's docstring, a summary
  table, then every name of its C{__all__} documented under the path people
  import it by (C{protocols.rpc.serve}, not C{protocols.rpc._endpoints.serve}),
  grouped as functions, classes, interfaces, errors, and constants and types.
- C{docs/api/NAME-modules.rst}, the rest, by module: every module of the
  package (and of its subpackages that have no page of their own) with what
  it defines that is not a public name.  A public name is documented once,
  on its package's page; its defining module only links to it.
- A modules page that would pass 20,000 words hands some of its modules to
  a page of their own (L{MODULE_PAGES}: the modules of C{protocols} that
  import no Twisted have C{docs/api/protocols-without-twisted-modules.rst}).

Both lists are read from the packages when the site is built, so a name added
to an C{__all__}, or a new module, is in the reference without an edit here.
C{docs/conf.py} calls L{write_pages}; L{public_path} makes a link to a
defining path (C{L{protocols.rpc._endpoints.serve}}) land on the public entry.

Sphinx is imported only by what runs while the site is built, so the docs
tests use L{page_modules} and L{parseable_signature} without it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from zope.interface.interface import InterfaceClass

# Each public package, in the order of the reference's index, and the name of
# its pages in docs/api/ (NAME.rst, NAME-modules.rst).
PACKAGES: dict[str, str] = {
    "framing": "framing",
    "framing.bulk": "framing-bulk",
    "framing.rpc": "framing-rpc",
    "protocols": "protocols",
    "protocols.rpc": "rpc",
    "protocols.bulk": "bulk",
    "protocols.auth": "auth",
    "protocols.serving": "serving",
    "protocols.kv": "kv",
}

# Modules a package's modules page hands to a page of their own, when one
# page would pass 20,000 words: the page's name in docs/api/ (NAME.rst), the
# package, and the modules it takes.
MODULE_PAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "protocols-without-twisted-modules": (
        "protocols",
        (
            "protocols.asynciobulk",
            "protocols.asyncioclient",
            "protocols.blocking",
            "protocols.blockingbulk",
            "protocols._bulkfiles",
            "protocols._clientcontext",
            "protocols.options",
            "protocols._places",
            "protocols._sidecars",
        ),
    ),
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
    """Each exported object's C{id}, mapped to the packages that export it, in the order of L{PACKAGES}."""
    found: dict[int, list[str]] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in public_names(package):
            exporting = found.setdefault(id(getattr(module, name)), [])
            if package not in exporting:
                exporting.append(package)
    return found


def home(obj: object) -> str | None:
    """
    The public package whose page documents C{obj} in full: of those that
    export it, the one its defining module is in (the deepest), else the
    first of L{PACKAGES}; C{None} if no package exports it.
    """
    exporting = _exporters().get(id(obj), [])
    if not exporting:
        return None
    defining = getattr(obj, "__module__", "") or ""
    inside = [p for p in exporting if defining == p or defining.startswith(p + ".")]
    return max(inside, key=len) if inside else exporting[0]


def page_of(module: str) -> str | None:
    """The public package whose modules page documents C{module} (the deepest that contains it)."""
    owners = [p for p in PACKAGES if module == p or module.startswith(p + ".")]
    return max(owners, key=len) if owners else None


def all_modules(package: str) -> list[str]:
    """C{package} and every module below it, sorted, without L{SKIPPED_MODULES}."""
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    return sorted(name for name in names if name not in SKIPPED_MODULES)


def page_modules(package: str) -> list[str]:
    """
    The modules C{package}'s modules page documents: its own below it, not
    those of a package with a page, nor those of a page of L{MODULE_PAGES}.
    """
    apart = {m for _, modules in MODULE_PAGES.values() for m in modules}
    return [m for m in all_modules(package) if m != package and page_of(m) == package and m not in apart]


def modules_page_of(module: str) -> str | None:
    """The name of the modules page that documents C{module} (C{protocols-modules}), or C{None}."""
    for name, (_, modules) in MODULE_PAGES.items():
        if module in modules:
            return name
    package = page_of(module)
    if package is None or module not in page_modules(package):
        return None
    return f"{PACKAGES[package]}-modules"


@functools.cache
def _public_objects() -> dict[int, str]:
    """Every class, function and interface some package exports, by C{id}, mapped to its full public path."""
    found: dict[int, str] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in public_names(package):
            obj = getattr(module, name)
            if _defines(obj) and home(obj) == package:
                found.setdefault(id(obj), f"{package}.{name}")
    return found


def public_paths() -> dict[str, str]:
    """Each public class, function and interface's defining path (C{a.b.c.Name}) mapped to its public path."""
    paths: dict[str, str] = {}
    for package in PACKAGES:
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


def _interfaces(module: ModuleType) -> Iterator[str]:
    """The zope interfaces C{module} defines, in source order (autodoc does not document them)."""
    for name, obj in vars(module).items():
        if isinstance(obj, InterfaceClass) and obj.__module__ == module.__name__ and not name.startswith("_"):
            yield name


def modules_page(package: str) -> str:
    """
    The body of C{package}'s modules page: one section per module of
    L{page_modules}, each without the public names (whatever the module's
    own C{__all__} re-exports), linking to those it defines.
    """
    return modules_body(page_modules(package))


def modules_body(module_names: list[str]) -> str:
    """The body of a modules page of C{module_names}, one section each (see L{modules_page})."""
    public = _public_objects()
    lines: list[str] = []
    for module_name in module_names:
        module = importlib.import_module(module_name)
        names = vars(module)
        defined = {name: _public_path_of(module_name, name, obj) for name, obj in names.items()}
        left_out = [name for name, path in defined.items() if path]
        lines += _heading(module_name, "-")
        # Members defined here only: a module's __all__ may re-export what another module documents.
        lines += [f".. automodule:: {module_name}", "   :ignore-module-all:"]
        if left_out:
            lines += [f"   :exclude-members: {', '.join(left_out)}"]
        lines.append("")
        if left_out:
            links = ", ".join(f":py:obj:`{defined[name]}`" for name in left_out)
            lines += [f"Defined here and documented under their public names: {links}.", ""]
        for name in _interfaces(module):
            if id(getattr(module, name)) not in public:
                lines += [f".. zope-interface:: {module_name}.{name}", ""]
    return "\n".join(lines) + "\n"


def _public_path_of(module_name: str, name: str, obj: object) -> str | None:
    """The public path of C{obj} (C{name} in C{module_name}) if that module defines it, else C{None}."""
    if _defines(obj):
        return _public_objects().get(id(obj)) if getattr(obj, "__module__", None) == module_name else None
    for package in PACKAGES:
        if _is_exported(package, name, obj) and (_data_source(package, name) or ("", []))[0] == module_name:
            return f"{package}.{name}"
    return None


def _is_exported(package: str, name: str, obj: object) -> bool:
    return name in public_names(package) and getattr(importlib.import_module(package), name) is obj


def moved_anchors() -> dict[str, list[str]]:
    """
    Where the anchors of the old one-page reference (C{api.html#a.b.Name})
    went: each old anchor's prefix (a module, C{module-} and a module, or a
    public name's defining path) mapped to its page and new prefix.  A
    module of L{REMOVED_MODULES} leads to the module that defines what it
    held, and each class or function it held to its entry.
    """
    moved = {}
    for package, page in PACKAGES.items():
        for module, where in [(package, f"api/{page}.html")] + [
            (m, f"api/{page}-modules.html") for m in page_modules(package)
        ]:
            moved[module] = [where, module]
            moved[f"module-{module}"] = [where, f"module-{module}"]
    for name, (_, modules) in MODULE_PAGES.items():
        for module in modules:
            moved[module] = [f"api/{name}.html", module]
            moved[f"module-{module}"] = [f"api/{name}.html", f"module-{module}"]
    for defining, public in public_paths().items():
        moved[defining] = [f"api/{PACKAGES[public.rpartition('.')[0]]}.html", public]
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
            return f"{page}#{new}{anchor[len(prefix) :]}"
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
      window.location.replace(page + "#" + now + anchor.slice(prefix.length));
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
    Write each package's two page bodies, and the old anchors' redirect,
    into C{out} (only files whose text changed); return their paths.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = []
    pages = [(out / "moved.rst", ".. raw:: html\n\n" + "\n".join(_indent(redirect_script().splitlines())) + "\n")]
    for package, page in PACKAGES.items():
        pages += [
            (out / f"{page}.rst", public_page(package, rewrite)),
            (out / f"{page}-modules.rst", modules_page(package)),
        ]
    pages += [(out / f"{name}.rst", modules_body(list(modules))) for name, (_, modules) in MODULE_PAGES.items()]
    for path, text in pages:
        if not path.exists() or path.read_text("utf-8") != text:
            path.write_text(text, "utf-8")
        written.append(path)
    return written
