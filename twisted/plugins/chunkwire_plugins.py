"""twist plugins for chunkwire's services: C{chunkwire-echo}, C{chunkwire-kv} and C{chunkwire-bulk}.

    twist chunkwire-echo --listen tcp:8750
    twist chunkwire-kv --listen tcp:8760 --listen unix:/tmp/kv.sock
    twist chunkwire-bulk --listen tcp:8770 --dir /tmp/chunkwire-files
    twist chunkwire-kv --users /etc/chunkwire/users --listen ssl:8761:privateKey=server.pem
    twist chunkwire-kv --listen tcp:8760 --workers 2 --grace 10
    twist chunkwire-echo --help

chunkwire-kv and chunkwire-bulk take --users FILE, --client-ca DIR and
--tokens FILE: with any, only clients that log in are served (the echo
service stays open, a demo).  --workers N runs N worker processes on
sockets bound once (tcp:, tcp6:, unix:, optionally under haproxy:); on
SIGTERM each service drains: GOAWAY, then the calls in flight get --grace
seconds.

This file lives in C{twisted/plugins/} (a directory without C{__init__.py})
so that Twisted's plugin system finds it; it only names the services, the
code is in L{protocols}.  Keep it cheap to import: C{twist} imports every
plugin file to list them.
"""

# Twisted spells its option tables and plugin objects in mixedCase.
# ruff: noqa: N815, N816

from __future__ import annotations

from typing import Any

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from twisted.python import usage
from zope.interface import implementer


class _ArgumentTable:
    """
    Takes the C{add_argument} calls of L{protocols.guard.addGuardArguments}
    (written for argparse) as C{usage.Options} parameter rows, so that the
    plugins and the example servers offer the same guard options.
    """

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.dests: dict[str, str] = {}

    def add_argument(
        self, option: str, *, dest: str, type: Any, default: Any, help: str, metavar: str | None = None
    ) -> None:
        name = option.lstrip("-")
        self.rows.append([name, None, default, help[:1].upper() + help[1:] + ".", type])
        self.dests[name] = dest


class _GuardOptions(usage.Options):
    """The guard's timeouts and caps (see protocols.guard.GuardPolicy), as every chunkwire service takes them."""

    # Filled on first use: importing protocols.guard here would slow down every twist command's plugin scan.
    optParameters: list[list[Any]] = []
    # Each option's GuardPolicy field (its argparse dest): "preamble-timeout" -> "preambleTimeout".
    _dests: dict[str, str] = {}

    def __init__(self) -> None:
        if not _GuardOptions.optParameters:
            from protocols.guard import addGuardArguments

            table = _ArgumentTable()
            addGuardArguments(table)
            _GuardOptions.optParameters = table.rows
            _GuardOptions._dests = table.dests
        super().__init__()

    def policy(self) -> Any:
        """The L{protocols.guard.GuardPolicy} these options describe."""
        from types import SimpleNamespace

        from protocols.guard import policyFromArguments

        return policyFromArguments(SimpleNamespace(**{dest: self[name] for name, dest in self._dests.items()}))


