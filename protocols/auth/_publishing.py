# -*- test-case-name: tests.protocols.auth.test_publishing -*-
"""A service's root served by an object URL that outlives restarts, as a command line sets it up.

Contract: L{URLPublishing} holds three files and where clients connect:
the name table's file (L{protocols.auth._names.NameTable}: digests and
labels only), the server's key (L{protocols.auth._identity.ServerIdentity},
made once, mode 0600) and the URL file, and the hints the URL names.
L{URLPublishing.publish} publishes an object under a label: the first
time, under a new name whose URL it writes to the URL file (mode 0600, the
only place the name is kept: hand it out from there); at every later start
under the same name again, so the URL in that file keeps working, and the
file is left alone.  L{URLPublishing.serverDescriptions} turns the plain
C{tcp:} and C{unix:} descriptions to listen on into TLS ones with that key,
the key the URL's hash names.  Nothing here logs or prints a name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framing.login._urls import InvalidURL, ObjectURL

from ._authority import writePrivately
from ._identity import ServerIdentity
from ._names import NameTable
from ._tlsendpoints import PREFIX, splitDescription

_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def hintsFor(descriptions: Sequence[str]) -> list[str]:
    """
    The URL hints where clients reach the plain server C{descriptions}:
    C{host:port} for a C{tcp:} or C{tcp6:} one bound to one address, and
    C{unix:/absolute/path} for a C{unix:} one.

    @raise ValueError: a description's hint cannot be known from it (port
        0, every address, another kind of endpoint): the caller must be told.
    """
    hints = []
    for description in descriptions:
        kind, positional, keywords = splitDescription(description)
        kind = kind.lower()
        if kind == "unix":
            path = positional[0] if positional else keywords.get("address", "")
            hints.append("unix:" + os.path.abspath(path))
            continue
        port = positional[0] if positional else keywords.get("port", "0")
        interface = keywords.get("interface", "")
        if kind not in ("tcp", "tcp6") or port == "0" or interface in _WILDCARDS:
            raise ValueError(f"where clients reach {description} is not in it (a port 0, every address, another kind)")
        hints.append(f"[{interface}]:{port}" if ":" in interface else f"{interface}:{port}")
    return hints


@dataclass(frozen=True)
class URLPublishing:
    """
    Where a service kept its object URL and how clients reach it.

    @ivar names: the name table's file.
    @ivar identity: the server's key file (made, mode 0600, if missing).
    @ivar urlFile: the file the URL is written to when it is made.
    @ivar hints: where clients connect, as the URL names it.
    """

    names: str
    identity: str
    urlFile: str
    hints: tuple[str, ...]

    def __post_init__(self) -> None:
        # Refused here rather than when the URL is made: a bad hint is a mistake on the command line.
        try:
            ObjectURL("a" * 52, self.hints, "a" * 52)
        except InvalidURL as error:
            raise ValueError(f"a hint is not HOST:PORT, [IPv6]:PORT or unix:/PATH ({error.reason})") from None

    def serverIdentity(self) -> ServerIdentity:
        """
        The server's key, made the first time.

        @raise protocols.auth._identity.InsecureKeyFile: the file is open to others.
        @raise ValueError: the file is not a key and its certificate.
        """
        return ServerIdentity.loadOrCreate(self.identity)

    def serverDescriptions(self, descriptions: Sequence[str]) -> list[str]:
        """
        The TLS server descriptions, with the server's key, where the plain
        C{descriptions} listen.

        @raise ValueError: a description is TLS already (its key would not be the URL's).
        """
        identity = self.serverIdentity()
        for description in descriptions:
            if splitDescription(description)[0].lower() in ("ssl", PREFIX):
                raise ValueError(
                    f"{description} is TLS already: give a plain tcp: or unix: endpoint, served with the key"
                )
        return [identity.serverDescription(description) for description in descriptions]

    def publish(self, obj: Any, label: str) -> tuple[NameTable, bool]:
        """
        Publish C{obj} as C{label} in the name table: under its kept name,
        or under a new one whose URL is written to L{urlFile}.

        @return: the table, and whether a new URL was written.
        @raise protocols.auth._names.NameFileError: the name table's file cannot be used.
        @raise OSError: a file cannot be written.
        """
        table = NameTable(self.names)
        name = table.publish(obj, label)
        if name is None:
            return table, False
        try:
            url = table.url(self.serverIdentity(), self.hints, name)
            writePrivately(Path(self.urlFile), f"{url}\n".encode("ascii"), replace=True)
        except BaseException:
            # A name whose URL went nowhere is a capability nobody holds: take it back.
            table.revoke(name)
            raise
        return table, True
