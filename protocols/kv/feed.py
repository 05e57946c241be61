"""Telling one process's watchers of the changes any process made to a shared kv storage.

Contract: a L{ChangeFeed} reads a storage's L{protocols.kv.storage.ChangeLog}
in order, from the last change made when it was created, and tells its
L{protocols.kv.watches.WatchBook} of the changes of each watched key.  The
log holds change notices (a number and a key), never values, so that it
costs the file a few dozen bytes per change whatever the values: the feed
tells each key's watchers once per batch of changes read, with the key's
value when it reads it (C{None} once deleted) and how many changes of that
key came before it in the batch (C{skipped}); changes of unwatched keys cost
one row's number and key.  It polls every
C{interval} seconds on the clock it is given (L{POLL_INTERVAL}: a watcher
in one worker hears of a put made through another within about that long),
and a poll in which no other process committed anything is one C{PRAGMA}.
A process's own put or delete calls L{ChangeFeed.catchUp} at once, so its
own watchers hear of it before the put is answered, in the order of the
log.  Every L{PRUNE_EVERY} seconds it forgets the changes it had read
L{RETENTION} seconds before, and all but the last L{MAX_CHANGES} (every
process does, each by its own clock): a
process that reads nothing for that long (blocked, or stopped) misses
changes, and says so in one log line.  Every L{TIDY_EVERY} seconds in
which something was written it has the log give the file's free space
back (L{protocols.kv.storage.ChangeLog.tidy}).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from .storage import ChangeLog
from .watches import WatchBook

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

TIDY_EVERY = 2.0
"""Seconds between two tidyings of the store's file (free pages given back, the WAL truncated), if anything changed."""


class ChangeFeed:
    """
    The changes of C{log}, told to C{watches}.

    @ivar last: the number of the last change read.
    @ivar missed: how many changes were forgotten before this process read them.
    """

    log = Logger()

    def __init__(
        self,
        changes: ChangeLog,
        watches: WatchBook,
        clock: Any,
        interval: float = POLL_INTERVAL,
        retention: float = RETENTION,
    ) -> None:
        self.changes = changes
        self.watches = watches
        self.clock = clock
        self.interval = interval
        self.retention = retention
        self.last = changes.lastChange()
        self.missed = 0
        # (when, the last change read then): what is RETENTION old is forgotten.
        self._marks: deque[tuple[float, int]] = deque()
        self._forgotten = 0
        self._tidied = (clock.seconds(), self.last)
        self._loop = LoopingCall(self.poll)
        self._loop.clock = clock

    def start(self) -> None:
        """Poll every C{interval} seconds until L{stop}."""
        if not self._loop.running:
            self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def poll(self) -> None:
        """
        Read what other processes changed, if anything, and forget what is
        old.  A failure (the database unreadable for a while) is logged and
        the next poll tries again: the loop must outlive it.
        """
        try:
            if self.changes.changedElsewhere():
                self.catchUp()
            self._prune()
            self._tidy()
        except Exception:
            self.log.failure("reading the kv change log failed; trying again in {interval} s", interval=self.interval)

    def catchUp(self) -> None:
        """
        Tell the watchers of every change since the last one read: per batch,
        each changed key that is watched once, in the order of its last
        change, with its value now and the count of its changes before.
        """
        watches = self.watches
        while True:
            rows = self.changes.changesSince(self.last, BATCH)
            told: dict[str, int] = {}
            for sequence, key, _deleted in rows:
                if sequence > self.last + 1:
                    self._missed(sequence - self.last - 1)
                self.last = sequence
                if watches.watched(key):
                    count = told.pop(key, 0)
                    told[key] = count + 1  # (popped and set again: the key moves to its last change's place)
            for key, count in told.items():
                watches.notify(key, watches.current(key), count - 1)
            if len(rows) < BATCH:
                return

    def _missed(self, count: int) -> None:
        self.missed += count
        self.log.warn(
            "{count} kv changes were forgotten before this process read them: their watchers here missed them",
            count=count,
        )

    def _prune(self) -> None:
        now = self.clock.seconds()
        marks = self._marks
        if not marks or now - marks[-1][0] >= PRUNE_EVERY:
            marks.append((now, self.last))
        upTo = 0
        while marks and now - marks[0][0] >= self.retention:
            upTo = marks.popleft()[1]
        upTo = max(upTo, self.last - MAX_CHANGES)
        if upTo > self._forgotten:
            self.changes.forgetChanges(upTo)
            self._forgotten = upTo

    def _tidy(self) -> None:
        when, last = self._tidied
        now = self.clock.seconds()
        if now - when >= TIDY_EVERY and self.last != last:
            self._tidied = (now, self.last)
            self.changes.tidy()
