"""The docs say what is on by default: the servers' guard, the clients' timeout, and what an ssl: client verifies."""

from __future__ import annotations

import dataclasses
import re

from twisted.trial.unittest import SynchronousTestCase

from protocols._guard import DEFAULT_GUARD
from protocols.options import DEFAULT_CONNECT_TIMEOUT, ClientOptions
from tests.processes import ROOT

DOCS = ROOT / "docs"


def section(page: str, title: str) -> str:
    """The text of the section C{title} of C{docs/PAGE} (up to the next title underlined with dashes)."""
    text = (DOCS / page).read_text("utf-8")
    start = text.index(f"\n{title}\n")
    following = re.search(r"\n[^\n]+\n-{3,}\n", text[start + len(title) + 2 :])
    return text[start : start + len(title) + 2 + following.start()] if following else text[start:]


def words(text: str) -> str:
    """C{text} with its line breaks and runs of spaces as single spaces, so that a phrase may be wrapped."""
    return " ".join(text.split())


class DefaultsDocumentedTests(SynchronousTestCase):
    """The tutorial and the TLS how-to state the defaults the code has."""

    def test_tutorialGuard(self) -> None:
        """The tutorial's own-server section says rpc.serve is guarded by default, and how to change or turn it off."""
        text = words(section("tutorial.rst", "Your own server, as a process"))
        self.assertIn("protocols.serving.DEFAULT_GUARD", text)
        self.assertIn(f"sends nothing within {DEFAULT_GUARD.preambleTimeout:g} s", text)
        self.assertIn(
            f"{DEFAULT_GUARD.maxConnections:,} connections, {DEFAULT_GUARD.maxPerPeer} from one address", text
        )
        self.assertIn("guard=None", text)
        self.assertIn("guard=GuardPolicy(", text)

    def test_tutorialTimeout(self) -> None:
        """
        The same section gives the clients' timeout, its error, the one
        options value all ways of connecting share and its fields, and the
        arguments that stay their own.
        """
        text = words(section("tutorial.rst", "Your own server, as a process"))
        self.assertIn(f"gives the server {DEFAULT_CONNECT_TIMEOUT:g} s", text)
        self.assertIn("protocols.rpc.ConnectTimeout", text)
        self.assertIn("protocols.options.ClientOptions` as ``options=``", text)
        fields = {field.name for field in dataclasses.fields(ClientOptions)}
        for name in ("credentials", "timeout", "limits", "registry", "callLimits", "interceptors", "metadata"):
            self.assertIn(name, fields)
            self.assertIn(f"``{name}``", text)
        for keyword in ("root", "interface"):
            self.assertIn(f"``{keyword}=``", text)

    def test_tlsVerifiesNothing(self) -> None:
        """The TLS how-to says before its first example that ssl: without caCertsDir= or hostname= verifies nothing."""
        text = (DOCS / "howto" / "tls.rst").read_text("utf-8")
        top = words(text[: text.index("literalinclude")])
        self.assertIn("With neither ``caCertsDir=`` nor ``hostname=`` it **verifies nothing**", top)
        self.assertIn("The example clients print a warning", top)
