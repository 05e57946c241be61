"""What the example clients share to connect: --timeout, and a warning for an ssl: endpoint that verifies nothing.

Contract: L{addTimeoutArgument} adds C{--timeout S}, the seconds a client
gives the server to accept, finish TLS, say its preamble and (with a login)
log it in (the C{timeout} keyword of C{rpc.connect} and the others); past
it the client stops with one line.  L{warnIfUnverified} prints one line on
stderr when C{--connect} is an C{ssl:} endpoint that checks nothing about
the server: Twisted verifies an C{ssl:} server's certificate only against
C{caCertsDir=} (that CA) or, with C{hostname=} alone, the system's CAs;
with neither, any certificate is accepted, so anyone on the path can pose
as the server.  The connection is still made: the user asked for it.
L{withoutTLS} keeps pyOpenSSL out of a client whose endpoint speaks no TLS;
L{plainTCP} reads the host and port of a plain C{tcp:} one, for a client
without Twisted.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TextIO

DEFAULT_CONNECT_TIMEOUT = 30.0
"""
L{protocols.options.DEFAULT_CONNECT_TIMEOUT}'s value, not imported from
there: that loads Twisted and the codec core, which C{--help} does not
need (tests/examples/test_connecting.py pins the two equal).
"""

# A Twisted endpoint description's fields are separated by colons not escaped with a backslash.
_FIELD_SEPARATOR = re.compile(r"(?<!\\):")

# Either field makes Twisted check the server's certificate (see the module docstring).
_VERIFYING = ("caCertsDir", "hostname")


def addTimeoutArgument(parser: argparse.ArgumentParser) -> None:
    """Add C{--timeout S} (0: wait for ever); its value is C{None} for 0, as the connecting functions take it."""

    def seconds(text: str) -> float | None:
        value = float(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text} is not a number of seconds (0: no limit)")
        return None if value == 0 else value

    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="S",
        help="seconds for the server to accept, finish TLS, answer and log in"
        f" before the client gives up (default {DEFAULT_CONNECT_TIMEOUT:g}; 0: wait for ever)",
    )


def unverified(description: str) -> bool:
    """Whether C{description} is an C{ssl:} client endpoint whose server's certificate nothing verifies."""
    fields = _FIELD_SEPARATOR.split(description.strip())
    if fields[0] != "ssl":
        return False
    keys = {field.split("=", 1)[0] for field in fields[1:] if "=" in field}
    return not any(key in keys for key in _VERIFYING)


def warnIfUnverified(description: str, stream: TextIO | None = None) -> bool:
    """
    Print one warning line on C{stream} (stderr) if C{description} verifies
    nothing (L{unverified}); whether it did.
    """
    if not unverified(description):
        return False
    print(
        f"warning: {description} verifies nothing about the server (no caCertsDir= and no hostname=):"
        " anyone on the path can pose as it; add caCertsDir=DIR:hostname=NAME",
        file=stream or sys.stderr,
        flush=True,
    )
    return True


PLAIN_ENDPOINTS = ("tcp", "unix")
"""The client endpoint types that never speak TLS (Twisted's C{ssl:} and C{tls:} do)."""


def withoutTLS(description: str) -> bool:
    """
    Keep pyOpenSSL (and the cryptography package under it) out of this
    process if the client endpoint C{description} speaks no TLS
    (L{PLAIN_ENDPOINTS}); whether it did.  Call it before Twisted's reactor
    is imported, which is what it changes.

    Twisted's reactor loads its TLS support as it starts whenever pyOpenSSL
    is installed: a quarter of what a bulk_client.py command imports (some
    80 modules), which a C{tcp:} or C{unix:} connection never uses.  With
    the package marked absent in C{sys.modules} (Python's way of saying
    "not installed" to an import), Twisted loads as it does without the
    C{tls} extra, as a plain TCP client needs; an C{ssl:} or C{tls:}
    endpoint, or pyOpenSSL already loaded, leaves everything as it is.
    """
    kind = _FIELD_SEPARATOR.split(description.strip(), 1)[0].lower()  # Twisted reads the type in any case
    if kind not in PLAIN_ENDPOINTS or "OpenSSL" in sys.modules:
        return False
    sys.modules["OpenSSL"] = None  # type: ignore[assignment]
    return True


def plainTCP(description: str) -> tuple[str, int] | None:
    """
    C{(host, port)} of C{description} if it is a C{tcp:} client endpoint
    with C{host=} and C{port=} and nothing else (what a socket connects to
    as Twisted would: a client without Twisted can take it); else C{None}
    (other fields, other types, or a description Twisted alone can judge).
    """
    fields = _FIELD_SEPARATOR.split(description.strip())
    if fields[0].lower() != "tcp" or len(fields) != 3:
        return None
    pairs = dict(field.split("=", 1) for field in fields[1:] if "=" in field)
    if set(pairs) != {"host", "port"} or not pairs["port"].isdigit() or not pairs["host"]:
        return None
    port = int(pairs["port"])
    return (pairs["host"].replace("\\:", ":"), port) if 0 < port < 65536 else None
