"""chunkwire-cert and protocols.auth._authority: a CA of one's own, whose client certificates log in to servers."""

from __future__ import annotations

import datetime
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.cred.portal import Portal
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols.auth import ClientCertificate, LoginRefused
from protocols.auth import _certcommand as command
from protocols.auth._authority import CA_CERTIFICATE, CA_KEY, CertificateAuthority
from protocols.auth._certificates import CertificateChecker, commonName, requireClientCertificates
from protocols.auth._identity import InsecureKeyFile
from protocols.auth._tlsendpoints import loadCADirectory
from protocols.rpc._options import ServerOptions

from ..helpers import pytestTest, trialTest
from .test_tls_logins import Realm, expectFailure
from .tlspeers import removeDirectory, shortDirectory

ROOT = Path(__file__).resolve().parents[3]


def _x509(pem: bytes) -> Any:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem)


def cert(*argv: str) -> tuple[int, str, str]:
    """Run chunkwire-cert's main() with C{argv}: its exit status, standard output and standard error."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        status = command.main(list(argv))
    finally:
        sys.stdout, sys.stderr = saved
    return status, stdout.getvalue(), stderr.getvalue()


class AuthorityTests(SynchronousTestCase):
    """A CA kept on disk: its key private, its certificate in a directory of its own, validity as asked."""

    def setUp(self) -> None:
        self.directory = Path(self.mktemp())

    def test_saveAndLoad(self) -> None:
        """save() writes ca.key (0600) and certs/ca.pem (the only *.pem a server reads); load() gives the same CA."""
        ca = CertificateAuthority.generate("Ops CA")
        trusted = ca.save(self.directory)
        self.assertEqual(trusted, self.directory / "certs")
        self.assertEqual((self.directory / CA_KEY).stat().st_mode & 0o777, 0o600)
        self.assertEqual([path.name for path in trusted.iterdir()], ["ca.pem"])
        self.assertNotIn(b"PRIVATE KEY", (self.directory / CA_CERTIFICATE).read_bytes())
        self.assertEqual(len(loadCADirectory(trusted)), 1)
        loaded = CertificateAuthority.load(self.directory)
        self.assertEqual((loaded.name, loaded.certPEM, loaded.keyPEM), ("Ops CA", ca.certPEM, ca.keyPEM))

    def test_neverOverwritten(self) -> None:
        """Saving a second CA where one is kept fails, and the first CA's key stays."""
        first = CertificateAuthority.generate()
        first.save(self.directory)
        self.assertRaises(FileExistsError, CertificateAuthority.generate().save, self.directory)
        self.assertEqual(CertificateAuthority.load(self.directory).keyPEM, first.keyPEM)

    def test_loadRefusesAnOpenKey(self) -> None:
        """A CA key readable by group or others is refused (InsecureKeyFile), as a server key is."""
        CertificateAuthority.generate().save(self.directory)
        (self.directory / CA_KEY).chmod(0o640)
        self.assertRaises(InsecureKeyFile, CertificateAuthority.load, self.directory)

    def test_loadRefusesAMismatch(self) -> None:
        """A certificate that is not the key's is a ValueError naming both files."""
        CertificateAuthority.generate().save(self.directory)
        (self.directory / CA_CERTIFICATE).write_bytes(CertificateAuthority.generate().certPEM)
        error = self.assertRaises(ValueError, CertificateAuthority.load, self.directory)
        self.assertIn(CA_KEY, str(error))

    def test_validity(self) -> None:
        """A CA and what it issues are valid for the days asked (a year by default); less than a day is refused."""
        ca = CertificateAuthority.generate(days=30)
        for pem, days in ((ca.certPEM, 30), (ca.issue("ada").certPEM, 365), (ca.issue("ada", days=2).certPEM, 2)):
            certificate = _x509(pem)
            span = certificate.not_valid_after_utc - certificate.not_valid_before_utc
            self.assertEqual(span, datetime.timedelta(days=days, minutes=5))
        self.assertRaises(ValueError, ca.issue, "ada", days=0)

    def test_writePEMIsPrivateFromTheStart(self) -> None:
        """writePEM creates its file 0600 (never wider, even for a moment); without replace an existing file stays."""
        issued = CertificateAuthority.generate().issue("ada")
        path = self.directory.with_suffix(".pem")
        created: list[int] = []
        import os

        realOpen = os.open

        def recordingOpen(file: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
            created.append(mode)
            return realOpen(file, flags, mode, **kwargs)

        self.patch(os, "open", recordingOpen)
        issued.writePEM(path)
        self.assertEqual((created, path.stat().st_mode & 0o777), ([0o600], 0o600))
        self.assertEqual(path.read_bytes(), issued.keyPEM + issued.certPEM)
        self.assertRaises(FileExistsError, CertificateAuthority.generate().issue("bob").writePEM, path, replace=False)
        self.assertEqual(path.read_bytes(), issued.keyPEM + issued.certPEM)


class CommandTests(SynchronousTestCase):
    """chunkwire-cert ca, client and server make the files, say how to use them, and refuse what they must."""

    def setUp(self) -> None:
        self.work = Path(self.mktemp())
        self.work.mkdir()
        self.ca = self.work / "ca"

    def test_ca(self) -> None:
        """ca DIR makes a CA there and names the directory to give --client-ca; a second ca in DIR is refused."""
        status, out, err = cert("ca", str(self.ca), "--name", "Ops CA", "--days", "10")
        self.assertEqual((status, err), (0, ""))
        self.assertIn(f"--client-ca {self.ca / 'certs'}", out)
        self.assertNotIn("PRIVATE", out)
        self.assertEqual(CertificateAuthority.load(self.ca).name, "Ops CA")
        status, out, err = cert("ca", str(self.ca))
        self.assertEqual((status, out), (1, ""))
        self.assertIn("never replaced", err)

    def test_client(self) -> None:
        """client DIR USER writes DIR/USER.pem (0600): a clientAuth certificate named USER, signed by the CA."""
        cert("ca", str(self.ca))
        status, out, err = cert("client", str(self.ca), "ada", "--days", "7")
        self.assertEqual((status, err), (0, ""))
        path = self.ca / "ada.pem"
        self.assertIn(f"certKey={path}", out)
        self.assertEqual(path.stat().st_mode & 0o777, 0o600)
        certificate = _x509(path.read_bytes())
        self.assertEqual(commonName(certificate), b"ada")
        certificate.verify_directly_issued_by(_x509((self.ca / CA_CERTIFICATE).read_bytes()))
        self.assertEqual(certificate.not_valid_after_utc - certificate.not_valid_before_utc, datetime.timedelta(7, 300))
        status, _, err = cert("client", str(self.ca), "ada")
        self.assertEqual(status, 1)
        self.assertIn("exists; not replaced", err)

    def test_server(self) -> None:
        """server DIR HOST... writes a serverAuth certificate naming every host, 127.0.0.1 and ::1, to --out."""
        from cryptography import x509

        cert("ca", str(self.ca))
        out = self.work / "web.pem"
        status, printed, err = cert("server", str(self.ca), "example.test", "10.0.0.7", "--out", str(out))
        self.assertEqual((status, err), (0, ""))
        self.assertIn(f"privateKey={out}", printed)
        names = _x509(out.read_bytes()).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(names.get_values_for_type(x509.DNSName), ["example.test"])
        self.assertEqual([str(a) for a in names.get_values_for_type(x509.IPAddress)], ["10.0.0.7", "127.0.0.1", "::1"])

    def test_refused(self) -> None:
        """No CA in DIR, a user name a service cannot serve, and --days 0 are one-line errors, nothing written."""
        status, _, err = cert("client", str(self.ca), "ada")
        self.assertEqual(status, 1)
        self.assertIn(f"no CA in {self.ca}", err)
        cert("ca", str(self.ca))
        for bad in ("../etc", "a:b", ".hidden", " ada"):
            status, _, err = cert("client", str(self.ca), bad)
            self.assertEqual(status, 2, bad)
            self.assertEqual(err.count("\n"), 1, err)
        self.assertEqual(cert("server", str(self.ca), "localhost", "--days", "0")[0], 2)
        self.assertEqual(sorted(path.name for path in self.ca.iterdir()), ["ca.key", "certs"])

    def test_withoutTLSExtra(self) -> None:
        """Without pyOpenSSL and cryptography the command says so in one line and exits 1."""
        script = (
            "import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('OpenSSL', 'cryptography'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from protocols.auth._certcommand import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", script, "ca", str(self.ca)], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr, f"chunkwire-cert: error: {command.NO_TLS_EXTRA}\n")
        self.assertFalse(self.ca.exists())


