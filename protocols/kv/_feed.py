# -*- test-case-name: tests.protocols.kv.test_sqlite,tests.protocols.kv.test_threads -*-
"""Telling one process's watchers of the changes any process made to a shared kv storage.

Contract: a L{ChangeFeed} reads a storage's
L{protocols.kv._storage.ChangeLog} in order, from the last change made when
it was created, and tells its L{protocols.kv._watches.WatchBook} of each
watched key's changes, once per batch, with the value they left (read in
their snapshot) and how many changes came before it (C{skipped}).  A log that pushes
(PostgreSQL's C{NOTIFY}) wakes it on every commit; one that cannot (SQLite)
is polled every L{POLL_INTERVAL} seconds.  A process's own put calls
L{ChangeFeed.catchUp}, so its own watchers hear of it before the put is
answered.  Changes older than L{RETENTION} seconds, or past
L{MAX_CHANGES}, are forgotten: a process that reads nothing that long
finds changes forgotten before it read them
(L{protocols.kv._storage.ChangeLog.forgottenUpTo}), cannot tell which keys
they changed, and closes every connection with a watch here
(L{protocols.kv._watches.WatchBook.lostTrack}; one log line), so that their
clients watch again.  A skipped number with nothing forgotten is no loss.

Cost: the log holds a number and a key per change, never a value; an idle
SQLite poll is one C{PRAGMA}; every log call runs in the store's threads
(L{protocols.kv._threads}), never the reactor's.

Design: docs/design/kv.md
"""

from __future__ import annotations

from collections import deque
from contextvars import Context
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from ._storage import ChangeLog, StoreUnavailable
from ._threads import InlineCalls, StorageCalls
from ._watches import WatchBook

POLL_INTERVAL = 0.05
"""Seconds between two looks at the change log: the longest a watcher waits for a change made through another worker."""

RETENTION = 60.0
"""Seconds a change is kept after this process read it, for the processes slower to read it."""

PRUNE_EVERY = 10.0
"""Seconds between two prunings of the change log by one process."""

BATCH = 1000
"""Most changes read in one query (a poll runs as many as it needs)."""

MAX_CHANGES = 100_000
"""Most changes the log keeps, whatever their age: a process that lags more misses some (and says so)."""

PUSHED_INTERVAL = 1.0
"""Seconds between two prunings' looks at the clock when the log pushes its changes (nothing is polled for)."""

TIDY_EVERY = 2.0
"""Seconds between two tidyings of the store's file (free pages given back, the WAL truncated), if anything changed."""


