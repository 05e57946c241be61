# -*- test-case-name: tests.protocols.bulk.test_ranges,tests.protocols.bulk.test_files -*-
"""RangeSet: the byte ranges a receiver holds, as sorted disjoint half-open ranges.

Contract: after any sequence of L{RangeSet.add} calls the set holds exactly
the union of the ranges added, as the fewest disjoint C{[start, end)} ranges
(touching ranges are merged), in order.  Ranges may arrive in any order and
may repeat or overlap what is held.  The common case, data arriving at or
past the end of what is held (a transfer in order), is checked first and
costs O(1): it extends or appends the last range, as tcptrace's C{addseg}
looks at the tail of its segment list before walking it.  Any other add is
an O(log n) binary search for where it lands, then a merge with the ranges
it touches; a merge or insert moves the list entries after it (one C memmove
of pointers; a list stays cheaper than a pure-Python tree for any realistic
count, since ranges are only created by holes).  L{RangeSet.missing} and
L{RangeSet.contiguousEnd} are O(log n + ranges reported).  Pure Python: no
I/O, no Twisted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator


class RangeSet:
    """
    A set of byte offsets kept as sorted, disjoint, non-touching ranges.

    @ivar total: how many bytes the set holds.
    """

    __slots__ = ("_starts", "_ends", "total")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        # Two parallel lists: bisect works on plain ints, without building
        # tuples to compare.
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.total = 0
        for start, end in ranges:
            self.add(start, end)

    def __len__(self) -> int:
        """The number of disjoint ranges."""
        return len(self._starts)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._starts, self._ends, strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RangeSet):
            return NotImplemented
        return list(self) == list(other)

    def __repr__(self) -> str:
        shown = ", ".join(f"[{s}, {e})" for s, e in list(self)[:8])
        more = f", ... {len(self) - 8} more" if len(self) > 8 else ""
        return f"<RangeSet {self.total} bytes: {shown}{more}>"

    def ranges(self) -> list[tuple[int, int]]:
        """The ranges held, in order, as C{(start, end)} pairs."""
        return list(self)

    def add(self, start: int, end: int) -> int:
        """
        Record that C{[start, end)} is held.

        @return: how many of those bytes were not held before (0 for a
            repeat), so a caller can count duplicates.
        @raise ValueError: C{start} is negative or after C{end}.
        """
        if start < 0 or end < start:
            raise ValueError(f"not a byte range: [{start}, {end})")
        if start == end:
            return 0
        starts, ends = self._starts, self._ends
        if not ends or start > ends[-1]:
            # At the tail, past everything held: a new last range.
            starts.append(start)
            ends.append(end)
            self.total += end - start
            return end - start
        if start >= starts[-1]:
            # At the tail, touching or inside the last range: extend it.
            added = max(0, end - ends[-1])
            if added:
                ends[-1] = end
                self.total += added
            return added
        return self._insert(start, end)

    def extendRun(self, start: int, end: int) -> bool:
        """
        If the set holds exactly C{[0, start)} (nothing, when C{start} is 0)
        and C{end > start}, make it C{[0, end)} and return C{True}; else
        change nothing and return C{False}.  The whole of L{add}, and of
        L{contiguousEnd} from 0 before and after it, for a transfer that
        arrives in order with no hole behind it: O(1), one call.
        """
        ends = self._ends
        if end <= start or len(ends) > 1:
            return False
        if ends:
            if ends[0] != start or self._starts[0] != 0:
                return False
            ends[0] = end
        elif start:
            return False
        else:
            self._starts.append(0)
            ends.append(end)
        self.total += end - start
        return True

    def _insert(self, start: int, end: int) -> int:
        """Add a range that lands before the last one: binary search, then merge."""
        starts, ends = self._starts, self._ends
        # first: the first range that ends at or after start (it touches or
        # follows the new range); last: one past the last range that starts
        # at or before end.  Ranges first..last-1 merge with the new one.
        first = bisect_left(ends, start)
        last = bisect_right(starts, end, first)
        if first == last:
            starts.insert(first, start)
            ends.insert(first, end)
            self.total += end - start
            return end - start
        mergedStart = min(start, starts[first])
        mergedEnd = max(end, ends[last - 1])
        held = sum(ends[i] - starts[i] for i in range(first, last))
        starts[first:last] = [mergedStart]
        ends[first:last] = [mergedEnd]
        added = (mergedEnd - mergedStart) - held
        self.total += added
        return added

    def covers(self, start: int, end: int) -> bool:
        """Whether every byte of C{[start, end)} is held."""
        if start >= end:
            return True
        index = bisect_right(self._starts, start) - 1
        return index >= 0 and self._ends[index] >= end

    def contiguousEnd(self, offset: int) -> int:
        """
        Where the run of held bytes starting at C{offset} ends: C{offset}
        itself if that byte is not held.
        """
        index = bisect_right(self._starts, offset) - 1
        if index >= 0 and self._ends[index] > offset:
            return self._ends[index]
        return offset

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """The ranges of C{[start, end)} that are not held, in order."""
        gaps: list[tuple[int, int]] = []
        starts, ends = self._starts, self._ends
        index = max(bisect_right(starts, start) - 1, 0)
        position = start
        while index < len(starts) and starts[index] < end and position < end:
            if ends[index] > position:
                if starts[index] > position:
                    gaps.append((position, starts[index]))
                position = max(position, ends[index])
            index += 1
        if position < end:
            gaps.append((position, end))
        return gaps

    def toList(self) -> list[list[int]]:
        """The ranges as lists of two ints, for JSON."""
        return [[s, e] for s, e in self]

    @classmethod
    def fromList(cls, ranges: Iterable[Iterable[int]]) -> RangeSet:
        """
        Rebuild a set from L{toList}'s output (or any pairs).

        @raise ValueError: an item is not a pair of non-negative ints in order.
        """
        result = cls()
        for item in ranges:
            pair = list(item)
            if len(pair) != 2 or not all(type(v) is int for v in pair):
                raise ValueError(f"not a range: {pair!r}")
            result.add(pair[0], pair[1])
        return result
