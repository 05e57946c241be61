"""The cluster run's history of calls, the checks made on it, and the figures drawn from it.

A history is a list of records (dicts, as the workload writes them, one
JSON object a line; times are C{time.monotonic()}, which every network
namespace of one machine shares):

 - a call: C{{"op": "put"|"get"|"watch", "client", "key", "value" (a put's),
   "start", "end", "ok", "result" (a get's value, None for a missing key),
   "error" (the exception's type and text), "deadline" (seconds)}};
 - a watch session: C{{"op": "session", "client", "key", "answered" (when
   watch() returned), "base" (the value it returned), "end", "ended"
   ("lost": its connection ended, so the client knows it may have missed
   what came after; "stopped": the run's end), "notes": [[time, value,
   skipped], ...]}}.

Keys and values follow one rule the checks rely on: each key has one
writer, which puts to it one call at a time, and each value is
C{"KEY#SEQ"} with SEQ growing with each put of that writer
(L{sequence}).  So the changes of a key are ordered by SEQ, whatever
process stored them.

L{check} is a pure function of the history and the table's final content:
the list of violations (each one line, with the records that show it), empty
when the run kept every promise.  Cost: O(records log records).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEADLINE_SLACK = 1.0
"""Seconds a call may end past its deadline and pass: the client's timer, and a loaded machine's scheduling."""

NOTIFY_BOUND = 3.0
"""
Seconds within which a change reaches a watcher that stays connected: a
session that ran to the run's end must have been told of every put
answered at least this long before it ended.
"""

Record = Mapping[str, Any]


def sequence(value: str | None) -> int:
    """The SEQ of a value C{"KEY#SEQ"}; -1 for no value (a missing key)."""
    if value is None:
        return -1
    return int(value.rsplit("#", 1)[1])


def _show(record: Record) -> str:
    shown = {name: record[name] for name in ("client", "op", "key", "value", "result", "error") if record.get(name)}
    times = f"start={record.get('start', 0):.3f} end={record.get('end', 0):.3f}"
    return f"{shown} {times}"


def check(history: Iterable[Record], final: Mapping[str, str], slack: float = DEADLINE_SLACK) -> list[str]:
    """
    The violations of the run's promises in C{history}, given C{final},
    the table's content read after the run (key to value).  A put that
    failed (a deadline, a lost or silent connection) may have run, and may
    take effect later than its failure (its bytes were still on their way
    when the client gave up): it counts as concurrent with everything after
    its start, as in a linearizability check.  So a value is I{overwritten}
    by an answered put that began after the value's own put was answered:

     - lost put: the table holds no value, or one overwritten, when a put
       of its key was answered;
     - stale get: a get returned no value or an overwritten one, though the
       put that overwrote it was answered before the get began (or a value
       no put carried: phantom get);
     - missed change: a watch session not told of an answered put of its
       key (neither the value nor a C{skipped} count covering it) between
       two values it was told, or after its last one when it ran to the
       end; or told an older value after a newer one (went back) when the
       older one's put was answered;
     - overrun: a call that ended more than C{slack} seconds past its deadline.
    """
    calls = [record for record in history if record["op"] != "session"]
    sessions = [record for record in history if record["op"] == "session"]
    violations: list[str] = []
    puts: dict[str, Record] = {}
    answered: dict[str, list[tuple[float, int, Record]]] = defaultdict(list)
    for record in calls:
        if record["op"] == "put":
            puts[record["value"]] = record
            if record["ok"]:
                answered[record["key"]].append((record["end"], sequence(record["value"]), record))
    # Per key, the answered puts by their end, with the latest start among those ended so far.
    latest: dict[str, tuple[list[float], list[Record]]] = {}
    for key, done in answered.items():
        done.sort(key=lambda put: put[0])
        ends, best = [], []
        top: Record = done[0][2]
        for end, _seq, record in done:
            if record["start"] > top["start"]:
                top = record
            ends.append(end)
            best.append(top)
        latest[key] = (ends, best)

    def overwrittenBy(value: str | None, by: Record) -> bool:
        """Whether C{by} (answered) overwrote C{value}: none, or one whose put was answered before C{by} began."""
        if value is None:
            return True
        put = puts[value]
        return bool(put["ok"]) and put["end"] < by["start"]

    for key, (_ends, best) in latest.items():
        last = best[-1]
        held = final.get(key)
        if held is not None and held not in puts:
            violations.append(f"phantom value: the table holds {held!r} for {key!r}, which no put carried")
        elif overwrittenBy(held, last):
            violations.append(f"lost put: {_show(last)} answered, but the table holds {held!r}")
    for record in calls:
        if record["op"] == "get" and record["ok"]:
            key, got = record["key"], record["result"]
            if got is not None and got not in puts:
                violations.append(f"phantom get: {_show(record)} returned a value never put")
                continue
            if key in latest:
                ends, best = latest[key]
                index = bisect.bisect_left(ends, record["start"]) - 1
                if index >= 0 and overwrittenBy(got, best[index]):
                    violations.append(f"stale get: {_show(record)} began after {_show(best[index])} was answered")
        deadline = record.get("deadline")
        if deadline is not None and record["end"] - record["start"] > deadline + slack:
            took = record["end"] - record["start"]
            violations.append(f"overrun: {_show(record)} took {took:.3f} s, deadline {deadline} s + {slack} s")
    for session in sessions:
        violations.extend(_missed(session, answered.get(session["key"], []), puts))
    return violations


def lateEffects(history: Iterable[Record]) -> list[str]:
    """
    The gets that saw a failed put's value after a later put of its writer
    had been answered: the failed put ran late (allowed, see L{check}; shown
    so that it is seen).
    """
    records = list(history)
    puts = {r["value"]: r for r in records if r["op"] == "put"}
    answered: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record["op"] == "put" and record["ok"]:
            answered[record["key"]].append(record)
    found = []
    for record in records:
        if record["op"] != "get" or not record["ok"] or record["result"] not in puts:
            continue
        put = puts[record["result"]]
        if put["ok"]:
            continue
        later = [p for p in answered[record["key"]] if sequence(p["value"]) > sequence(put["value"])]
        if any(p["end"] < record["start"] for p in later):
            found.append(f"{_show(record)} saw the failed {_show(put)}")
    return found


def _missed(session: Record, done: Sequence[tuple[float, int, Record]], puts: Mapping[str, Record]) -> list[str]:
    """What one watch session was not told: see L{check}."""
    found: list[str] = []
    where = f"watch of {session['key']!r} by {session['client']} from {session['answered']:.3f}"
    seen = sequence(session["base"])
    carried = 0  # (changes the notes of late failed puts stood for: some of those since SEQ seen)
    for note in session["notes"]:
        seq = sequence(note[1])
        skipped = int(note[2])
        if seq < seen:
            if note[1] is None or puts[note[1]]["ok"]:
                found.append(f"watch went back: {where}: told {note[1]!r} after SEQ {seen}")
            # A failed put that ran late: concurrent with what came since.  The note stands for 1 + skipped
            # changes, which may be answered puts after SEQ seen: the feed tells a key's value as it is when it
            # reads it, so "#768" (skipped=0) or "#768 skipped=1" may be how "#884, then the late #768" is told.
            carried += 1 + skipped
            continue
        between = [put for put in done if seen < put[1] < seq]
        allowed = skipped + carried
        if len(between) > allowed:
            missing = ", ".join(_show(put[2]) for put in between[: len(between) - allowed][:3])
            found.append(f"missed change: {where}: told {note[1]!r} (skipped={skipped}) but not of {missing}")
        seen, carried = seq, 0
    if session["ended"] == "stopped":
        late = [put for put in done if put[1] > seen and put[0] <= session["end"] - NOTIFY_BOUND]
        if late:
            found.append(
                f"missed change: {where}: ran to {session['end']:.3f}, last told SEQ {seen}, not of {_show(late[0][2])}"
            )
    return found


def percentile(values: Sequence[float], fraction: float) -> float:
    """The C{fraction} percentile of C{values} (nearest rank); NaN if there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