class _Options(_GuardOptions):
    """Options every chunkwire service shares: where to listen, workers, drain, limits, tracing, the guard."""

    defaultListen = "tcp:8750"
    optFlags = [
        ["trace", None, "Log every token sent and received, in readable form (slow; for debugging)."],
        ["reuse-port", None, "With --workers: one SO_REUSEPORT socket per worker (the kernel spreads connections)."],
    ]
    optParameters = [
        ["max-bytes", None, None, "Largest byte string accepted, in bytes (default 256 MiB).", int],
        ["workers", None, 1, "Worker processes sharing the listening sockets (1: this process serves).", int],
        ["grace", None, 30.0, "Seconds calls in flight get to finish on SIGTERM (GOAWAY, then drain).", float],
        [
            "metrics",
            None,
            None,
            "Serve Prometheus metrics at /metrics on this endpoint (needs chunkwire[metrics]); with --workers, "
            "put {worker} in it (tcp:9100{worker}): each worker serves its own.",
        ],
    ]

    def __init__(self) -> None:
        super().__init__()
        self["listen"] = []
        self["adopt"] = []

    def opt_adopt(self, spec: str) -> None:
        """(Used by --workers) Serve on an inherited listening socket, FD:FAMILY[:haproxy], instead of --listen."""
        self["adopt"].append(spec)

    def opt_listen(self, description: str) -> None:
        # Twisted shows this docstring as the option's help text, joined as is.
        """Listen on this Twisted endpoint (repeatable): tcp:8750, ssl:8751:privateKey=k.pem, unix:/tmp/c.sock."""
        self["listen"].append(description)

    opt_l = opt_listen

    def postOptions(self) -> None:
        if not self["listen"]:
            self["listen"] = [self.defaultListen]
        if self["workers"] < 1:
            raise usage.UsageError(f"--workers is at least 1, not {self['workers']}")
        if self["metrics"] is not None and self["workers"] > 1 and "{worker}" not in self["metrics"]:
            raise usage.UsageError("with --workers, --metrics needs {worker} in it: each worker serves its own")
        if self["workers"] > 1:
            from protocols.serving.workers import _split

            try:
                for description in self["listen"]:
                    _split(description)
            except ValueError as error:
                raise usage.UsageError(str(error)) from None

    def interceptors(self) -> list[Any]:
        """The call interceptors these options ask for: the Prometheus one with --metrics."""
        if self["metrics"] is None:
            return []
        from protocols.serving.metrics import PrometheusInterceptor

        return [PrometheusInterceptor()]

    def limits(self) -> Any:
        from framing import Limits

        if self["max-bytes"] is None:
            return None
        return Limits(max_bytes_length=self["max-bytes"])


class _LoginOptions(_Options):
    """The options of a service that can require logins: --users, --client-ca, --tokens (with none it is open)."""

    optParameters = _Options.optParameters + [
        [
            "users",
            None,
            None,
            "Require logins: users and password verifiers from this file (made with chunkwire-adduser).",
        ],
        [
            "client-ca",
            None,
            None,
            "Require TLS client certificates issued by a CA in this directory (*.pem); every --listen must be "
            "ssl:, and a certificate's common name is its user.",
        ],
        ["tokens", None, None, "Require logins: bearer tokens from this file (made with chunkwire-adduser --token)."],
    ]

    def postOptions(self) -> None:
        super().postOptions()
        from protocols.auth.secretfiles import SecretFileError

        try:
            self.portal(None)
        except SecretFileError as error:
            raise usage.UsageError(str(error)) from None
        if self["client-ca"] is not None:
            from protocols.auth.realms import listenDescriptions

            try:
                listenDescriptions(self["listen"], self["client-ca"])
            except ValueError as error:
                raise usage.UsageError(str(error)) from None

    def logins(self) -> Any:
        """The L{protocols.auth.realms.ServiceLogins} these options describe."""
        from protocols.auth.realms import ServiceLogins

        return ServiceLogins(self["users"], self["client-ca"], self["tokens"])

    def portal(self, realm: Any) -> Any:
        """The portal these options describe for C{realm}, or C{None} (an open service)."""
        return self.logins().portal(realm)


class EchoOptions(_Options):
    """C{twist chunkwire-echo} options."""

    synopsis = "[--listen ENDPOINT ...] [--trace] [guard options]"
    longdesc = "Run chunkwire's echo service: every object a client sends comes back unchanged."


class KeyValueOptions(_LoginOptions):
    """C{twist chunkwire-kv} options."""

    defaultListen = "tcp:8760"
    synopsis = (
        "[--listen ENDPOINT ...] [--users FILE] [--client-ca DIR] [--tokens FILE] [--tracebacks] [--trace] "
        "[guard options]"
    )
    longdesc = (
        "Run chunkwire's key-value RPC service (get, put, delete, list, watch; see protocols.kv). "
        "The store lives in memory, shared by every connection (and every user, with logins)."
    )
    optFlags = _Options.optFlags + [["tracebacks", None, "Send the traceback of a failed call to the caller."]]