class ChangeFeed:
    """
    The changes of C{log}, told to C{watches}.

    @ivar last: the number of the last change read.
    @ivar missed: how many change numbers were forgotten before this process read them.
    @ivar pushed: whether the log pushes its changes (L{ChangeLog.listen}) instead of being polled.
    """

    log = Logger()

    def __init__(
        self,
        changes: ChangeLog,
        watches: WatchBook,
        clock: Any,
        interval: float = POLL_INTERVAL,
        retention: float = RETENTION,
        calls: StorageCalls | None = None,
    ) -> None:
        """@param calls: where the log's calls run (L{InlineCalls} if C{None}: on the caller's thread)."""
        self.changes = changes
        self.watches = watches
        self.clock = clock
        self.interval = interval
        self.retention = retention
        self.calls: StorageCalls = calls if calls is not None else InlineCalls()
        self.last = changes.lastChange()  # (once, as the store opens: before anything is served)
        self.missed = 0
        self.pushed = False
        # (when, the last change read then): what is RETENTION old is forgotten.
        self._marks: deque[tuple[float, int]] = deque()
        self._forgotten = 0
        self._tidied = (clock.seconds(), self.last)
        self._loop = LoopingCall(self.poll)
        self._loop.clock = clock
        self._waiting: list[Deferred[None]] = []
        self._reading = False

    def start(self) -> None:
        """
        Listen to the log if it can push its changes, else poll it every
        C{interval} seconds; prune and tidy it now and then; until L{stop}.
        """
        if not self._loop.running:
            self.pushed = self.changes.listen(self._heard)
            self._loop.start(PUSHED_INTERVAL if self.pushed else self.interval, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()
        self.changes.stopListening()

    def _heard(self) -> None:
        """(Any thread.)  The log says another process committed: catch up on the reactor thread."""
        self.clock.callFromThread(self.catchUp)

    def poll(self) -> Deferred[None]:
        """
        Read what other processes changed, if anything (unless the log
        pushes changes), and forget what is old; fires once done.  A failure
        (the database unreadable for a while) is logged and the next poll
        tries again: the loop must outlive it.
        """
        return Deferred.fromCoroutine(self._poll())

    async def _poll(self) -> None:
        try:
            if not self.pushed and await self.calls.run(self.changes.changedElsewhere):
                await self.catchUp()
            await self._prune()
            await self._tidy()
        except StoreUnavailable as error:
            self.log.warn(
                "reading the kv change log failed ({why}); trying again in {interval} s",
                why=str(error),
                interval=self.interval,
            )
        except Exception:
            self.log.failure("reading the kv change log failed; trying again in {interval} s", interval=self.interval)

    def catchUp(self) -> Deferred[None]:
        """
        Tell the watchers of every change since the last one read: per batch,
        each changed key that is watched once, in the order of its last
        change, with its value now and the count of its changes before.
        Fires once a reading that began after this call has ended (failed
        readings are logged: it never fails); one reading runs at a time,
        and the calls made meanwhile share the next.  The reading is this
        process's, not the caller's: its storage calls are nobody's turn
        (L{protocols.kv._threads}), so a caller whose peer reads nothing, or
        whose connection is gone, holds up no one else's put or watch.
        """
        done: Deferred[None] = Deferred()
        self._waiting.append(done)
        if not self._reading:
            self._reading = True
            Context().run(self._startReading)
        return done

    def _startReading(self) -> None:
        """(Run in an empty context: no remote call's broker.)"""
        Deferred.fromCoroutine(self._readWhileAsked())

    async def _readWhileAsked(self) -> None:
        try:
            while self._waiting:
                waiting, self._waiting = self._waiting, []
                try:
                    await self._read()
                except StoreUnavailable as error:
                    self.log.warn("reading the kv change log failed ({why})", why=str(error))
                except Exception:
                    self.log.failure("reading the kv change log failed")
                for done in waiting:
                    done.callback(None)
        finally:
            self._reading = False

    async def _read(self) -> None:
        """
        Read the changes since the last one read, a batch at a time, and tell
        each watched key's watchers once: its value as its last change read
        left it, read in the same snapshot as the changes (a value read
        later could be a newer change's, which would then be told with too
        few C{skipped}), after the count of its changes before.  A key
        watched only since that snapshot is not told: its watch read a value
        no older.
        """
        watches = self.watches
        told: dict[str, int] = {}
        while True:
            rows, values = await self.calls.run(
                self.changes.changesAndValues, self.last, BATCH, watches.watched, list(told)
            )
            if rows and rows[0][0] > self.last + 1:
                await self._checkForgotten()  # (only a first number can skip what was forgotten: a prefix goes)
            for sequence, key, _deleted in rows:
                if sequence <= self.last:
                    continue  # (forgotten, and told as lost, while this batch was read)
                self.last = sequence
                if watches.watched(key):
                    count = told.pop(key, 0)
                    told[key] = count + 1  # (popped and set again: the key moves to its last change's place)
            if values is not None:
                for key, count in told.items():
                    if key in values:
                        watches.notify(key, values[key], count - 1)
                return

    async def _checkForgotten(self) -> None:
        """
        If changes past the last one read were forgotten (by any process),
        skip them and close the connections watching here, whose watchers
        cannot be told which of their keys changed: one log line.
        """
        upTo = await self.calls.run(self.changes.forgottenUpTo)
        if upTo <= self.last:
            return
        count, first = upTo - self.last, self.last + 1
        self.last = upTo
        self.missed += count
        closed = self.watches.lostTrack()
        self.log.warn(
            "kv changes {first} to {upTo} were forgotten before this process read them; closing the {closed}"
            " connections with watches here, so that their clients watch again",
            first=first,
            upTo=upTo,
            closed=closed,
        )

    async def _prune(self) -> None:
        now = self.clock.seconds()
        marks = self._marks
        if not marks or now - marks[-1][0] >= PRUNE_EVERY:
            if marks:
                await self._checkForgotten()  # (changes forgotten while this process read nothing new)
            marks.append((now, self.last))
        upTo = 0
        while marks and now - marks[0][0] >= self.retention:
            upTo = marks.popleft()[1]
        upTo = max(upTo, self.last - MAX_CHANGES)
        if upTo > self._forgotten:
            await self.calls.run(self.changes.forgetChanges, upTo)
            self._forgotten = upTo

    async def _tidy(self) -> None:
        when, last = self._tidied
        now = self.clock.seconds()
        if now - when >= TIDY_EVERY and self.last != last:
            self._tidied = (now, self.last)
            await self.calls.run(self.changes.tidy)
