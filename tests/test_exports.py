"""The names each public package exports, pinned: changing an C{__all__} means changing this file too.

As trio's C{test_exports.py} does: for C{framing}, C{protocols} and each of
their public subpackages that has an C{__all__}, the sorted list of its
names is written out in L{EXPORTS}; every listed name is importable from its
package; no package with an C{__all__} is left unpinned; and the modules
that only re-exported names defined elsewhere (removed in issue 40, listed
in C{CHANGELOG.md} with where each name is defined) stay removed.
"""

from __future__ import annotations

import importlib

from twisted.trial.unittest import SynchronousTestCase

from tests.structure import PACKAGES, ROOT

# Each public package and the sorted names of its __all__.
EXPORTS: dict[str, list[str]] = {
    "framing": [
        "BlockBuffer",
        "ChunkChain",
        "ChunkwireError",
        "Decoder",
        "Encoder",
        "EncodingError",
        "ISlicer",
        "IUnslicer",
        "Limits",
        "NOTHING",
        "Ping",
        "Pong",
        "ProtocolError",
        "Registry",
        "TokenScanner",
        "Violation",
        "dumps",
        "implementation",
        "loads",
        "register",
    ],
    "framing.bulk": [
        "BadName",
        "ClientStreams",
        "FileChanged",
        "IncomingTransfer",
        "NoSuchFile",
        "SendStream",
        "StorageError",
        "UploadRefused",
    ],
    "framing.login": [
        "Anonymous",
        "ClientCertificate",
        "ClientExchange",
        "LoginBroken",
        "LoginFailed",
        "LoginRefused",
        "ObjectName",
        "Password",
        "ServerNotVerified",
        "Token",
        "UnsupportedCredentials",
        "clientMechanism",
    ],
    "framing.rpc": [
        "CallTable",
        "CallTimedOut",
        "DeadReferenceError",
        "DeadlineExceeded",
        "MESSAGES",
        "Message",
        "NoSuchMethod",
        "NoSuchObject",
        "Referenceable",
        "RemoteError",
        "RemoteViolation",
        "StreamOf",
        "TooManyPendingCalls",
        "UnexpectedAnswer",
        "registerError",
        "remote",
    ],
    "protocols": [
        "CoalescingTransport",
        "TokenProtocol",
    ],
    "protocols.auth": [
        "Authenticator",
        "ClientCertificate",
        "ClientLogin",
        "DEFAULT_LOGIN_TIMEOUT",
        "IRemoteRoot",
        "LoginFailed",
        "LoginRefused",
        "LoginThrottle",
        "LoginTimedOut",
        "NotLoggedIn",
        "ObjectName",
        "PRE_LOGIN_LIMITS",
        "ServerLogin",
        "ServerNotVerified",
        "UnsupportedCredentials",
        "portal",
    ],
    "protocols.bulk": [
        "ADAPTIVE_READ_SIZE",
        "BLAKE3",
        "BulkChannel",
        "BulkOptions",
        "BytesSource",
        "CallbackSink",
        "ConsumerSink",
        "DEFAULT_DIGEST",
        "DigestRefused",
        "DigestUnavailable",
        "FileSink",
        "FileSource",
        "FlowControlError",
        "HelloMissing",
        "IReceivingStream",
        "ISendingStream",
        "IStreamHost",
        "IllegalTransition",
        "IncomingStream",
        "IntegrityError",
        "NEGOTIATED",
        "OpenFileSink",
        "OrderedHasher",
        "PLAIN_READ_SIZE",
        "RangeSet",
        "Receiver",
        "STEADY_READ_SIZE",
        "SeekableSource",
        "Sink",
        "Stream",
        "StreamArg",
        "StreamIdReused",
        "StreamReset",
        "StreamSource",
        "TooManyStreams",
        "TransferResult",
        "allocatorSteady",
        "asIncoming",
        "availableDigests",
        "bulkOf",
        "callingBroker",
        "callingChannel",
        "steadyAllocator",
    ],
    "protocols.kv": [
        "IKeyValue",
        "IWatcher",
        "KEY",
        "Key",
        "KeyNotFound",
        "KeyValueStore",
        "ListTooLarge",
        "MemoryStorage",
        "POLL_INTERVAL",
        "PostgresStorage",
        "SQLiteStorage",
        "StateStore",
        "Storage",
        "StoreFull",
        "StoreLimits",
        "StoreUnavailable",
        "Unstorable",
        "VALUE",
        "Value",
        "WatchLimits",
        "WatchRefused",
        "Watcher",
        "openState",
        "openStorage",
    ],
    "protocols.rpc": [
        "Broker",
        "BrokerFactory",
        "CLIENT_CALL_LIMITS",
        "CallContext",
        "CallLimits",
        "CallTimedOut",
        "ClientOptions",
        "ConnectTimeout",
        "DeadReferenceError",
        "DeadlineExceeded",
        "DrainDeadlineExceeded",
        "FailoverClient",
        "GoingAway",
        "ListeningPort",
        "MaxLength",
        "MinLength",
        "NoAddressReady",
        "NoSuchMethod",
        "NoSuchObject",
        "ObjectStream",
        "ObjectStreams",
        "PICK_FIRST",
        "Pattern",
        "ROUND_ROBIN",
        "Range",
        "ReconnectingClient",
        "RefOf",
        "Referenceable",
        "RemoteError",
        "RemoteInterface",
        "RemoteMethod",
        "RemoteReference",
        "RemoteViolation",
        "SERVER_CALL_LIMITS",
        "ServerOptions",
        "StreamOptions",
        "StreamReader",
        "TooManyPendingCalls",
        "TooManyReferences",
        "TypedReference",
        "UnexpectedAnswer",
        "UnsupportedHint",
        "callContext",
        "connect",
        "connectURL",
        "currentBroker",
        "currentCall",
        "deferred",
        "drainBrokers",
        "drainPort",
        "interfaceNamed",
        "login",
        "reconnecting",
        "referenceOf",
        "registerError",
        "register_error",
        "remote",
        "serve",
        "serverFactory",
    ],
    "protocols.serving": [
        "AdoptedEndpoint",
        "DrainingService",
        "Supervisor",
        "adoptedEndpoint",
        "serveWorkers",
        "watchParent",
    ],
}