class BulkServiceOptions(_LoginOptions):
    """C{twist chunkwire-bulk} options."""

    defaultListen = "tcp:8770"
    synopsis = (
        "--dir DIRECTORY [--listen ENDPOINT ...] [--users FILE] [--client-ca DIR] [--tokens FILE] "
        "[--hashing thread|inline] [--max-open-files N] [--max-open-files-per-address N] "
        "[--partial-quota BYTES] [--partial-quota-per-user BYTES] "
        "[--trace] [guard options]"
    )
    longdesc = (
        "Run chunkwire's bulk-transfer service (protocols.bulk.files.BulkService): clients upload, download "
        "and list the files of one directory, resumably and striped over several connections if they like "
        "(examples/bulk_client.py is such a client).  Every file is checked end to end (BLAKE3 when both "
        "ends have the blake3 package, else SHA-256), and an "
        "upload appears under its name only once its digest has been verified.  With logins (--users, "
        "--client-ca, --tokens), each user sees only their own directory, DIRECTORY/USER."
    )
    optParameters = _LoginOptions.optParameters + [
        ["dir", "d", None, "The directory to serve (created if missing).  Required."],
        ["hashing", None, "inline", "Where digests are computed: inline (in the reactor thread) or thread."],
        [
            "max-open-files",
            None,
            0,
            "Most files held open for clients in all (0: a quarter of the descriptor limit).",
            int,
        ],
        ["max-open-files-per-address", None, 32, "Most files held open for one client address.", int],
        ["partial-quota", None, 256 << 30, "Most bytes of unfinished uploads kept in all.", int],
        ["partial-quota-per-user", None, 64 << 30, "Most bytes of unfinished uploads kept for one user.", int],
    ]

    def fileLimits(self) -> Any:
        """The L{protocols.bulk.quotas.FileLimits} these options describe."""
        from protocols.bulk.quotas import FileLimits

        return FileLimits(maxOpen=self["max-open-files"] or None, maxOpenPerAddress=self["max-open-files-per-address"])

    def postOptions(self) -> None:
        super().postOptions()
        if not self["dir"]:
            raise usage.UsageError("--dir is required: the directory to serve")
        if self["hashing"] not in ("inline", "thread"):
            raise usage.UsageError(f"--hashing is inline or thread, not {self['hashing']!r}")


def _listening(options: _Options, factory: Any) -> Any:
    """
    A MultiService with one endpoint service per C{--listen}, each connection
    guarded by the options' policy (and requiring client certificates with C{--client-ca}).
    """
    from twisted.application.service import MultiService
    from twisted.internet import reactor
    from twisted.internet.endpoints import serverFromString

    from protocols.auth.realms import listenDescriptions
    from protocols.guard import GuardedFactory
    from protocols.serving import DrainingService, adoptedEndpoint, watchParent

    factory = GuardedFactory(factory, options.policy(), reactor)
    parent = MultiService()
    if options["adopt"]:
        endpoints = [adoptedEndpoint(reactor, spec) for spec in options["adopt"]]
        watchParent(reactor)
    else:
        descriptions = listenDescriptions(options["listen"], options.get("client-ca"))
        endpoints = [serverFromString(reactor, description) for description in descriptions]
    for endpoint in endpoints:
        DrainingService(endpoint, factory, options["grace"]).setServiceParent(parent)
    if options["metrics"] is not None:
        _metrics(options["metrics"]).setServiceParent(parent)
    if isinstance(options, _LoginOptions):
        from twisted.logger import Logger

        Logger(namespace="chunkwire").info(options.logins().notice())
    return parent


