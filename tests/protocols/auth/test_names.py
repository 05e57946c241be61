"""NameTable: unguessable names for published objects, stored as digests, revocable."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from protocols.auth import _names as names
from protocols.auth._identity import ServerIdentity
from protocols.auth._names import FILE_FORMAT, NAME_BYTES, NameFileError, NameTable
from protocols.auth._urls import ObjectURL


class NameTableTests(SynchronousTestCase):
    """Registering, looking up and revoking names."""

    def setUp(self) -> None:
        self.table = NameTable()
        self.thing = object()

    def test_nameIs256RandomBits(self) -> None:
        """A name is 52 lowercase base32 characters: the 32 bytes os.urandom gave."""
        drawn: list[bytes] = []

        def urandom(count: int) -> bytes:
            drawn.append(bytes(range(count)))
            return drawn[-1]

        self.patch(names.os, "urandom", urandom)
        name = self.table.register(self.thing, "a thing")
        self.assertEqual(NAME_BYTES, 32)
        self.assertEqual(drawn, [bytes(range(32))])
        self.assertRegex(name, re.compile(r"\A[a-z2-7]{52}\Z"))
        self.assertEqual(base64.b32decode(name.upper() + "===="), drawn[0])

    def test_namesAreUnique(self) -> None:
        """A thousand registrations give a thousand different names, of the same object or not."""
        registered = {self.table.register(self.thing, f"n{i}") for i in range(1000)}
        self.assertEqual(len(registered), 1000)
        self.assertEqual(len(self.table), 1000)

    def test_lookupRegistered(self) -> None:
        """A registered name gives back its object and label."""
        name = self.table.register(self.thing, "the thing")
        self.assertEqual(self.table.lookup(name), (self.thing, "the thing"))

    def test_unknownWrongAndRevokedAreAlike(self) -> None:
        """An unknown name, a name one character off, a prefix and a revoked name all give None."""
        name = self.table.register(self.thing, "the thing")
        other = self.table.register(object(), "other")
        wrong = name[:-1] + ("a" if name[-1] != "a" else "b")
        self.assertTrue(self.table.revoke(other))
        for presented in ("", "x" * 52, wrong, name[:26], name + "a", other):
            self.assertIsNone(self.table.lookup(presented), presented)

    def test_revoke(self) -> None:
        """Revoking a name removes it and says so; revoking it again, or an unknown name, says False."""
        name = self.table.register(self.thing, "the thing")
        self.assertTrue(self.table.revoke(name))
        self.assertIsNone(self.table.lookup(name))
        self.assertFalse(self.table.revoke(name))
        self.assertFalse(self.table.revoke("unknown"))
        self.assertEqual(len(self.table), 0)

    def test_storesDigestsNotNames(self) -> None:
        """The table holds the SHA-256 of each name, never the name itself."""
        name = self.table.register(self.thing, "the thing")
        self.assertNotIn(name, repr(vars(self.table)))
        self.assertIn(hashlib.sha256(name.encode()).digest(), vars(self.table)["_entries"])

    def test_lookupHashesEveryName(self) -> None:
        """Every lookup hashes the whole presented name once, known or not: the same work for each."""
        calls: list[bytes] = []
        real = hashlib.sha256

        def countingSHA256(data: bytes) -> object:
            calls.append(data)
            return real(data)

        name = self.table.register(self.thing, "the thing")
        self.patch(names.hashlib, "sha256", countingSHA256)
        for presented in (name, "unknown", name[:-1] + "q"):
            self.table.lookup(presented)
        self.assertEqual(calls, [name.encode(), b"unknown", (name[:-1] + "q").encode()])

    def test_url(self) -> None:
        """url() makes the object's URL from an identity or a key hash; an unpublished name is a KeyError."""
        identity = ServerIdentity.loadOrCreate(Path(self.mktemp()))
        name = self.table.register(self.thing, "the thing")
        url = self.table.url(identity, ["127.0.0.1:8750", "unix:/run/cw.sock"], name)
        self.assertEqual(url, ObjectURL(identity.keyHash, ("127.0.0.1:8750", "unix:/run/cw.sock"), name))
        self.assertEqual(self.table.url(identity.keyHash, ["localhost:1"], name).keyHash, identity.keyHash)
        self.table.revoke(name)
        self.assertRaises(KeyError, self.table.url, identity, ["localhost:1"], name)


