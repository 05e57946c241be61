"""The names each public package and module exports, pinned: changing an C{__all__} means changing this file too.

As trio's C{test_exports.py} does: for C{framing}, C{protocols}, each of
their public subpackages and each public module (L{PUBLIC_MODULES}), the
sorted list of its names is written out in L{EXPORTS}; every listed name is
importable from its package or module; none with an C{__all__} is left
unpinned.  A module is public only if it is in L{PUBLIC_MODULES}: every
other module of C{framing/} and C{protocols/} is private by name
(C{_session.py}, issue 40) and has no C{__all__}, and examples/ (the
template too) and docs/ (its own C{*.py} too) import only public paths.  The modules that only re-exported names defined
elsewhere (removed in issue 40, listed in C{CHANGELOG.md} with where each
name is defined) stay removed.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.structure import PACKAGES, ROOT

# Each public package and public module, and the sorted names of its __all__.
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
        "PeerError",
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
        "availableDigests",
    ],
    "framing.login": [
        "Anonymous",
        "ClientCertificate",
        "ClientExchange",
        "LoginBroken",
        "LoginFailed",
        "LoginRefused",
        "MIN_ITERATIONS",
        "ObjectName",
        "Password",
        "ServerNotVerified",
        "Token",
        "UnsupportedCredentials",
        "clientMechanism",
    ],
    "framing.rpc": [
        "Backoff",
        "CLIENT_CALL_LIMITS",
        "CallLimits",
        "CallLost",
        "CallTable",
        "CallTimedOut",
        "ClosedBeforePreamble",
        "DeadReferenceError",
        "DeadlineExceeded",
        "ERRORS",
        "EndCountMismatch",
        "MESSAGES",
        "MaxLength",
        "Message",
        "MinLength",
        "NoSuchMethod",
        "NoSuchObject",
        "Pattern",
        "Range",
        "Referenceable",
        "RemoteError",
        "RemoteInterface",
        "RemoteViolation",
        "SERVER_CALL_LIMITS",
        "StreamOf",
        "TooManyPendingCalls",
        "UnexpectedAnswer",
        "registerError",
        "registerHint",
        "remote",
    ],
    "framing.slicing": [
        "ANY",
        "Boolean",
        "BudgetedUnslicer",
        "ByteString",
        "ChoiceOf",
        "Constraint",
        "DEFAULT_REGISTRY",
        "DictOf",
        "Float",
        "InstanceOf",
        "Integer",
        "IsNone",
        "ListOf",
        "OneOf",
        "Optional",
        "SequenceOf",
        "SetOf",
        "Text",
        "TupleOf",
        "Unslicer",
    ],
    "framing.wire": [
        "ABORT",
        "BIGINT",
        "BIGNEG",
        "BODY_KINDS",
        "BYTES",
        "CLOSE",
        "ERROR",
        "FLOAT",
        "INLINE_LIMIT",
        "INT",
        "KIND_NAMES",
        "MAGIC",
        "MAX_HEADER_LENGTH",
        "MAX_HEADER_VALUE",
        "NEG",
        "OPEN",
        "PING",
        "PONG",
        "PREAMBLE",
        "SIMPLE",
        "STRING",
        "VALUE_KINDS",
        "VERSION",
        "check_preamble",
        "decode_header",
        "encode_header",
    ],
    "protocols": [
        "CoalescingTransport",
        "TokenProtocol",
    ],
    "protocols.asynciobulk": [
        "AsyncBulkConnection",
        "FileTransfer",
        "connect",
        "fileStream",
    ],
    "protocols.asyncioclient": [
        "AsyncConnection",
        "AsyncFailover",
        "AsyncReference",
        "AsyncStream",
        "AsyncTypedReference",
        "callContext",
        "connect",
        "connectURL",
        "currentCall",
        "tlsContext",
    ],
    "protocols.auth": [
        "Authenticator",
        "BearerToken",
        "CertificateChecker",
        "ClientCertificate",
        "ClientCertificatesNeedTLS",
        "ClientLogin",
        "DEFAULT_LOGIN_TIMEOUT",
        "DirectoryRealm",
        "IRemoteRoot",
        "LoginFailed",
        "LoginRefused",
        "LoginThrottle",
        "LoginTimedOut",
        "NameFileError",
        "NameTable",
        "NotLoggedIn",
        "OPEN",
        "ObjectName",
        "PRE_LOGIN_LIMITS",
        "SecretFileError",
        "ServerIdentity",
        "ServerLogin",
        "ServerNotVerified",
        "ServiceLogins",
        "SharedRootRealm",
        "ThrottleStateError",
        "TokenChecker",
        "UnsupportedCredentials",
        "UserFile",
        "addUser",
        "joinDescription",
        "portal",
        "replaceEntry",
        "requireClientCertificates",
        "splitDescription",
        "tokenDigest",
    ],
    "protocols.blocking": [
        "BlockingConnection",
        "BlockingFailover",
        "BlockingReference",
        "BlockingStream",
        "BlockingTypedReference",
        "callContext",
        "connect",
        "connectURL",
        "currentCall",
        "tlsContext",
    ],
    "protocols.blockingbulk": [
        "BlockingBulkConnection",
        "ConnectTimedOut",
        "ConnectionLost",
        "FileTransfer",
        "Interrupted",
        "Interruption",
        "ServerSilent",
        "TransferProgress",
        "connect",
        "fetchFile",
        "fileStream",
        "sendFile",
    ],
    "protocols.bulk": [
        "ADAPTIVE_READ_SIZE",
        "BLAKE3",
        "BulkChannel",
        "BulkOptions",
        "BulkService",
        "BytesSource",
        "CallbackSink",
        "ConsumerSink",
        "DEFAULT_DIGEST",
        "DigestRefused",
        "DigestUnavailable",
        "FileBudget",
        "FileLimits",
        "FileResult",
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
        "TransferProgress",
        "TransferResult",
        "allocatorSteady",
        "asIncoming",
        "availableDigests",
        "bulkOf",
        "callingBroker",
        "callingChannel",
        "fetchFile",
        "newHash",
        "sendFile",
        "steadyAllocator",
    ],
    "protocols.echo": [
        "ECHO_REGISTRY",
        "EchoClient",
        "EchoFactory",
        "EchoRefused",
        "EchoServer",
        "connect",
        "serve",
        "serverFactory",
    ],
    "protocols.interop": [
        "APPLICATION_ERROR",
        "ApplicationError",
        "Avatar",
        "InteropRealm",
        "InteropService",
        "PatternSource",
        "TEST_PASSWORD",
        "TEST_TOKEN",
        "TEST_USER",
        "pattern",
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
    "protocols.options": [
        "ClientOptions",
    ],
    "protocols.rpc": [
        "Backoff",
        "Broker",
        "BrokerFactory",
        "CLIENT_CALL_LIMITS",
        "CallContext",
        "CallInterceptor",
        "CallLimits",
        "CallTally",
        "CallTimedOut",
        "ClientOptions",
        "ClosedBeforePreamble",
        "ConnectTimeout",
        "DEFAULT_GRACE",
        "DeadReferenceError",
        "DeadlineExceeded",
        "DrainDeadlineExceeded",
        "FailoverClient",
        "GoingAway",
        "ICallRecorder",
        "ListeningPort",
        "MaxLength",
        "MinLength",
        "NoAddressReady",
        "NoSuchMethod",
        "NoSuchObject",
        "NotTLS",
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
        "TLSHandshakeFailed",
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
        "loginGate",
        "reconnecting",
        "referenceOf",
        "registerError",
        "register_error",
        "remote",
        "serve",
        "serverFactory",
    ],
    "protocols.rpc.otel": [
        "RPC_SYSTEM",
        "TracingInterceptor",
    ],
    "protocols.serving": [
        "AdoptedEndpoint",
        "BadEndpointDescription",
        "DEFAULT_GUARD",
        "DrainingService",
        "GuardPolicy",
        "GuardedFactory",
        "Supervisor",
        "addGuardArguments",
        "adoptedEndpoint",
        "connectionOf",
        "policyFromArguments",
        "serveWorkers",
        "serverEndpoint",
        "watchParent",
    ],
    "protocols.serving.metrics": [
        "LATENCY_BUCKETS",
        "PrometheusInterceptor",
        "metricsSite",
    ],
    "protocols.testing": [
        "BrokerPair",
        "CertificateAuthority",
        "IssuedCertificate",
        "LoopbackPair",
        "MemoryPair",
        "MemoryTransport",
        "RecordingTransport",
        "SelfSignedCertificate",
        "TrackingFactory",
        "brokerPair",
        "connectedPair",
        "loopbackTCP",
        "messagesPerWrite",
        "recordSends",
        "recordWrites",
        "tlsRecords",
        "whenLost",
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


# The modules (not packages) a user imports by design; every other module is _private.  CHANGELOG.md says why each.
PUBLIC_MODULES = (
    "framing.wire",
    "protocols.asynciobulk",
    "protocols.asyncioclient",
    "protocols.blocking",
    "protocols.blockingbulk",
    "protocols.echo",
    "protocols.interop",
    "protocols.options",
    "protocols.rpc.otel",
    "protocols.serving.metrics",
    "protocols.testing",
)

# Where users' code is: each file's imports of framing and protocols must be public paths (docs/*.py, the
# site's own tooling, too: it is read as an example of using the packages like any other code there).
USER_CODE = ("examples", "docs", "README.md")
_IMPORTED = re.compile(
    r"^\s*(?:from\s+((?:framing|protocols)[\w.]*)\s+import|import\s+((?:framing|protocols)[\w.]*))", re.M
)


def publicModules(root: Path = ROOT) -> list[str]:
    """Every module (not package) of L{PACKAGES} under C{root} whose path has no C{_name} part."""
    found = []
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if path.name != "__init__.py" and not any(part.startswith("_") for part in parts):
                found.append(".".join(parts))
    return sorted(found)


def privateImports(root: Path = ROOT) -> list[str]:
    """C{path: module} for each import in users' code (L{USER_CODE}) of a module with a C{_name} part."""
    found = []
    for name in USER_CODE:
        base = root / name
        for path in sorted([base] if base.is_file() else base.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix not in (".py", ".rst", ".md") or "_generated" in path.parts:
                continue
            text = path.read_text("utf-8")
            if path.suffix == ".py":
                modules = [
                    node.module if isinstance(node, ast.ImportFrom) else alias.name
                    for node in ast.walk(ast.parse(text))
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0)
                    for alias in node.names
                ]
            else:
                modules = [a or b for a, b in _IMPORTED.findall(text)]
            found += [
                f"{relative}: {module}"
                for module in dict.fromkeys(m for m in modules if m)
                if module.split(".")[0] in PACKAGES and any(part.startswith("_") for part in module.split("."))
            ]
    return found