@dataclass(frozen=True)
class Window:
    """What the calls of one stretch of the run (a fault and its recovery) showed."""

    name: str
    calls: int
    failed: int
    longestGap: float
    gapClient: str
    p99: float


def window(history: Iterable[Record], name: str, start: float, end: float) -> Window:
    """
    The calls that began in [C{start}, C{end}): how many failed, the p99 of
    the successful ones' durations, and the longest stretch one client went
    without a successful call (from the window's start, between successes,
    and to its end).
    """
    inside = [r for r in history if r["op"] != "session" and start <= r["start"] < end]
    successes: dict[str, list[float]] = defaultdict(list)
    for record in inside:
        successes.setdefault(record["client"], [])
        if record["ok"]:
            successes[record["client"]].append(record["end"])
    gap, who = 0.0, ""
    for client, ends in successes.items():
        marks = [start, *sorted(ends), end]
        longest = max(later - earlier for earlier, later in zip(marks, marks[1:], strict=False))
        if longest > gap:
            gap, who = longest, client
    durations = [r["end"] - r["start"] for r in inside if r["ok"]]
    failed = sum(1 for r in inside if not r["ok"])
    return Window(name, len(inside), failed, gap, who, percentile(durations, 0.99))


def watchDelays(history: Iterable[Record]) -> list[float]:
    """
    Seconds from each put's start to the note of its value at a watcher of
    another client host (the same value told to several watchers counts
    once per watcher).
    """
    records = list(history)
    started = {r["value"]: (r["start"], r["client"].split("/")[0]) for r in records if r["op"] == "put" and r["ok"]}
    delays = []
    for session in records:
        if session["op"] != "session":
            continue
        for when, value, _skipped in session["notes"]:
            put = started.get(value)
            if put is not None and put[1] != session["client"].split("/")[0]:
                delays.append(when - put[0])
    return delays
