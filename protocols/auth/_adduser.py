# -*- test-case-name: tests.protocols.auth.test_adduser -*-
"""C{chunkwire-adduser}: add or remove users in a user file, or make bearer tokens.

Contract::

    chunkwire-adduser [--iterations N] [--password-stdin] USERFILE NAME
    chunkwire-adduser --remove USERFILE NAME
    chunkwire-adduser --token TOKENFILE NAME          (prints the new token, once)
    chunkwire-adduser --token --remove TOKENFILE NAME

The password is asked twice without echo, or read as one line from
standard input with C{--password-stdin}; it is never written anywhere,
only its salted verifier.  A change made is said in one line on standard
output (on standard error with C{--token}, whose standard output is the
token alone), naming the user and the file, never the password.  Errors are one line on standard error; the
exit status is 0 on success, 1 when the change could not be made (a
mismatch, an empty password, an unknown name to remove, a bad file) and 2
for a bad command line (including a name the file cannot hold).
"""

from __future__ import annotations

import argparse
import sys
from getpass import getpass

from framing.login._scram import DEFAULT_ITERATIONS, MIN_ITERATIONS
from protocols.auth._secretfiles import SecretFileError
from protocols.auth._tokens import addToken, removeToken
from protocols.auth._users import InvalidName, addUser, checkName, removeUser

PROGRAM = "chunkwire-adduser"


class Refused(Exception):
    """The change cannot be made; the message is the one line to show (exit status 1)."""


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    p = argparse.ArgumentParser(prog=PROGRAM, description="Add or remove a user, or make a bearer token.")
    p.add_argument("file", metavar="FILE", help="the user file (or, with --token, the token file)")
    p.add_argument("name", metavar="NAME", help="the user name (or, with --token, the avatar id)")
    p.add_argument("--token", action="store_true", help="make a bearer token for NAME and print it once")
    p.add_argument("--remove", action="store_true", help="remove NAME instead")
    p.add_argument(
        "--password-stdin", dest="passwordStdin", action="store_true", help="read the password as one line from stdin"
    )
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="PBKDF2 rounds (default %(default)s)")
    return p


def readPassword(fromStdin: bool) -> bytes:
    """
    The new password's UTF-8: one line of standard input, or asked twice on the terminal.

    @raise Refused: the two entries differ, or the password is empty.
    """
    if fromStdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass("Password: ")
        if getpass("Password again: ") != password:
            raise Refused("the passwords do not match")
    if not password:
        raise Refused("the password is empty")
    return password.encode("utf-8")


def run(args: argparse.Namespace) -> None:
    """
    Make the change the command line asks for.

    @raise Refused: it cannot be made.
    """
    what = "the token of" if args.token else "user"
    if args.remove:
        remove = removeToken if args.token else removeUser
        if not remove(args.file, args.name):
            raise Refused(f"{args.name!r} is not in {args.file}")
        print(f"removed {what} {args.name!r} from {args.file}")
    elif args.token:
        print(addToken(args.file, args.name))
        # Standard output holds the token alone, for scripts to capture: the note goes to standard error.
        print(
            f"stored the digest of a new token for {args.name!r} in {args.file} (any earlier one is replaced);"
            " the token above is shown only this once",
            file=sys.stderr,
        )
    else:
        replaced = addUser(args.file, args.name, readPassword(args.passwordStdin), args.iterations)
        print(f"{'updated the password of' if replaced else 'added'} user {args.name!r} in {args.file}")


def main(argv: list[str] | None = None) -> int:
    """
    Run C{chunkwire-adduser} with C{argv} (default: the process's arguments).

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
    try:
        run(args)
    except (Refused, SecretFileError, OSError) as e:
        print(f"{PROGRAM}: error: {e}", file=sys.stderr)
        return 1
    except EOFError:
        print(f"{PROGRAM}: error: no password given", file=sys.stderr)
        return 1
    return 0


def commandLineProblem(args: argparse.Namespace) -> str | None:
    """What is wrong with a parsed command line that argparse cannot see, or C{None}."""
    try:
        checkName(args.name)
    except InvalidName as e:
        return str(e)
    if args.iterations < MIN_ITERATIONS:
        return f"--iterations must be at least {MIN_ITERATIONS}"
    return None


if __name__ == "__main__":
    sys.exit(main())
