"""twist plugins for chunkwire's services: C{chunkwire-echo}, C{chunkwire-kv} and C{chunkwire-bulk}.

    twist chunkwire-echo --listen tcp:8750
    twist chunkwire-kv --listen tcp:8760 --listen unix:/tmp/kv.sock
    twist chunkwire-bulk --listen tcp:8770 --dir /tmp/chunkwire-files
    twist chunkwire-kv --users /etc/chunkwire/users --listen ssl:8761:privateKey=server.pem
    twist chunkwire-kv --listen tcp:8760 --workers 2 --store /var/lib/chunkwire/kv.sqlite --grace 10
    twist chunkwire-kv --listen tcp:8760 --workers 2 --store postgresql://kv@db.example/kv
    twist chunkwire-echo --help

chunkwire-kv and chunkwire-bulk take --users FILE, --client-ca DIR and
--tokens FILE: with any, only clients that log in are served (the echo
service stays open, a demo).  --workers N runs N worker processes on
sockets bound once (tcp:, tcp6:, unix:, optionally under haproxy:, and
ssl: or chunkwire-tls: over them, each worker doing the TLS), and
its workers share one login throttle in SQLite (--throttle-db, by default
beside the user or token file); on
SIGTERM each service drains: GOAWAY, then the calls in flight get --grace
seconds.  chunkwire-kv keeps its store in memory, one process's own, unless
--store FILE names a SQLite file, which every worker shares (and which
outlives them), or --store postgresql://... a PostgreSQL database, which
every worker on every host shares: --workers without --store is refused.

This file lives in C{twisted/plugins/} (a directory without C{__init__.py})
so that Twisted's plugin system finds it; it only names the services, the
code is in L{protocols}.  Keep it cheap to import: C{twist} imports every
plugin file to list them.
"""

# Twisted spells its option tables and plugin objects in mixedCase.
# ruff: noqa: N815, N816

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.application.service import IServiceMaker, MultiService
from twisted.internet.defer import Deferred
from twisted.plugin import IPlugin
from twisted.python import usage
from zope.interface import implementer