class HowtoTests(SynchronousTestCase):
    """The TLS how-to's chunkwire-cert commands run as shown and make the files its comments name."""

    def test_commandsAsShown(self) -> None:
        """Each chunkwire-cert line of docs/howto/tls.rst succeeds; twist chunkwire-kv takes the files it shows."""
        import os
        import re
        import shlex

        page = (ROOT / "docs" / "howto" / "tls.rst").read_text("utf-8")
        lines = re.findall(r"^   (chunkwire-cert .*)$", page, re.MULTILINE)
        self.assertEqual(len(lines), 3, lines)
        work = Path(self.mktemp()).resolve()
        work.mkdir()
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(work)
        for line in lines:
            commandLine, _, comment = line.partition("#")
            status, _, err = cert(*shlex.split(commandLine)[1:])
            self.assertEqual(status, 0, f"{line}: {err}")
            for named in re.findall(r"[\w-]+/[\w./-]+\.(?:pem|key)", comment):
                self.assertTrue((work / named).is_file(), f"{line}: no {named}")
        twist = re.search(r"twist chunkwire-kv (--client-ca \S+) \\\n\s+(--listen \S+)", page)
        assert twist is not None, "the how-to shows no twist command"
        from twisted.plugins import chunkwire_plugins

        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions([*twist.group(1).split(), *twist.group(2).split()])
        self.assertTrue(options.logins().required)


