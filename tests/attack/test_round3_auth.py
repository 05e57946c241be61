"""Issue 28, round three, the login items: attacks on the real kv server (example and C{twist} plugin) as processes.

Each attacker is blocking sockets (L{tests.attack.attacks_round3_auth});
each honest client is its own process logging in and checking its answers.
No timing ratio is asserted: outcomes (salts shown, checks run, logins
accepted, log lines written) with deadlines only a hang misses.  The
bounds that need ten thousand addresses, and the count of work done per
login, are checked in this process against the same code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from twisted.cred.credentials import UsernamePassword
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing.login import _scram as scram
from framing.login._scram import DEFAULT_ITERATIONS, ScramClient, ScramServer
from protocols.auth._sharedthrottle import SQLiteThrottleState
from protocols.auth._throttle import LoginThrottle
from protocols.auth._users import UserFile, addUser, decoyKeyPath

from ..processes import ENV, ROOT
from .attacks_round3_auth import guess, halfOpen, probe

PASSWORD = "correct horse battery"
ITERATIONS = {"ada": 4096, "bob": 5000}
"""Two users with different counts: unknown names must show both, as often as the users have them."""


def makeUsers(directory: str) -> Path:
    users = Path(directory) / "users"
    for name, count in ITERATIONS.items():
        addUser(users, name, PASSWORD.encode(), iterations=count)
    return users


class Server:
    """A server process logging to a file (never to a pipe that could fill)."""

    def __init__(self, command: list[str], log: Path, pattern: bytes) -> None:
        self.logPath = log
        self._log = open(log, "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60  # only a hang misses it, however loaded the machine
        while True:
            match = re.search(pattern, log.read_bytes())
            if match:
                self.match = match
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the server did not start: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)

    def text(self) -> str:
        return self.logPath.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def exampleServer(users: Path, log: Path, *extra: str) -> tuple[Server, int]:
    """examples/kv_server.py with --users, logging to C{log}; the server and its port."""
    command = [sys.executable, "examples/kv_server.py", "--listen", "tcp:0:interface=127.0.0.1:backlog=512"]
    command += ["--users", str(users), "--log", "--max-per-peer=1000", "--grace", "1", *extra]
    server = Server(command, log, rb"listening on .* port=(\d+)\)")
    return server, int(server.match.group(1))


def twistWorkers(users: Path, log: Path) -> tuple[Server, int]:
    """
    twist chunkwire-kv --workers 2 --users (and a --store beside them) on
    port 0, once both workers serve; the server and the port its supervisor
    bound (from its log: no port is picked here for it to bind later).
    """
    command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv", "--users", str(users)]
    command += ["--store", str(users.parent / "kv.sqlite")]
    command += ["--listen", "tcp:0:interface=127.0.0.1", "--workers", "2", "--grace", "1", "--max-per-peer=1000"]
    # Each worker logs BrokerFactory starting on the port once it has adopted the socket and serves.
    server = Server(command, log, rb"starting on (\d+)[\s\S]*BrokerFactory starting on[\s\S]*BrokerFactory starting on")
    return server, int(server.match.group(1))


def honest(port: int, user: str, count: int, pause: float = 0.05) -> subprocess.Popen[str]:
    """The honest client process: C{count} logins as C{user}, each with a put and a get checked."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.attack.attacks_round3_auth", "honest", str(port), user, f"--count={count}"]
        + [f"--pause={pause}"],
        cwd=ROOT,
        env=dict(ENV, CHUNKWIRE_PASSWORD=PASSWORD),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def honestResult(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0 and out.strip(), err[-2000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


UNKNOWN = [f"nobody-{number}" for number in range(40)]
ATTACKER = "127.0.0.9"
"""An address of the loopback network that is not the honest client's (127.0.0.1)."""


class EnumerationTests(SynchronousTestCase):
    """Item 5: an unknown name's salt and count look like a user's, across restarts and workers."""

    def test_decoys_stable_across_restart(self) -> None:
        """
        An unknown name shows the same salt after a restart; unknown names
        show every count real users have (and no other); the honest client's answers are all right.
        """
        with tempfile.TemporaryDirectory() as directory:
            users = makeUsers(directory)
            shown = []
            for run in range(2):
                server, port = exampleServer(users, Path(directory) / f"server{run}.log")
                try:
                    # From one loopback address per name: this item is about what is shown, not the throttle.
                    names = [*UNKNOWN, "ada", "bob"]
                    shown.append({name: probe(port, name, f"127.0.1.{i + 1}") for i, name in enumerate(names)})
                    client = honest(port, "ada", 2)
                    result = honestResult(client)
                finally:
                    server.stop()
                assert result["ok"] == 2 and not result["refused"] and not result["wrong"], result
            first, second = shown
            assert first == second, [(n, first[n], second[n]) for n in first if first[n] != second[n]][:3]
            assert (first["ada"][1], first["bob"][1]) == (4096, 5000)  # type: ignore[index]
            counts = {first[name][1] for name in UNKNOWN}  # type: ignore[index]
            assert counts == set(ITERATIONS.values()), counts
            assert len({first[name][0] for name in UNKNOWN}) == len(UNKNOWN)  # type: ignore[index]
            mode = os.stat(decoyKeyPath(users)).st_mode & 0o777
            assert mode == 0o600, oct(mode)

    def test_workers_share_decoys_and_throttle(self) -> None:
        """
        Item 7: with --workers 2, an unknown name shows one salt whichever
        worker answers, and thirty wrong guesses from one address get the
        checks one process would allow (burst 10, plus what drained), not twice that.
        """
        with tempfile.TemporaryDirectory() as directory:
            users = makeUsers(directory)
            server, port = twistWorkers(users, Path(directory) / "twist.log")
            try:
                salts = {probe(port, "nobody", f"127.0.2.{number}") for number in range(1, 17)}
                started = time.monotonic()
                outcomes = [guess(port, f"name-{number}", b"wrong") for number in range(30)]
                elapsed = time.monotonic() - started
                result = honestResult(honest(port, "bob", 1))
                text = server.text()
            finally:
                server.stop()
            pids = set(re.findall(r"worker \d started: pid (\d+)", text))
            assert len(pids) == 2, text[-2000:]
            assert len(salts) == 1, salts
            checked = outcomes.count("refused")
            allowed = 10 + math.ceil(elapsed * 0.5) + 1
            assert checked + outcomes.count("throttled") == 30, outcomes
            assert checked <= allowed, (checked, allowed, elapsed)
            assert result["refused"] + result["ok"] == 1 and not result["wrong"], result
            assert os.path.exists(str(users) + ".throttle")


class SharedAddressTests(SynchronousTestCase):
    """Item 6: guesses at other names from the honest client's own address do not refuse its logins."""

    def test_honest_user_behind_a_shared_address(self) -> None:
        """
        An attacker on the honest client's address guesses at other names
        throughout its logins: every honest login is accepted and answers
        right, while the attacker gets no more checks than the throttle allows.
        """
        with tempfile.TemporaryDirectory() as directory:
            users = makeUsers(directory)
            server, port = exampleServer(users, Path(directory) / "server.log")
            try:
                first = honestResult(honest(port, "ada", 1))  # the user has logged in from here before
                assert first["ok"] == 1, first
                outcomes: list[str] = []
                stopAttack = threading.Event()

                def attack() -> None:
                    number = 0
                    while not stopAttack.is_set():
                        outcomes.append(guess(port, f"victim-{number % 7}", b"guess %d" % number))
                        number += 1

                attacker = threading.Thread(target=attack, daemon=True)
                started = time.monotonic()
                attacker.start()
                deadline = time.monotonic() + 60
                while len(outcomes) < 3 and time.monotonic() < deadline:  # the attack is under way (3 guesses made)
                    time.sleep(0.01)
                client = honest(port, "ada", 20, pause=0.05)
                result = honestResult(client)
                stopAttack.set()
                attacker.join(20)
                elapsed = time.monotonic() - started
            finally:
                server.stop()
            assert result == {**result, "ok": 20, "refused": 0, "wrong": 0, "errors": []}, result
            checked = outcomes.count("refused")
            assert outcomes.count("throttled") > 0 and checked <= 10 + math.ceil(elapsed * 0.5) + 1, (
                checked,
                len(outcomes),
                elapsed,
            )


class RefusalLogTests(SynchronousTestCase):
    """Bounded: refused logins, however many, write a bounded number of log lines."""

    def test_refusal_flood_log_bounded(self) -> None:
        """
        Three hundred half-open SCRAM logins and a thousand throttled ones
        from one address write at most ten full lines per ten seconds plus
        summaries, not one each; an honest client from another address gets in meanwhile.
        """
        with tempfile.TemporaryDirectory() as directory:
            users = makeUsers(directory)
            server, port = exampleServer(users, Path(directory) / "server.log")
            try:
                before = server.text().count("\n")
                started = time.monotonic()
                opened, challenged = halfOpen(port, "ada", 300, ATTACKER)
                halfOpenSeconds = time.monotonic() - started
                outcomes = [guess(port, "mallory", b"x", ATTACKER) for _ in range(1000)]
                for raw in opened:
                    raw.close()
                result = honestResult(honest(port, "bob", 2))
                elapsed = time.monotonic() - started
                time.sleep(0.5)
                text = server.text()
            finally:
                server.stop()
            lines = text.count("\n") - before
            refusedLines = text.count("login refused")
            windows = 1 + math.ceil(elapsed / 10)
            # The throttle's burst of 10, plus what drained (0.5 a second) while the half-open logins were made:
            # on a loaded machine they take seconds.
            allowed = 10 + math.ceil(halfOpenSeconds * 0.5) + 1
            assert challenged <= allowed and outcomes.count("throttled") >= 900, (
                challenged,
                allowed,
                outcomes.count("refused"),
            )
            assert refusedLines <= 10 * windows, refusedLines
            # Besides the full lines: the honest logins and logouts, summaries, start-up.
            assert lines <= 10 * windows + 60, (lines, text[-3000:])
            assert result["ok"] == 2 and not result["wrong"], result


class ThrottleBoundTests(SynchronousTestCase):
    """Bounded: the throttle's table cannot be flushed by a flood of other addresses."""

    def flood(self, throttle: LoginThrottle, clock: Clock, addresses: int) -> None:
        for number in range(addresses):
            throttle.admit(f"10.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}", f"n{number}")
            if number % 1000 == 0:
                clock.advance(1.0)

    def test_flood_keeps_the_guessers_bucket(self) -> None:
        """A guesser with a full bucket stays refused after 20,050 other addresses pass through a 10,000-entry table."""
        clock = Clock()
        throttle = LoginThrottle(clock, burst=10, rate=0.5, maxAddresses=10_000)
        admitted = sum(throttle.admit("192.0.2.1", f"user{n}") for n in range(20))
        assert admitted == 10
        self.flood(throttle, clock, 20_050)
        assert len(throttle) == 10_000
        # 21 s passed: the bucket drained by 10 * 0.5 ... the guesser gets only what drained, not a new burst.
        drained = math.floor(clock.seconds() * 0.5)
        assert sum(throttle.admit("192.0.2.1", f"other{n}") for n in range(20)) <= min(10, drained)
        assert not throttle.admit("192.0.2.1", "again")

    def test_flood_keeps_the_guessers_bucket_shared(self) -> None:
        """The same in the workers' SQLite state (a smaller table: 600 addresses through 200 rows)."""
        clock = Clock()
        with tempfile.TemporaryDirectory() as directory:
            state = SQLiteThrottleState(os.path.join(directory, "t"), maxAddresses=200, maxPairs=200)
            throttle = LoginThrottle(clock, state=state)
            assert sum(throttle.admit("192.0.2.1", f"user{n}") for n in range(20)) == 10
            for number in range(600):
                throttle.admit(f"10.0.{number >> 8}.{number & 255}", "x")
            assert len(throttle) == 200 and not throttle.admit("192.0.2.1", "again")
            state.close()

    def test_trusted_name_passes_a_full_address(self) -> None:
        """A name that logged in from an address gets in past that address's full bucket; a new name does not."""
        throttle = LoginThrottle(Clock(), burst=3)
        assert throttle.admit("nat", "ada")
        throttle.succeeded("nat", "ada")
        assert [throttle.admit("nat", f"guess{n}") for n in range(4)] == [True, True, True, False]
        assert throttle.admit("nat", "ada") and not throttle.admit("nat", "eve")
        assert [throttle.admit("nat", "ada") for _ in range(3)] == [True, True, False]  # its own bucket still holds


class SameWorkTests(SynchronousTestCase):
    """Item 5, timing: a known and an unknown name cost the same operations (counted, not timed)."""

    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory, True)
        self.users = UserFile(makeUsers(self.directory))
        self.hmacs = 0
        self.derivations: list[int] = []
        realHmac, realSalted = scram._hmac, scram.saltedPassword

        def countedHmac(key: bytes, message: bytes) -> bytes:
            self.hmacs += 1
            return realHmac(key, message)

        def countedSalted(password: bytes, salt: bytes, iterations: int) -> bytes:
            self.derivations.append(iterations)
            return realSalted(password, salt, iterations)

        self.patch(scram, "_hmac", countedHmac)
        self.patch(scram, "saltedPassword", countedSalted)

    def scramLogin(self, name: str) -> tuple[int, bool]:
        """The server's HMACs for one SCRAM login as C{name} with a wrong password, and its outcome."""
        client = ScramClient(name, b"wrong")
        server = ScramServer(self.users.scramVerifier, b"unused")
        first = server.first(client.first())
        final = client.final(first)
        self.hmacs = 0
        refused = self.users.requestAvatarId(server.response(final))
        counted = self.hmacs
        failures: list[Any] = []
        refused.addErrback(failures.append)
        return counted, bool(failures)

    def test_scram_same_hmacs(self) -> None:
        """Looking up a known and an unknown name, and checking a wrong proof for each, run the same HMACs."""
        self.hmacs = 0
        self.users.scramVerifier("ada")
        known = self.hmacs
        self.hmacs = 0
        self.users.scramVerifier("nobody")
        assert known == self.hmacs > 0
        assert self.scramLogin("ada") == self.scramLogin("nobody") == (self.scramLogin("bob")[0], True)

    def test_password_same_derivation(self) -> None:
        """A wrong plain password costs one PBKDF2 at the count the name shows, known or not."""
        for name in ("ada", "nobody-1", "nobody-2"):
            self.derivations.clear()
            self.users.requestAvatarId(UsernamePassword(name.encode(), b"wrong")).addErrback(lambda _: None)
            assert self.derivations == [self.users.scramVerifier(name).iterations], (name, self.derivations)
            assert DEFAULT_ITERATIONS not in self.derivations
        assert hashlib  # the derivation is the stdlib's pbkdf2_hmac, counted through saltedPassword