# The re-export modules that are gone (and protocols.rpc.limits, moved): import each name from its definition.
REMOVED = (
    "protocols.auth.errors",
    "protocols.auth.scram",
    "protocols.auth.wire",
    "protocols.bulk.credit",
    "protocols.bulk.errors",
    "protocols.bulk.fileerrors",
    "protocols.bulk.hello",
    "protocols.bulk.ranges",
    "protocols.bulk.wire",
    "protocols.rpc.errors",
    "protocols.rpc.hints",
    "protocols.rpc.limits",
    "protocols.rpc.referenceable",
    "protocols.rpc.wire",
)


def publicPackages() -> list[str]:
    """Every package under L{PACKAGES} (a directory with an C{__init__.py}) whose path has no C{_name} part."""
    found = []
    for root in PACKAGES:
        for init in (ROOT / root).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            if not any(part.startswith("_") for part in parts):
                found.append(".".join(parts))
    return sorted(found)


class ExportsTests(SynchronousTestCase):
    """The public packages export exactly the names pinned here, and the removed re-export modules stay removed."""

    def test_exportsPinned(self) -> None:
        """Each pinned package's C{__all__}, sorted, is its list in L{EXPORTS}, with no name twice."""
        for package, names in EXPORTS.items():
            exported = list(importlib.import_module(package).__all__)
            self.assertEqual(sorted(exported), names, package)
            self.assertEqual(len(set(exported)), len(exported), package)

    def test_everyPackagePinned(self) -> None:
        """Every public package that has an C{__all__} is in L{EXPORTS}: a new one is pinned when it is made."""
        withAll = [p for p in publicPackages() if "__all__" in vars(importlib.import_module(p))]
        self.assertEqual(withAll, sorted(EXPORTS))

    def test_exportedNamesExist(self) -> None:
        """Every name an C{__all__} lists is an attribute of its package (loaded lazily or not)."""
        missing = []
        for package, names in EXPORTS.items():
            module = importlib.import_module(package)
            missing += [f"{package}.{name}" for name in names if not hasattr(module, name)]
        self.assertEqual(missing, [])

    def test_reExportModulesRemoved(self) -> None:
        """None of the removed re-export modules imports (their names are imported from where they are defined)."""
        importable = []
        for name in REMOVED:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as e:
                self.assertEqual(e.name, name)
            else:
                importable.append(name)
        self.assertEqual(importable, [])
