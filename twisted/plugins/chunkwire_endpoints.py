"""The C{chunkwire-tls:} server endpoint description: TLS over any endpoint, client certificates optional.

    chunkwire-tls:tcp:8443:interface=127.0.0.1:privateKey=server.pem
    chunkwire-tls:unix:/run/kv.sock:privateKey=server.pem:caCertsDir=ca/

This file lives in C{twisted/plugins/} so that C{serverFromString} (and so
C{twist ... --listen}) finds it; it only names the parser, the code is in
L{protocols.auth._tlsendpoints}, imported on first use so that listing
plugins stays cheap.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IStreamServerEndpointStringParser
from twisted.plugin import IPlugin
from zope.interface import implementer


@implementer(IPlugin, IStreamServerEndpointStringParser)
class _TLSServerParser:
    """Parses C{chunkwire-tls:KIND:...:privateKey=...[:certKey=...][:caCertsDir=...]}."""

    prefix = "chunkwire-tls"

    def parseStreamServer(self, reactor: Any, *args: str, **kwargs: str) -> Any:
        from protocols.auth._tlsendpoints import tlsServerFromArguments

        return tlsServerFromArguments(reactor, args, kwargs)


chunkwire_tls_server = _TLSServerParser()