class PersistentNameTableTests(SynchronousTestCase):
    """A table with a file keeps its names' digests and labels across restarts, never the names."""

    def setUp(self) -> None:
        self.path = Path(self.mktemp())
        self.table = NameTable(self.path)
        self.thing = object()

    def test_sameNameAfterRestart(self) -> None:
        """A table read from the file refuses a kept name until its label is bound, then gives the bound object."""
        name = self.table.register(self.thing, "the store")
        restarted = NameTable(self.path)
        self.assertEqual(len(restarted), 1)
        self.assertIsNone(restarted.lookup(name))
        again = object()
        self.assertEqual(restarted.bind("the store", again), 1)
        self.assertEqual(restarted.lookup(name), (again, "the store"))
        self.assertEqual(restarted.bind("no such label", again), 0)

    def test_fileHoldsDigestsOnly(self) -> None:
        """The file, mode 0600, holds each name's SHA-256 and its label, and no name."""
        name = self.table.register(self.thing, "the store")
        text = self.path.read_text()
        self.assertNotIn(name, text)
        self.assertEqual(
            json.loads(text),
            {
                "format": FILE_FORMAT,
                "names": [{"sha256": hashlib.sha256(name.encode()).hexdigest(), "label": "the store"}],
            },
        )
        self.assertEqual(self.path.stat().st_mode & 0o777, 0o600)
        self.assertEqual([path.name for path in self.path.parent.iterdir()], [self.path.name])

    def test_revokePersists(self) -> None:
        """A name revoked, or every name of a label revoked, stays revoked after a restart; the others stay."""
        kept = self.table.register(self.thing, "kept")
        revoked = self.table.register(self.thing, "revoked")
        twice = [self.table.register(self.thing, "twice") for _ in range(2)]
        self.assertTrue(self.table.revoke(revoked))
        self.assertEqual(self.table.revokeLabel("twice"), 2)
        restarted = NameTable(self.path)
        for label in ("kept", "revoked", "twice"):
            restarted.bind(label, self.thing)
        self.assertEqual(restarted.lookup(kept), (self.thing, "kept"))
        for name in (revoked, *twice):
            self.assertIsNone(restarted.lookup(name))
        self.assertEqual(len(restarted), 1)

    def test_bindDoesNotWrite(self) -> None:
        """Binding a label changes only this process's table, not the file."""
        self.table.register(self.thing, "the store")
        before = self.path.read_bytes()
        NameTable(self.path).bind("the store", object())
        self.assertEqual(self.path.read_bytes(), before)

    def test_failedWriteChangesNothing(self) -> None:
        """When the file cannot be written, register and revoke raise and the table is as it was."""
        name = self.table.register(self.thing, "the store")

        def failing(path: object, text: str, mode: int) -> None:
            raise OSError(28, "No space left on device")

        self.patch(names, "writeAtomically", failing)
        self.assertRaises(OSError, self.table.register, object(), "another")
        self.assertRaises(OSError, self.table.revoke, name)
        self.assertEqual((len(self.table), self.table.lookup(name)), (1, (self.thing, "the store")))

    def test_corruptFile(self) -> None:
        """A file that is not a name table is a NameFileError naming the file, whatever is wrong in it."""
        good = {"sha256": "00" * 32, "label": "x"}
        for content in (
            b"",
            b"\xff\xfe",
            b"[]",
            json.dumps({"format": "something else", "names": []}).encode(),
            json.dumps({"format": FILE_FORMAT}).encode(),
            json.dumps({"format": FILE_FORMAT, "names": 3}).encode(),
            json.dumps({"format": FILE_FORMAT, "names": [{"sha256": "zz", "label": "x"}]}).encode(),
            json.dumps({"format": FILE_FORMAT, "names": [{"sha256": "00" * 31, "label": "x"}]}).encode(),
            json.dumps({"format": FILE_FORMAT, "names": [{"sha256": "00" * 32, "label": 7}]}).encode(),
            json.dumps({"format": FILE_FORMAT, "names": [good, good]}).encode(),
        ):
            self.path.write_bytes(content)
            error = self.assertRaises(NameFileError, NameTable, self.path)
            self.assertEqual(error.path, str(self.path), content)
            self.assertIn("not a name table", str(error))

    def test_fileOthersMayWriteRefused(self) -> None:
        """A file group or others may write is refused: whoever writes it could publish names of their own."""
        self.table.register(self.thing, "the store")
        self.path.chmod(0o620)
        error = self.assertRaises(NameFileError, NameTable, self.path)
        self.assertIn("group or others may write", str(error))
        self.path.chmod(0o644)
        self.assertEqual(len(NameTable(self.path)), 1)


BLOCK_TLS = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("OpenSSL", "cryptography", "service_identity"):
            raise ImportError("blocked " + name)

sys.meta_path.insert(0, Block())
import protocols.auth._certificates, protocols.auth._identity, protocols.auth._tlsendpoints, protocols.testing
from protocols.auth._names import NameTable
from protocols.auth._urls import ObjectURL
table = NameTable()
name = table.register("thing", "label")
assert table.lookup(name) == ("thing", "label")
print(ObjectURL.parse("chunkwire://" + "a" * 52 + "@localhost:1/" + name).name == name)
"""


class WithoutTLSTests(SynchronousTestCase):
    """The modules import, and names and URLs work, without the tls extra."""

    def test_importsWithoutTLSExtra(self) -> None:
        """With pyOpenSSL, cryptography and service_identity unimportable, the auth modules still import and work."""
        import subprocess
        import sys

        root = Path(__file__).resolve().parents[3]
        result = subprocess.run(
            [sys.executable, "-c", BLOCK_TLS], cwd=root, capture_output=True, text=True, env={"PYTHONPATH": str(root)}
        )
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "True"), result.stderr)
