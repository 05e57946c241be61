# -*- test-case-name: tests.protocols.test_logs -*-
"""Logging what peers do without letting a peer write the log, or fill it.

Contract: L{escape} turns any text a peer supplied into one printable line:
every character that is not printable (controls, DEL, NEL, U+2028, U+2029,
ESC) and the backslash are written as Python escapes (C{\\x1b}), so the
line says exactly what was sent and nothing in it can start a line or move
a cursor.  Its cost is one C{str.isprintable} scan for ordinary text.

L{RefusalLog} is one connection's account of what it refused and what failed
on it: within each L{LogPolicy.interval}, the first L{LogPolicy.full} events
are logged in full and the rest only counted, then reported in one summary
line when the next event arrives after the interval (or when the connection
closes).  Refusals also count towards L{LogPolicy.maxRefusals}; a connection
past that many in one interval is to be dropped with a L{TooManyRefusals}
(an honest client does not send thousands of objects the server refuses).
Each event costs O(1) and at most one log line.

L{NamedLogger} is the logger a class keeps to log in a namespace of its
own (C{chunkwire.auth}, C{chunkwire.workers}, C{chunkwire.state}).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.logger import Logger, LogLevel

from framing._refusals import MAX_REFUSALS, REFUSAL_INTERVAL, RefusalRate, TooManyRefusals


class NamedLogger(Logger):
    """
    A C{twisted.logger.Logger} kept as a class attribute that logs in its own
    C{namespace} (C{chunkwire.auth}, ...): Twisted's, read through a class
    or an instance, logs in the class's dotted name instead.  Like
    Twisted's, it gives each read its own L{Logger}, whose C{source} is the
    instance (or the class).
    """

    def __get__(self, instance: object, owner: type | None = None) -> Logger:
        return Logger(self.namespace, owner if instance is None else instance, observer=self.observer)


MAX_LOGGED = 300
"""Characters of peer text kept in one log field; the rest is cut, with a mark."""


def escape(text: object, limit: int = MAX_LOGGED) -> str:
    """
    C{text} (or its C{str}) as one printable line, safe for any log: characters
    that are not printable, and backslashes, become Python escapes, and text
    past C{limit} characters is cut and marked.
    """
    value = text if isinstance(text, str) else _str(text)
    clipped = len(value) > limit
    if clipped:
        value = value[:limit]
    if not value.isprintable() or "\\" in value:
        value = "".join(_ESCAPED.get(c) or (c if c.isprintable() else _escapeOne(c)) for c in value)
    if clipped:
        value += "...(cut)"
    return value


_ESCAPED = {"\\": "\\\\"}


def _escapeOne(character: str) -> str:
    escaped = character.encode("unicode_escape").decode("ascii")
    if escaped == character:  # printable to unicode_escape but not to isprintable (e.g. U+2028 is not)
        escaped = f"\\u{ord(character):04x}"
    return escaped


def _str(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


@dataclass(frozen=True)
class LogPolicy:
    """
    How much one connection may make the server log, and refuse.

    @ivar full: events (refusals and failures together) logged in full per
        interval; the rest are counted and summarised.  10.
    @ivar interval: seconds in one counting interval.  10 s.
    @ivar maxRefusals: refusals in one interval past which the connection
        is dropped with C{too-many-refusals}; C{None} never drops.  1,000 in
        10 s: an honest client gets a refusal for a bug, not a hundred a
        second, while one flooding bad objects is dropped within its first
        thousand (the first one or two 64 KiB reads).
    """

    full: int = 10
    interval: float = REFUSAL_INTERVAL
    maxRefusals: int | None = MAX_REFUSALS


class RefusalLog:
    """
    One connection's rate-limited account of refusals and failures (see the
    module docstring).  It holds no reference to its connection: each call
    is given the C{Logger} to write to.

    @ivar rate: the count of refusals against L{LogPolicy.maxRefusals}
        (L{framing._refusals.RefusalRate}, the rule the sans-IO client session applies too).
    """

    def __init__(self, policy: LogPolicy, now: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._now = now
        self._start = now()
        self._logged = 0
        self._quiet: dict[str, int] = {}
        self.rate = RefusalRate(policy.maxRefusals, policy.interval, now)

    @property
    def refused(self) -> int:
        """Refusals in the current interval."""
        return self.rate.refused

    @property
    def total(self) -> int:
        """Refusals over the connection's life."""
        return self.rate.total

    def refusal(self, log: Any, peer: str, code: str, text: str, template: str | None = None, **fields: Any) -> bool:
        """
        Note one refusal (logged as C{"Refused ... from PEER: CODE: TEXT"} or
        with C{template} and C{fields}); C{text} is escaped here.

        @return: C{True} if the connection has now passed the policy's rate
            and should be dropped.
        """
        self._roll(log, peer)
        drop = self.rate.note()
        if self._allow(code):
            log.info(
                template or "Refused an object from {peer}: {code}: {violation}",
                peer=peer,
                code=code,
                violation=escape(text),
                **fields,
            )
        return drop

    def tooMany(self) -> TooManyRefusals:
        """The error to drop a connection with once L{refusal} said it passed the rate."""
        return self.rate.too_many()

    def failure(
        self, log: Any, peer: str, kind: str, template: str, level: LogLevel = LogLevel.info, **fields: Any
    ) -> None:
        """
        Log one failure of kind C{kind} at C{level} with C{template} and
        C{fields} (escaped by the caller), within the rate.  Failures do not
        count towards L{LogPolicy.maxRefusals}.
        """
        self._roll(log, peer)
        if self._allow(kind):
            log.emit(level, template, peer=peer, **fields)

    def close(self, log: Any, peer: str) -> None:
        """The connection is gone: write the summary of what was not logged, if anything."""
        self._summarise(log, peer)

    def _allow(self, kind: str) -> bool:
        if self._logged < self.policy.full:
            self._logged += 1
            return True
        self._quiet[kind] = self._quiet.get(kind, 0) + 1
        return False

    def _roll(self, log: Any, peer: str) -> None:
        now = self._now()
        if now - self._start >= self.policy.interval:
            self._summarise(log, peer)
            self._start = now
            self._logged = 0

    def _summarise(self, log: Any, peer: str) -> None:
        if not self._quiet:
            return
        quiet, self._quiet = self._quiet, {}
        counts = ", ".join(f"{kind}: {count}" for kind, count in sorted(quiet.items()))
        log.info(
            "{peer}: {count} more events not logged in {seconds:.1f} s ({counts})",
            peer=peer,
            count=sum(quiet.values()),
            seconds=self._now() - self._start,
            counts=counts,
        )
