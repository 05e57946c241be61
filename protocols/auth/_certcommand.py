# -*- test-case-name: tests.protocols.auth.test_certcommand -*-
"""C{chunkwire-cert}: a CA of your own, and the client and server certificates it issues.

Contract::

    chunkwire-cert ca DIR [--name NAME] [--days N]
    chunkwire-cert client DIR USER [--out FILE] [--days N]
    chunkwire-cert server DIR HOST [HOST ...] [--out FILE] [--days N]

C{ca} makes a CA in DIR: its key C{DIR/ca.key} (mode 0600) and its
certificate C{DIR/certs/ca.pem}, which a server given C{--client-ca
DIR/certs} trusts.  C{client} issues a certificate whose common name is
C{USER}, the user a certificate login gives (a name every chunkwire service
can serve, one safe directory name); C{server} one naming
each HOST (and 127.0.0.1 and ::1).  Each writes the key and certificate to
one new file, mode 0600 (C{DIR/USER.pem} or C{DIR/server.pem} by default),
never replacing one; valid for C{--days} days (365).

Nothing secret is printed.  Errors are one line on standard error; the exit
status is 0 on success, 1 when the files could not be made (no C{tls}
extra, a file already there, no CA in DIR) and 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from protocols.auth._authority import CA_CERTIFICATE, CA_KEY, DEFAULT_DAYS, CertificateAuthority
from protocols.auth._identity import InsecureKeyFile
from protocols.auth._realms import UnsafeAvatarId, pathComponent
from protocols.auth._users import InvalidName, checkName

PROGRAM = "chunkwire-cert"

NO_TLS_EXTRA = "needs pyOpenSSL and cryptography: install chunkwire with its tls extra"
"""The one line said when the C{tls} extra is missing."""


class Refused(Exception):
    """The files cannot be made; the message is the one line to show (exit status 1)."""


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    p = argparse.ArgumentParser(prog=PROGRAM, description="Make a CA, and client and server certificates it issues.")
    commands = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    days: dict[str, Any] = {
        "type": int,
        "default": DEFAULT_DAYS,
        "help": "days the certificate is valid (default %(default)s)",
    }
    ca = commands.add_parser("ca", help="make a CA in DIR: DIR/ca.key, and DIR/certs/ for --client-ca")
    ca.add_argument("directory", metavar="DIR")
    ca.add_argument("--name", default="chunkwire CA", help="the CA's common name (default %(default)r)")
    ca.add_argument("--days", **days)
    client = commands.add_parser("client", help="issue a client certificate for USER, signed by the CA in DIR")
    client.add_argument("directory", metavar="DIR")
    client.add_argument("user", metavar="USER", help="the user it logs in as (its common name)")
    client.add_argument("--out", metavar="FILE", help="where to write key and certificate (default DIR/USER.pem)")
    client.add_argument("--days", **days)
    server = commands.add_parser("server", help="issue a server certificate for HOST, signed by the CA in DIR")
    server.add_argument("directory", metavar="DIR")
    server.add_argument("hosts", metavar="HOST", nargs="+", help="the host names (or addresses) clients connect to")
    server.add_argument("--out", metavar="FILE", help="where to write key and certificate (default DIR/server.pem)")
    server.add_argument("--days", **days)
    return p


def commandLineProblem(args: argparse.Namespace) -> str | None:
    """What is wrong with a parsed command line that argparse cannot see, or C{None}."""
    if args.days < 1:
        return f"--days is at least 1, not {args.days}"
    if args.command == "client":
        try:
            checkName(args.user)
            pathComponent(args.user)
        except (InvalidName, UnsafeAvatarId) as e:
            return f"{args.user!r} cannot be a user name: {e.args[0]}"
    return None


def loadAuthority(directory: Path) -> CertificateAuthority:
    """
    The CA in C{directory}.

    @raise Refused: there is none, or it cannot be used.
    """
    try:
        return CertificateAuthority.load(directory)
    except FileNotFoundError:
        raise Refused(f"no CA in {directory} (make one with: {PROGRAM} ca {directory})") from None
    except (InsecureKeyFile, ValueError, OSError) as e:
        raise Refused(str(e)) from None


def run(args: argparse.Namespace) -> list[str]:
    """
    Make the files the command line asks for.

    @return: the lines to print: what was written and how to use it.
    @raise Refused: they cannot be made.
    """
    directory = Path(args.directory)
    try:
        if args.command == "ca":
            if (directory / CA_KEY).exists():
                raise Refused(f"{directory / CA_KEY} exists: a CA is never replaced")
            trusted = CertificateAuthority.generate(args.name, days=args.days).save(directory)
            return [
                f"wrote {directory / CA_KEY} (the CA's key: keep it private) and {directory / CA_CERTIFICATE}",
                f"servers: --client-ca {trusted}",
            ]
        authority = loadAuthority(directory)
        if args.command == "client":
            issued = authority.issue(args.user, days=args.days)
            out = Path(args.out) if args.out else directory / f"{args.user}.pem"
            issued.writePEM(out, replace=False)
            return [
                f"wrote {out} (key and certificate of {args.user!r}: give it to that user only)",
                f"clients: ssl:host=HOST:port=PORT:certKey={out}:privateKey={out}:caCertsDir=SERVER-CA:hostname=HOST",
            ]
        issued = authority.issue(args.hosts[0], server=True, hostnames=args.hosts, days=args.days)
        out = Path(args.out) if args.out else directory / "server.pem"
        issued.writePEM(out, replace=False)
        return [
            f"wrote {out} (the server's key and certificate)",
            f"servers: --listen ssl:PORT:privateKey={out}",
            f"clients trust it with: caCertsDir={directory / CA_CERTIFICATE.parent}:hostname={args.hosts[0]}",
        ]
    except FileExistsError as e:
        raise Refused(f"{e.filename} exists; not replaced") from None
    except ValueError as e:
        # A host name cryptography cannot put in a certificate, say.
        raise Refused(str(e)) from None
    except OSError as e:
        raise Refused(f"{e.filename or directory}: {e.strerror or e}") from None


def tlsExtraInstalled() -> bool:
    """Whether cryptography and pyOpenSSL (the C{tls} extra) can be imported."""
    try:
        import cryptography.x509  # noqa: F401
        import OpenSSL  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """
    Run C{chunkwire-cert} with C{argv} (default: the process's arguments).

    @return: the exit status.
    """
    p = parser()
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    problem = commandLineProblem(args)
    if problem is not None:
        print(f"{PROGRAM}: error: {problem}", file=sys.stderr)
        return 2
    if not tlsExtraInstalled():
        print(f"{PROGRAM}: error: {NO_TLS_EXTRA}", file=sys.stderr)
        return 1
    try:
        lines = run(args)
    except Refused as e:
        print(f"{PROGRAM}: error: {e}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
