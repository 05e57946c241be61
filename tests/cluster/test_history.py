"""The cluster run's checks (L{tests.cluster.history.check}) on made-up histories: each broken promise is reported."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.cluster.history import NOTIFY_BOUND, check, lateEffects, watchDelays, window


def put(key: str, seq: int, start: float, end: float, ok: bool = True, client: str = "c1/writer0") -> dict[str, Any]:
    return {"client": client, "op": "put", "key": key, "value": f"{key}#{seq}", "start": start, "end": end,
            "ok": ok, "result": None, "error": None if ok else "ConnectionLost: gone", "deadline": 5.0}  # fmt: skip


def get(key: str, seq: int | None, start: float, end: float, client: str = "c2/writer0") -> dict[str, Any]:
    result = None if seq is None else f"{key}#{seq}"
    return {"client": client, "op": "get", "key": key, "value": None, "start": start, "end": end,
            "ok": True, "result": result, "error": None, "deadline": 5.0}  # fmt: skip


def session(
    key: str, answered: float, end: float, notes: list[list[Any]], ended: str = "stopped", base: str | None = None
) -> dict[str, Any]:
    return {"client": "c3/watcher0", "op": "session", "key": key, "base": base, "answered": answered,
            "end": end, "ended": ended, "notes": notes}  # fmt: skip


def note(key: str, seq: int, when: float, skipped: int = 0) -> list[Any]:
    return [when, f"{key}#{seq}", skipped]


CLEAN = [
    put("a", 0, 1.0, 1.1),
    put("a", 1, 1.2, 1.3),
    get("a", 1, 1.4, 1.5),
    get("a", 0, 1.25, 1.5),  # (began before put 1 was answered: either value is right)
    put("a", 2, 2.0, 2.1, ok=False),  # (failed: it may or may not have run)
    get("a", 2, 2.2, 2.3),
    session("a", 0.5, 10.0, [note("a", 0, 1.05), note("a", 1, 1.28), note("a", 2, 2.05)]),
]


class CheckTests(SynchronousTestCase):
    def test_clean(self) -> None:
        """A history that keeps every promise has no violation."""
        self.assertEqual(check(CLEAN, {"a": "a#2"}), [])

    def test_lostPut(self) -> None:
        """An answered put whose value is not in the table (nor a later one of its writer) is reported."""
        found = check(CLEAN, {"a": "a#0"})
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].startswith("lost put:"), found)
        self.assertIn("a#1", found[0])
        self.assertTrue(check(CLEAN, {})[0].startswith("lost put:"))

    def test_staleGet(self) -> None:
        """A get that began after a put was answered and returned an older value is reported, naming both."""
        found = check([*CLEAN, get("a", 0, 1.35, 1.4)], {"a": "a#2"})
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].startswith("stale get:"), found)
        self.assertIn("'result': 'a#0'", found[0])
        self.assertIn("'value': 'a#1'", found[0])
        self.assertTrue(check([*CLEAN, get("a", None, 1.4, 1.5)], {"a": "a#2"})[0].startswith("stale get:"))

    def test_phantomGet(self) -> None:
        """A get that returned a value no put carried is reported."""
        found = check([*CLEAN, get("a", 7, 3.0, 3.1)], {"a": "a#2"})
        self.assertEqual([line.split(":")[0] for line in found], ["phantom get"])

    def test_overrun(self) -> None:
        """A call that ended past its deadline and the slack is reported; one within the slack is not."""
        late = put("b", 0, 1.0, 7.2)
        self.assertEqual(check([late], {"b": "b#0"}, slack=1.0)[0].split(":")[0], "overrun")
        self.assertEqual(check([put("b", 0, 1.0, 5.9)], {"b": "b#0"}, slack=1.0), [])

    def test_missedChange(self) -> None:
        """A watch told of a later value but neither of an answered put between nor of a gap is reported."""
        puts = [put("a", 0, 1.0, 1.1), put("a", 1, 1.2, 1.3), put("a", 2, 1.4, 1.5)]
        missed = session("a", 0.5, 10.0, [note("a", 0, 1.05), note("a", 2, 1.45)])
        found = check([*puts, missed], {"a": "a#2"})
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].startswith("missed change:"), found)
        self.assertIn("a#1", found[0])
        told = session("a", 0.5, 10.0, [note("a", 0, 1.05), note("a", 2, 1.45, skipped=1)])
        self.assertEqual(check([*puts, told], {"a": "a#2"}), [])

    def test_missedAtTheEnd(self) -> None:
        """
        A watch that ran to the end and was never told of a put answered
        long enough before is reported; one whose connection was lost (its
        client knows it may have missed anything since) is not, nor a put
        answered within the notification bound of the end.
        """
        puts = [put("a", 0, 1.0, 1.1), put("a", 1, 1.2, 1.3)]
        found = check([*puts, session("a", 0.5, 10.0, [note("a", 0, 1.05)])], {"a": "a#1"})
        self.assertEqual([line.split(":")[0] for line in found], ["missed change"])
        self.assertEqual(check([*puts, session("a", 0.5, 10.0, [note("a", 0, 1.05)], "lost")], {"a": "a#1"}), [])
        near = session("a", 0.5, 1.3 + NOTIFY_BOUND - 0.1, [note("a", 0, 1.05)])
        self.assertEqual(check([*puts, near], {"a": "a#1"}), [])

    def test_wentBack(self) -> None:
        """A watch told of an older value after a newer one is reported."""
        puts = [put("a", 0, 1.0, 1.1), put("a", 1, 1.2, 1.3)]
        back = session("a", 0.5, 10.0, [note("a", 1, 1.25, skipped=1), note("a", 0, 1.35)])
        found = check([*puts, back], {"a": "a#1"})
        self.assertEqual([line.split(":")[0] for line in found], ["watch went back"])

    def test_failedPutRunsLate(self) -> None:
        """
        A put that failed may run late, after later puts of its writer
        were answered: a get or a watch that then sees its value breaks no
        promise (it is concurrent with everything after its start), and
        L{lateEffects} shows it.  The history is the cluster run's own
        (c3's put over s2's cut link, given up for silence, delivered when
        the link came back).
        """
        k = "c3/w1/k3"
        history = [
            put(k, 1027, 23189.380, 23189.395),
            put(k, 1031, 23189.526, 23192.733, ok=False),
            get(k, 1027, 23196.424, 23196.425),
            put(k, 1035, 23196.446, 23196.466),
            get(k, 1031, 23196.634, 23196.638),
            session(k, 23190.0, 23197.0, [note(k, 1035, 23196.47), note(k, 1031, 23196.6)], "lost", f"{k}#1027"),
        ]
        self.assertEqual(check(history, {k: f"{k}#1031"}), [])
        late = lateEffects(history)
        self.assertEqual(len(late), 1)
        self.assertIn("c3/w1/k3#1031", late[0])
        answeredBack = [*history[:3], put(k, 1035, 23196.446, 23196.466), get(k, 1027, 23196.634, 23196.638)]
        self.assertEqual([line.split(":")[0] for line in check(answeredBack, {k: f"{k}#1035"})], ["stale get"])

    def test_lateNoteStandsForAnAnsweredPut(self) -> None:
        """
        A note of a late failed put's value stands for 1 + skipped changes,
        which may be answered puts: the feed tells a key's value as it is
        when it reads it.  (The cluster run's own: c3's put #768 over s2's
        cut link committed just after #884 was answered; the watcher was
        told #768 for them, then #888, and #884 was reported missed.)  A
        watcher told nothing between is still reported.
        """
        k = "c3/w1/k0"
        history = [
            put(k, 880, 26200.0, 26200.1),
            put(k, 768, 26197.917, 26201.214, ok=False),
            put(k, 884, 26204.793, 26204.836),
            put(k, 888, 26204.9, 26204.95),
        ]

        def told(*notes: list[Any]) -> list[str]:
            watched = session(k, 26201.165, 26206.0, list(notes), "lost", f"{k}#880")
            return [line.split(":")[0] for line in check([*history, watched], {k: f"{k}#888"})]

        self.assertEqual(told(note(k, 768, 26204.85, skipped=1), note(k, 888, 26204.96)), [])
        self.assertEqual(told(note(k, 768, 26204.85), note(k, 888, 26204.96)), [])
        self.assertEqual(told(note(k, 888, 26204.96)), ["missed change"])


class FigureTests(SynchronousTestCase):
    def test_window(self) -> None:
        """A window counts its calls and failures, and finds the longest stretch one client had no success."""
        history = [
            put("a", 0, 1.0, 1.1, client="c1/writer0"),
            put("a", 1, 1.2, 4.0, ok=False, client="c1/writer0"),
            put("a", 2, 4.1, 4.2, client="c1/writer0"),
            put("b", 0, 1.0, 1.5, client="c2/writer0"),
            put("b", 1, 9.0, 9.5, client="c2/writer0"),  # (outside the window)
        ]
        shown = window(history, "x", 1.0, 5.0)
        self.assertEqual((shown.calls, shown.failed, shown.gapClient), (4, 1, "c2/writer0"))
        self.assertAlmostEqual(shown.longestGap, 3.5)

    def test_watchDelays(self) -> None:
        """A note of a put from another host counts, from the put's start; one from the watcher's own host does not."""
        history = [
            put("a", 0, 1.0, 1.1, client="c1/writer0"),
            put("a", 1, 2.0, 2.1, client="c3/writer0"),
            session("a", 0.5, 10.0, [note("a", 0, 1.25), note("a", 1, 2.05)]),
        ]
        delays = watchDelays(history)
        self.assertEqual(len(delays), 1)
        self.assertAlmostEqual(delays[0], 0.25)