def _metrics(description: str) -> Any:
    """The service serving /metrics on C{description} ({worker}: this worker's number, 0 without workers)."""
    import os

    from twisted.application.internet import StreamServerEndpointService
    from twisted.internet import reactor
    from twisted.internet.endpoints import serverFromString

    from protocols.serving.metrics import metricsSite

    description = description.replace("{worker}", os.environ.get("CHUNKWIRE_WORKER", "0"))
    return StreamServerEndpointService(serverFromString(reactor, description), metricsSite())


def _supervisor(options: _Options, tapname: str) -> Any:
    """With C{--workers N} (N > 1): a supervisor binding each C{--listen} once for N copies of this command."""
    from twisted.internet import reactor

    from protocols.serving.workers import Supervisor, twistWorkerCommand

    command = twistWorkerCommand(tapname)
    count, grace = options["workers"], options["grace"]
    return Supervisor(reactor, options["listen"], command, count, reusePort=options["reuse-port"], grace=grace)


def _tracing(options: _Options) -> None:
    if options["trace"]:
        from protocols import TokenProtocol

        TokenProtocol.trace = True


@implementer(IServiceMaker, IPlugin)
class EchoServiceMaker:
    """Makes the C{chunkwire-echo} service."""

    tapname = "chunkwire-echo"
    description = "chunkwire's echo service: sends back every object it receives."
    options = EchoOptions

    def makeService(self, options: EchoOptions) -> Any:
        from protocols import echo

        if options["workers"] > 1:
            return _supervisor(options, self.tapname)

        _tracing(options)
        return _listening(options, echo.serverFactory(options.limits()))


@implementer(IServiceMaker, IPlugin)
class KeyValueServiceMaker:
    """Makes the C{chunkwire-kv} service."""

    tapname = "chunkwire-kv"
    description = "chunkwire's key-value store over RPC (get, put, delete, list, watch)."
    options = KeyValueOptions

    def makeService(self, options: KeyValueOptions) -> Any:
        from twisted.internet import reactor

        if options["workers"] > 1:
            return _supervisor(options, self.tapname)

        from protocols import rpc
        from protocols.auth.realms import SharedRootRealm
        from protocols.kv import KeyValueStore

        _tracing(options)
        store = KeyValueStore()
        portal = options.portal(SharedRootRealm(store))
        factory = rpc.serverFactory(
            store if portal is None else None,
            clock=reactor,
            tracebacks=options["tracebacks"],
            limits=options.limits(),
            portal=portal,
            interceptors=options.interceptors(),
        )
        return _listening(options, factory)


@implementer(IServiceMaker, IPlugin)
class BulkServiceMaker:
    """Makes the C{chunkwire-bulk} service."""

    tapname = "chunkwire-bulk"
    description = "chunkwire's bulk-transfer service: upload, download and list the files of a directory."
    options = BulkServiceOptions

    def makeService(self, options: BulkServiceOptions) -> Any:
        from twisted.internet import reactor

        if options["workers"] > 1:
            return _supervisor(options, self.tapname)

        from protocols import bulk
        from protocols.auth.realms import DirectoryRealm
        from protocols.bulk.files import BulkService
        from protocols.bulk.quotas import FileBudget
        from protocols.rpc.endpoints import loginGate

        _tracing(options)
        directory = options["dir"]
        hashing = bulk.BulkOptions(hashing=options["hashing"])
        settings = {
            "clock": reactor,
            "limits": options.limits(),
            "options": hashing,
            "interceptors": options.interceptors(),
        }
        # One budget of open files for every user's service of this process.
        budget = FileBudget(options.fileLimits())
        if not options.logins().required:
            service = BulkService(directory, reactor=reactor, budget=budget)
            return _listening(options, bulk.BulkBrokerFactory(service, **settings))
        realm = DirectoryRealm(directory, lambda user: BulkService(user, reactor=reactor, budget=budget))
        portal = options.portal(realm)
        gate = loginGate(None, portal, None, reactor)
        return _listening(options, bulk.BulkBrokerFactory(None, gate=gate, **settings))


echoServiceMaker = EchoServiceMaker()
keyValueServiceMaker = KeyValueServiceMaker()
bulkServiceMaker = BulkServiceMaker()