class _ArgumentTable:
    """
    Takes the C{add_argument} calls of L{protocols._guard.addGuardArguments}
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
    """The guard's timeouts and caps (see protocols._guard.GuardPolicy), as every chunkwire service takes them."""

    # Filled on first use: importing protocols._guard here would slow down every twist command's plugin scan.
    optParameters: list[list[Any]] = []
    # Each option's GuardPolicy field (its argparse dest): "preamble-timeout" -> "preambleTimeout".
    _dests: dict[str, str] = {}

    def __init__(self) -> None:
        if not _GuardOptions.optParameters:
            from protocols._guard import addGuardArguments

            table = _ArgumentTable()
            addGuardArguments(table)
            _GuardOptions.optParameters = table.rows
            _GuardOptions._dests = table.dests
        super().__init__()

    def policy(self) -> Any:
        """The L{protocols._guard.GuardPolicy} these options describe."""
        from types import SimpleNamespace

        from protocols._guard import policyFromArguments

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
        [
            "metrics-max-connections",
            None,
            16,
            "Connections the --metrics listener takes at once (its own cap; more are closed at once).",
            int,
        ],
        [
            "trusted-proxy",
            None,
            "loopback",
            "Under haproxy:, believe PROXY headers only from these peers: ADDR[,ADDR] (addresses or networks; "
            "loopback, the default, is 127.0.0.0/8, ::1 and UNIX sockets; none believes nobody).",
        ],
        ["metrics-lifetime", None, 10.0, "Seconds a --metrics connection may live (then it is aborted).", float],
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

    def getSynopsis(self) -> str:
        """
        C{Usage: twist [options] PLUGIN SYNOPSIS}: twist's own synopsis ends
        in C{plugin [plugin_options]}, which the plugin's name and options
        would repeat.
        """
        if self.parent is None:
            return super().getSynopsis()
        return f"{usage.Options.getSynopsis(self.parent)} {self.parent.subCommand} {self.synopsis}"

    def parseOptions(self, options: Any = None) -> None:
        try:
            super().parseOptions(options)
        except usage.UsageError:
            self.failed = True
            raise

    failed = False
    """Whether parsing failed: then the usage shown after the error is one line pointing at --help."""

    def getUsage(self, width: int | None = None) -> str:
        # twist prints the error, then the synopsis and this: the whole option table would bury the error.
        if self.failed:
            if self.parent is None:
                return "Run with --help for the options.\n"
            # "Usage: twist [options]" (or "python -m twisted"): the command as it was run.
            command = usage.Options.getSynopsis(self.parent).removeprefix("Usage: ").removesuffix(" [options]")
            return f"Run '{command} {self.parent.subCommand} --help' for its options.\n"
        return super().getUsage(width)

    def postOptions(self) -> None:
        if not self["listen"]:
            self["listen"] = [self.defaultListen]
        from protocols._proxyheader import BadEndpointDescription, serverEndpoint

        for description in self["listen"]:
            try:
                # Parsed, not listened on: a description that does not parse is a usage error, not a traceback.
                serverEndpoint(None, description)
            except BadEndpointDescription as error:
                raise usage.UsageError(f"--listen {error}") from None
            except OSError as error:  # an ssl: key or certificate file
                raise usage.UsageError(f"--listen {description}: {error}") from None
        if self["workers"] < 1:
            raise usage.UsageError(f"--workers is at least 1, not {self['workers']}")
        if self["metrics"] is not None and self["workers"] > 1 and "{worker}" not in self["metrics"]:
            raise usage.UsageError("with --workers, --metrics needs {worker} in it: each worker serves its own")
        from protocols._proxyheader import TrustedProxies

        try:
            self["trusted"] = TrustedProxies.parse(self["trusted-proxy"])
        except ValueError as error:
            raise usage.UsageError(f"--trusted-proxy: {error}") from None
        if self["workers"] > 1:
            from protocols.serving._workers import _split

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
        [
            "throttle-db",
            None,
            None,
            "Keep the login throttle's counts in this SQLite file, shared by every process that names it "
            "(with --workers, the default is the user or token file's name plus .throttle; without, in memory).",
        ],
    ]

    def postOptions(self) -> None:
        super().postOptions()
        from protocols.auth._secretfiles import SecretFileError

        try:
            self.portal(None)
        except SecretFileError as error:
            raise usage.UsageError(str(error)) from None
        if self["client-ca"] is not None and not self["adopt"]:
            # (A worker's TLS listeners come with --adopt, which names the CAs: its --listen is the default.)
            from protocols.auth._realms import listenDescriptions

            try:
                listenDescriptions(self["listen"], self["client-ca"])
            except ValueError as error:
                raise usage.UsageError(str(error)) from None

    def logins(self) -> Any:
        """The L{protocols.auth._realms.ServiceLogins} these options describe."""
        from protocols.auth._realms import ServiceLogins

        return ServiceLogins(self["users"], self["client-ca"], self["tokens"], self["throttle-db"])

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
        "[--listen ENDPOINT ...] [--store FILE|postgresql://...] [--workers N] [--users FILE] [--client-ca DIR] "
        "[--tokens FILE] [--tracebacks] [--trace] [guard options]"
    )
    longdesc = (
        "Run chunkwire's key-value RPC service (get, put, delete, list, watch; see protocols.kv). "
        "One store is shared by every connection (and every user, with logins): by default it lives in this "
        "process's memory and is gone when it exits; with --store FILE it is a SQLite file, shared by every "
        "worker process (--workers needs it) and kept across restarts, where each put is on disk before it is "
        "answered; with --store postgresql://... it is a PostgreSQL database, shared by every worker on every host "
        "(watches hear of every host's changes through LISTEN/NOTIFY)."
    )
    optFlags = _Options.optFlags + [["tracebacks", None, "Send the traceback of a failed call to the caller."]]
    optParameters = _LoginOptions.optParameters + [
        [
            "store",
            None,
            None,
            "Keep the store in this SQLite file (created if missing), or in the PostgreSQL database of a "
            "postgresql:// URL (tables made if missing; the postgresql extra), shared by every worker (on every "
            "host, with PostgreSQL) and kept across restarts; without it the store is in memory, one process's own.",
        ],
        [
            "names",
            None,
            None,
            "Serve the store by an object URL kept across restarts (instead of openly; beside --users or "
            "--tokens): the name's digest is kept in this file, the URL written once to --url-file.",
        ],
        [
            "identity",
            None,
            None,
            "With --names: the server's TLS key, made (mode 0600) if missing; --listen endpoints are plain tcp: or "
            "unix:, served with it (default: the --names file's name plus .pem).",
        ],
        [
            "url-file",
            None,
            None,
            "With --names: where the store's URL is written when it is made, mode 0600; hand it out from there "
            "(default: the --names file's name plus .url).",
        ],
        ["max-keys", None, 100_000, "Most keys the store holds; a put of a new key past it fails (kv.StoreFull).", int],
        [
            "max-store-bytes",
            None,
            256 * 1024 * 1024,
            "Most characters of keys and values the store holds in all; a put past it fails (kv.StoreFull).",
            int,
        ],
    ]

    def __init__(self) -> None:
        super().__init__()
        self["url-hint"] = []

    def opt_url_hint(self, hint: str) -> None:
        """With --names: where clients connect, as the URL says (repeatable): HOST:PORT, [IPv6]:PORT, unix:/PATH."""
        self["url-hint"].append(hint)

    def postOptions(self) -> None:
        super().postOptions()
        self.checkNames()
        if self["workers"] > 1 and self["store"] is None:
            raise usage.UsageError(
                "--workers needs --store FILE: each worker is a process of its own, with its own memory"
            )
        if self["store"] is not None:
            import sqlite3

            from protocols.kv import StoreUnavailable, openStorage

            # Opened once here: a bad path or an unreachable database is a usage error, and the supervisor makes
            # the tables before any worker opens the store (they never race to make them).
            try:
                openStorage(self["store"]).close()
            except (sqlite3.Error, StoreUnavailable) as error:
                raise usage.UsageError(f"--store {_storeName(self['store'])}: {error}") from None
            except ImportError:
                raise usage.UsageError(
                    "--store postgresql://... needs psycopg (the postgresql extra): "
                    "pip install './chunkwire[postgresql]'"
                ) from None

    def checkNames(self) -> None:
        """Refuse --names with what it cannot go with, and make C{self["publishing"]} (or C{None})."""
        self["publishing"] = None
        if self["names"] is None:
            if self["identity"] or self["url-file"] or self["url-hint"]:
                raise usage.UsageError("--identity, --url-file and --url-hint go with --names FILE")
            return
        if self["client-ca"] is not None or self["workers"] > 1:
            raise usage.UsageError("--names goes with neither --client-ca nor --workers")
        from protocols.auth._names import NameTable
        from protocols.auth._publishing import URLPublishing, hintsFor

        names = self["names"]
        try:
            hints = self["url-hint"] or hintsFor(self["listen"])
        except ValueError as error:
            raise usage.UsageError(f"--names: {error}: give --url-hint HOST:PORT") from None
        try:
            self["publishing"] = URLPublishing(
                names, self["identity"] or names + ".pem", self["url-file"] or names + ".url", tuple(hints)
            )
            # Served with the key the URL names; made and read here, as the names file is, so that a bad
            # file is a usage error.
            self["listen"] = self["publishing"].serverDescriptions(self["listen"])
            NameTable(names)
        except ValueError as error:
            raise usage.UsageError(f"--names: {error}") from None

    def logins(self) -> Any:
        """The L{protocols.auth._realms.ServiceLogins} these options describe, --names included."""
        from dataclasses import replace

        return replace(super().logins(), names=self["names"])

    def publishStore(self, store: Any) -> Any:
        """
        With --names: the name table publishing C{store} by its kept URL (the
        URL file written if it is new), and the line saying so; else C{(None, None)}.
        """
        publishing = self["publishing"]
        if publishing is None:
            return None, None
        table, made = publishing.publish(store, "kv store")
        said = "written to" if made else "kept since an earlier start; it was written to"
        return table, f"the store is served by its object URL ({said} {publishing.urlFile})"

    def openStore(self) -> Any:
        """The L{protocols.kv.KeyValueStore} these options describe, its storage opened (a file with --store)."""
        from twisted.internet import reactor

        from protocols.kv import KeyValueStore, StoreLimits, openStorage

        limits = StoreLimits(maxKeys=self["max-keys"], maxBytes=self["max-store-bytes"])
        if self["store"] is None:
            return KeyValueStore(limits=limits)
        return KeyValueStore(storage=openStorage(self["store"]), clock=reactor, limits=limits)


