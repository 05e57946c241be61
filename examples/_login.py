"""What the example clients share to log in: --user, --password-file, --token-file and --certificate-login.

Contract: L{addLoginArguments} adds the options; L{credentialsFrom} turns
them into the credentials C{rpc.login} takes, or C{None} (no login, for an
open server).  The password is read from --password-file (its first
line), else the environment variable C{CHUNKWIRE_PASSWORD}, else asked on
the terminal without echo, before the program connects; it is never printed.  A refused login is shown
by L{_errors.explain} as one line.
"""

from __future__ import annotations

import argparse
import os
from getpass import getpass
from typing import Any

PASSWORD_VARIABLE = "CHUNKWIRE_PASSWORD"


def addLoginArguments(parser: argparse.ArgumentParser) -> None:
    """Add the login options (one way to log in at most)."""
    ways = parser.add_mutually_exclusive_group()
    ways.add_argument("--user", metavar="NAME", help="log in as NAME with a password (SCRAM-SHA-256)")
    ways.add_argument("--token-file", dest="tokenFile", metavar="FILE", help="log in with the bearer token in FILE")
    ways.add_argument(
        "--certificate-login",
        dest="certificateLogin",
        action="store_true",
        help="log in as the TLS client certificate given in --connect (ssl:...:certKey=...:privateKey=...)",
    )
    parser.add_argument(
        "--password-file",
        dest="passwordFile",
        metavar="FILE",
        help=f"with --user: the password is this file's first line (else ${PASSWORD_VARIABLE}, else asked)",
    )


def _checkCombinations(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.passwordFile is not None and args.user is None:
        parser.error("--password-file goes with --user")
    if args.certificateLogin and not args.connect.startswith("ssl:"):
        parser.error("--certificate-login needs an ssl: --connect endpoint with certKey= and privateKey=")


def firstLine(path: str) -> str:
    """The first line of the file at C{path}, without its line ending."""
    with open(path, encoding="utf-8") as file:
        return file.readline().rstrip("\r\n")


def password(args: argparse.Namespace) -> bytes:
    """The password of C{--user}: from --password-file, the environment, or the terminal."""
    if args.passwordFile is not None:
        text = firstLine(args.passwordFile)
    elif PASSWORD_VARIABLE in os.environ:
        text = os.environ[PASSWORD_VARIABLE]
    else:
        text = getpass(f"Password for {args.user}: ")
    return text.encode("utf-8")


def credentialsFrom(parser: argparse.ArgumentParser, args: argparse.Namespace, plain: bool = False) -> Any:
    """
    The credentials the options name, or C{None} to connect without logging
    in; options that do not go together, or a file that cannot be read,
    stop the program with a one-line usage error.  With C{plain}, they are
    those of the clients without Twisted (C{framing.login}'s C{Password},
    C{Token}, C{ClientCertificate}), whose import loads no Twisted.
    """
    _checkCombinations(parser, args)
    try:
        return _plainCredentials(args) if plain else _credentials(args)
    except (OSError, UnicodeDecodeError) as error:
        parser.error(f"cannot read the password or token file: {error}")


def _plainCredentials(args: argparse.Namespace) -> Any:
    if args.user is None and args.tokenFile is None and not args.certificateLogin:
        return None  # (before the import: a command that logs in to nothing loads no login machinery)
    from framing.login import ClientCertificate, Password, Token

    if args.user is not None:
        return Password(args.user, password(args))
    if args.tokenFile is not None:
        return Token(firstLine(args.tokenFile).strip().encode("utf-8"))
    return ClientCertificate() if args.certificateLogin else None


def _credentials(args: argparse.Namespace) -> Any:
    if args.user is not None:
        from twisted.cred.credentials import UsernamePassword

        return UsernamePassword(args.user.encode("utf-8"), password(args))
    if args.tokenFile is not None:
        from protocols.auth import BearerToken

        return BearerToken(firstLine(args.tokenFile).strip().encode("utf-8"))
    if args.certificateLogin:
        from protocols.auth import ClientCertificate

        return ClientCertificate()
    return None