def privateAlls(root: Path = ROOT) -> list[str]:
    """
    The path of each module of L{PACKAGES} under C{root} with a C{_name}
    part (a private module, or anything in a private package) that sets
    C{__all__}: what a user calls is the public name, so a private
    module's list only misleads.  (No C{from x import *} reads one.)
    """
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if not any(part.startswith("_") and part != "__init__" for part in parts):
                continue
            for node in ast.parse(path.read_text("utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
                    found.append(path.relative_to(root).as_posix())
                    break
    return found


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
    """
    The public packages and modules export exactly the names pinned here,
    every other module is private, users' code imports public paths, and
    the removed re-export modules stay removed.
    """

    def test_exportsPinned(self) -> None:
        """Each pinned package's or module's C{__all__}, sorted, is its list in L{EXPORTS}, with no name twice."""
        for package, names in EXPORTS.items():
            exported = list(importlib.import_module(package).__all__)
            self.assertEqual(sorted(exported), names, package)
            self.assertEqual(len(set(exported)), len(exported), package)

    def test_everyPackagePinned(self) -> None:
        """Every public package that has an C{__all__}, and every public module, is in L{EXPORTS}."""
        withAll = [p for p in publicPackages() if "__all__" in vars(importlib.import_module(p))]
        self.assertEqual(sorted(withAll + list(PUBLIC_MODULES)), sorted(EXPORTS))

    def test_publicModulesListed(self) -> None:
        """
        The modules public by name (no C{_name} part in their path) are
        exactly L{PUBLIC_MODULES}: a new module of framing/ or protocols/ is
        private (C{_name.py}) unless it is added there, and each public one
        has an C{__all__}.
        """
        self.assertEqual(publicModules(), sorted(PUBLIC_MODULES))
        self.assertEqual([m for m in PUBLIC_MODULES if "__all__" not in vars(importlib.import_module(m))], [])

    def test_publicModulesFound(self) -> None:
        """On a made-up tree, a module with no C{_name} part is public; a _module, or one in a _package, is not."""
        root = Path(self.mktemp())
        for name in ["framing/__init__.py", "framing/wire.py", "framing/_core.py", "framing/rpc/__init__.py"]:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("")
        for name in ["framing/rpc/_session.py", "framing/_inner/__init__.py", "framing/_inner/open.py"]:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("")
        (root / "protocols").mkdir()
        (root / "protocols" / "testing.py").write_text("")
        self.assertEqual(publicModules(root), ["framing.wire", "protocols.testing"])

    def test_usersImportPublicPaths(self) -> None:
        """examples/ (the template too), docs/ (snippets, pages, its *.py) and the README import only public paths."""
        self.assertEqual(privateImports(), [])

    def test_privateImportsFound(self) -> None:
        """On a made-up tree, an import of a private module in an example or a page's code block is reported."""
        root = Path(self.mktemp())
        files = {
            "examples/a.py": "from framing.rpc import CallLimits\nfrom framing.rpc._limits import CallLimits\n",
            "examples/b.py": "import protocols._guard as guard\nfrom . import _helper\n",
            "docs/page.rst": ".. code-block:: python\n\n   from protocols.auth._users import UserFile\n",
            "docs/conf.py": "from framing._core import implementation\n",
            "README.md": "```python\nfrom protocols import rpc\n```\n",
        }
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        self.assertEqual(
            privateImports(root),
            [
                "examples/a.py: framing.rpc._limits",
                "examples/b.py: protocols._guard",
                "docs/conf.py: framing._core",
                "docs/page.rst: protocols.auth._users",
            ],
        )

    def test_exportedNamesExist(self) -> None:
        """Every name an C{__all__} lists is an attribute of its package (loaded lazily or not)."""
        missing = []
        for package, names in EXPORTS.items():
            module = importlib.import_module(package)
            missing += [f"{package}.{name}" for name in names if not hasattr(module, name)]
        self.assertEqual(missing, [])

    def test_noPrivateAll(self) -> None:
        """No private module (a C{_name} part in its path) has an C{__all__} (issue 40 removed 36)."""
        self.assertEqual(privateAlls(), [])

    def test_privateAllsFound(self) -> None:
        """On a made-up tree, an C{__all__} set or extended in a private module is reported; a public one's is not."""
        root = Path(self.mktemp())
        files = {
            "framing/__init__.py": "__all__ = ['x']\n",
            "framing/_core.py": "x = 1\n__all__ = ['x']\n",
            "framing/rpc/_calls.py": "__all__: list[str] = []\n",
            "framing/rpc/wire.py": "__all__ = []\n",
            "protocols/_private/__init__.py": "__all__ += ['y']\n",
            "protocols/_private/names.py": "names = ['__all__']\n",
        }
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        self.assertEqual(
            privateAlls(root), ["framing/_core.py", "framing/rpc/_calls.py", "protocols/_private/__init__.py"]
        )

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