def _storeName(store: str) -> str:
    """C{--store}'s value as it may be shown: a URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in store:
        return store
    parts = urlsplit(store)
    if parts.password is None:
        return store
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


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
        "Run chunkwire's bulk-transfer service (protocols.bulk._files.BulkService): clients upload, download "
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
        """The L{protocols.bulk._quotas.FileLimits} these options describe."""
        from protocols.bulk._quotas import FileLimits

        return FileLimits(maxOpen=self["max-open-files"] or None, maxOpenPerAddress=self["max-open-files-per-address"])

    def postOptions(self) -> None:
        super().postOptions()
        if not self["dir"]:
            raise usage.UsageError("--dir is required: the directory to serve")
        if self["hashing"] not in ("inline", "thread"):
            raise usage.UsageError(f"--hashing is inline or thread, not {self['hashing']!r}")


class _ClosingService(MultiService):
    """
    Its services (the endpoints, each draining on stop), then, once every
    one has stopped, C{closing()}: what the connections used (a store's file).
    """

    closing: Callable[[], object] | None = None

    def stopService(self) -> Deferred[None]:
        stopped: Deferred[None] = super().stopService()  # type: ignore[no-untyped-call]
        return stopped.addBoth(self._close)

    def _close(self, result: Any) -> Any:
        if self.closing is not None:
            self.closing()
        return result


def _listening(options: _Options, factory: Any) -> Any:
    """
    A MultiService with one endpoint service per C{--listen}, each connection
    guarded by the options' policy (and requiring client certificates with C{--client-ca}).
    """
    from twisted.internet import reactor

    from protocols._guard import GuardedFactory
    from protocols._proxyheader import serverEndpoint
    from protocols.auth._realms import listenDescriptions
    from protocols.serving import DrainingService, adoptedEndpoint, watchParent

    factory = GuardedFactory(factory, options.policy(), reactor)
    parent = _ClosingService()
    trusted = options["trusted"]
    if options["adopt"]:
        endpoints = [adoptedEndpoint(reactor, spec, trusted) for spec in options["adopt"]]
        watchParent(reactor)
    else:
        descriptions = listenDescriptions(options["listen"], options.get("client-ca"))
        endpoints = [serverEndpoint(reactor, description, trusted) for description in descriptions]
    for endpoint in endpoints:
        DrainingService(endpoint, factory, options["grace"]).setServiceParent(parent)
    if options["metrics"] is not None:
        _metrics(options).setServiceParent(parent)
    _reserveDescriptors(options)
    if isinstance(options, _LoginOptions):
        from twisted.logger import Logger

        Logger(namespace="chunkwire").info(options.logins().notice())
    return parent


def _metricsCaps(options: _Options) -> Any:
    from protocols.serving._caps import ListenerCaps

    return ListenerCaps(options["metrics-max-connections"], options["metrics-lifetime"])


def _metrics(options: _Options) -> Any:
    """
    The service serving /metrics on C{--metrics} ({worker}: this worker's
    number, 0 without workers), with its own connection cap and lifetime.
    """
    import os

    from twisted.application.internet import StreamServerEndpointService
    from twisted.internet import reactor
    from twisted.internet.endpoints import serverFromString

    from protocols.serving._caps import CappedFactory
    from protocols.serving.metrics import metricsSite

    description = options["metrics"].replace("{worker}", os.environ.get("CHUNKWIRE_WORKER", "0"))
    factory = CappedFactory(metricsSite(), _metricsCaps(options), reactor)
    return StreamServerEndpointService(serverFromString(reactor, description), factory)


def _reserveDescriptors(options: _Options) -> None:
    """Make room in the descriptor limit for every listener's cap at once, or say that there is none."""
    from twisted.logger import Logger

    from protocols.serving._caps import DESCRIPTOR_HEADROOM, reserveDescriptors

    needed = options.policy().maxConnections or 0
    if options["metrics"] is not None:
        needed += _metricsCaps(options).maxConnections
    limit = reserveDescriptors(needed)
    if needed and limit < needed + DESCRIPTOR_HEADROOM:
        Logger(namespace="chunkwire").warn(
            "The descriptor limit ({limit}) is below what the connection caps need ({needed} and "
            "{headroom} to spare): lower --max-connections or raise the limit (ulimit -n)",
            limit=limit,
            needed=needed,
            headroom=DESCRIPTOR_HEADROOM,
        )


def _supervisor(options: _Options, tapname: str) -> Any:
    """With C{--workers N} (N > 1): a supervisor binding each C{--listen} once for N copies of this command."""
    from twisted.internet import reactor

    from protocols.serving._workers import Supervisor, twistWorkerCommand

    command = twistWorkerCommand(tapname)
    if isinstance(options, _LoginOptions) and options["throttle-db"] is None:
        # The workers share one login throttle, or each would allow an address its own burst.
        shared = options.logins().sharedThrottlePath()
        if shared is not None:
            command = _withOption(command, f"--throttle-db={shared}")
    count, grace = options["workers"], options["grace"]
    held = options.policy().maxHeldBytes
    if held:
        # --max-held-bytes bounds the server, not each worker: N workers with the whole pool each would hold N pools.
        command = _withOption(command, f"--max-held-bytes={max(1, held // count)}")
    # With --client-ca, each TLS listener's description names the CAs: the workers require client certificates.
    from protocols.auth._realms import listenDescriptions

    listen = listenDescriptions(options["listen"], options.get("client-ca"))
    return Supervisor(reactor, listen, command, count, reusePort=options["reuse-port"], grace=grace)


def _withOption(command: Any, option: str) -> Any:
    """A worker command (see L{protocols.serving._workers.twistWorkerCommand}) with C{option} added."""
    return lambda adopt: [*command(adopt), option]


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
        from protocols.auth._realms import SharedRootRealm

        _tracing(options)
        store = options.openStore()
        portal = options.portal(SharedRootRealm(store))
        names, published = options.publishStore(store)
        factory = rpc.serverFactory(
            store if portal is None and names is None else None,
            clock=reactor,
            options=rpc.ServerOptions(
                tracebacks=bool(options["tracebacks"]),
                limits=options.limits(),
                portal=portal,
                names=names,
                interceptors=options.interceptors(),
                throttle=options.logins().throttle(reactor),
            ),
        )
        service = _listening(options, factory)
        if published is not None:
            from twisted.logger import Logger

            Logger(namespace="chunkwire").info(published)
        # Closed once every connection has drained: the calls still running use it until then.
        service.closing = store.close
        return service


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

        from dataclasses import replace

        from protocols import bulk
        from protocols.auth._realms import DirectoryRealm
        from protocols.bulk._files import BulkService
        from protocols.bulk._quotas import FileBudget
        from protocols.rpc import ServerOptions, serverFactory

        _tracing(options)
        # A bulk server process, as examples/bulk_server.py: per-read buffers stay with the process and
        # connections read 1 MiB per turn (see bulk.steadyAllocator; a setting of this whole process).
        bulk.steadyAllocator()
        directory = options["dir"]
        # Guarded by _listening's GuardedFactory, not by the factory's own guard.
        serving = ServerOptions(
            bulk=bulk.BulkOptions(hashing=options["hashing"]),
            limits=options.limits(),
            interceptors=options.interceptors(),
            guard=None,
        )
        # One budget of open files for every user's service of this process.
        budget = FileBudget(options.fileLimits())
        if not options.logins().required:
            service = BulkService(directory, reactor=reactor, budget=budget)
            return _listening(options, serverFactory(service, options=serving, clock=reactor))
        realm = DirectoryRealm(directory, lambda user: BulkService(user, reactor=reactor, budget=budget))
        serving = replace(serving, portal=options.portal(realm), throttle=options.logins().throttle(reactor))
        return _listening(options, serverFactory(None, options=serving, clock=reactor))


echoServiceMaker = EchoServiceMaker()
keyValueServiceMaker = KeyValueServiceMaker()
bulkServiceMaker = BulkServiceMaker()