async def loginWithMadeCertificates(reactor: Any) -> None:
    """
    Certificates made by chunkwire-cert log a client in by its certificate
    to a server with --client-ca, as the certificate's user; a certificate
    from another CA the tool made never gets past the TLS handshake.
    """
    directory = shortDirectory()
    try:
        ca, other = directory / "ca", directory / "other"
        for argv in (
            ("ca", str(ca)),
            ("server", str(ca), "localhost"),
            ("client", str(ca), "ada"),
            ("ca", str(other)),
            ("client", str(other), "ada"),
        ):
            status, _, err = cert(*argv)
            assert status == 0, err
        trusted = ca / "certs"
        listen = requireClientCertificates(f"ssl:0:interface=127.0.0.1:privateKey={ca / 'server.pem'}", trusted)
        factory = rpc.serverFactory(
            clock=reactor, options=ServerOptions(portal=Portal(Realm(), [CertificateChecker()]))
        )
        port = await serverFromString(reactor, listen).listen(factory)
        try:

            def client(pem: Path) -> Any:
                return clientFromString(
                    reactor,
                    f"ssl:host=127.0.0.1:port={port.getHost().port}:certKey={pem}:privateKey={pem}"
                    f":caCertsDir={trusted}:hostname=localhost",
                )

            root = await rpc.login(reactor, client(ca / "ada.pem"), ClientCertificate())
            assert await root.callRemote("whoami") == b"ada"
            await root.broker.disconnect()
            error = await expectFailure(rpc.login(reactor, client(other / "ada.pem"), ClientCertificate()))
            assert not isinstance(error, LoginRefused), error
        finally:
            await port.stopListening()
            await factory.disconnectAll()
    finally:
        removeDirectory(directory)


class MadeCertificateLoginTests(TestCase):
    """Over real TLS on loopback (trial runs this; pytest runs the twin below)."""

    timeout = 30
    test_loginWithMadeCertificates = trialTest(loginWithMadeCertificates)


test_login_with_made_certificates = pytestTest(loginWithMadeCertificates)


class TestingHelperTests(SynchronousTestCase):
    """The tests' CA helper is the library's, so what the tests prove of it holds for chunkwire-cert."""

    def test_same(self) -> None:
        """protocols.testing.CertificateAuthority is protocols.auth._authority.CertificateAuthority."""
        from protocols import testing

        self.assertIs(testing.CertificateAuthority, CertificateAuthority)
