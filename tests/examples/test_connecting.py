"""examples/_connecting.py: the clients' --timeout, and the warning for an ssl: endpoint that verifies nothing."""

from __future__ import annotations

import argparse
import io
import sys
from types import ModuleType

from twisted.trial.unittest import SynchronousTestCase

from protocols.options import DEFAULT_CONNECT_TIMEOUT
from tests.processes import ROOT


def connecting() -> ModuleType:
    """Import examples/_connecting.py as the examples do (their directory on sys.path)."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import _connecting
    finally:
        sys.path.pop(0)
    return _connecting


class UnverifiedTests(SynchronousTestCase):
    """Only an ssl: client endpoint with neither caCertsDir= nor hostname= is warned about, in one line."""

    def test_warned(self) -> None:
        """ssl: without caCertsDir= or hostname= checks no certificate: one warning line naming the endpoint."""
        stream = io.StringIO()
        self.assertTrue(connecting().warnIfUnverified("ssl:host=example.com:port=8751", stream))
        [line] = stream.getvalue().splitlines()
        self.assertIn("ssl:host=example.com:port=8751 verifies nothing about the server", line)
        self.assertIn("caCertsDir=DIR:hostname=NAME", line)

    def test_notWarned(self) -> None:
        """caCertsDir= (that CA) or hostname= (the system's CAs) verifies the server; tcp: and unix: claim nothing."""
        module = connecting()
        for description in [
            "ssl:host=example.com:port=8751:caCertsDir=/tmp/ca:hostname=example.com",
            "ssl:host=example.com:port=8751:caCertsDir=/tmp/ca",
            "ssl:host=example.com:port=8751:hostname=example.com",
            "tcp:host=example.com:port=8751",
            "unix:path=/tmp/ssl\\:x.sock",
        ]:
            stream = io.StringIO()
            self.assertFalse(module.warnIfUnverified(description, stream), description)
            self.assertEqual(stream.getvalue(), "", description)

    def test_escapedColon(self) -> None:
        """A field's escaped colon does not split it: caCertsDir=C\\:/ca still counts as given."""
        self.assertFalse(connecting().unverified("ssl:host=h:port=1:caCertsDir=C\\:/ca"))
        self.assertTrue(connecting().unverified("ssl:host=h:port=1:certKey=C\\:/hostname=x"))


class TimeoutArgumentTests(SynchronousTestCase):
    """--timeout S: the library's default, 0 for no limit, a negative number refused."""

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser()
        connecting().addTimeoutArgument(parser)
        return parser

    def test_values(self) -> None:
        """No --timeout is the library's default; --timeout 2.5 is 2.5 s; --timeout 0 is None (wait for ever)."""
        parser = self.parser()
        self.assertEqual(parser.parse_args([]).timeout, DEFAULT_CONNECT_TIMEOUT)
        self.assertEqual(parser.parse_args(["--timeout", "2.5"]).timeout, 2.5)
        self.assertIsNone(parser.parse_args(["--timeout", "0"]).timeout)

    def test_negative(self) -> None:
        """A negative --timeout is a usage error."""
        parser = self.parser()
        parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))  # type: ignore[method-assign]
        self.assertRaises(ValueError, parser.parse_args, ["--timeout", "-1"])


class WithoutTLSTests(SynchronousTestCase):
    """withoutTLS: pyOpenSSL marked absent for a tcp: or unix: client endpoint only, and only if not loaded yet."""

    def setUp(self) -> None:
        # A copy of the module table, as the function sees it: the test process's own imports stay as they are.
        modules = {name: module for name, module in sys.modules.items() if name != "OpenSSL"}
        self.patch(sys, "modules", modules)
        self.modules = modules

    def test_plain(self) -> None:
        """tcp: and unix: endpoints mark pyOpenSSL absent (None, what an import then refuses)."""
        for description in ("tcp:host=127.0.0.1:port=8770", " unix:/tmp/s.sock", "TCP:host=h:port=1"):
            self.modules.pop("OpenSSL", None)
            self.assertTrue(connecting().withoutTLS(description), description)
            self.assertIsNone(self.modules["OpenSSL"], description)

    def test_tls(self) -> None:
        """ssl: and tls: endpoints (and any other kind) leave the table alone."""
        for description in ("ssl:host=127.0.0.1:port=8770", "tls:example.com:8770", "tcp6:host=::1:port=1"):
            self.assertFalse(connecting().withoutTLS(description), description)
            self.assertNotIn("OpenSSL", self.modules, description)

    def test_alreadyLoaded(self) -> None:
        """pyOpenSSL already loaded stays loaded: marking it absent then would break who holds it."""
        loaded = ModuleType("OpenSSL")
        self.modules["OpenSSL"] = loaded
        self.assertFalse(connecting().withoutTLS("tcp:host=127.0.0.1:port=8770"))
        self.assertIs(self.modules["OpenSSL"], loaded)
