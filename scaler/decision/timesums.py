"""Timed amounts kept in time order with running totals, so the total over any open time
interval costs two binary searches instead of a pass over every record. Pure: no clock, no I/O.

The ledger (decision.budget) asks for its window's spend several times per target and step; a
day of 30-second charges is 2,880 records, and summing them on every call made the ledger most
of a replay's CPU (docs/benchmark.md, `bench/ledger_window.py`). Appends in time order (the
common case) are O(1); a record older than the newest (a clock that jumped back) is inserted in
its place in O(n), which is rare and keeps the order every query relies on.

The three columns are `array('d')`, not lists: the same doubles, but no Python float object
per record for the cyclic garbage collector to visit. A fresh replica seeds 1,000 ledgers with a
day of records each, and every full collection then walked their 4 million floats (60 ms each
time, many times a minute: docs/benchmark.md).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate
from operator import itemgetter

COMPACT_AFTER = 1024
"""Dropped records kept in the lists until there are this many and they are half of them."""


class TimeSums:
    """(time, amount) records in time order, with the total over any open interval of time."""

    def __init__(self, records: Iterable[tuple[float, float]] = ()) -> None:
        self._times = array("d")
        self._amounts = array("d")
        self._totals = array("d", [0.0])
        """_totals[i]: the amounts of the records before index i, dropped ones included."""
        self._head = 0
        """Index of the oldest record kept; the ones before it were dropped."""
        self._fill(records)

    def _fill(self, records: Iterable[tuple[float, float]]) -> None:
        """Keep `records` in an empty TimeSums, in one pass: what `add` does for each in time
        order (a fresh replica seeds a day of records a ledger, 1,000 ledgers at start)."""
        ordered = sorted(records, key=itemgetter(0))  # stable: equal times keep their order
        times = [at for at, _ in ordered]
        amounts = [amount for _, amount in ordered]
        if not (all(map(math.isfinite, times)) and all(map(math.isfinite, amounts))):
            self.add(*next(r for r in ordered if not all(map(math.isfinite, r))))  # raises
        self._times, self._amounts = array("d", times), array("d", amounts)
        self._totals = array("d", accumulate(amounts, initial=0.0))  # the same sums as add's

    def add(self, at: float, amount: float) -> None:
        """Keep `amount` stamped at `at` (finite: an unordered time could not be found again)."""
        if not (math.isfinite(at) and math.isfinite(amount)):
            raise ValueError(f"a record needs a finite time and amount, got ({at}, {amount})")
        if len(self) == 0 or at >= self._times[-1]:
            self._times.append(at)
            self._amounts.append(amount)
            self._totals.append(self._totals[-1] + amount)
            return
        index = bisect_right(self._times, at, lo=self._head)
        self._times.insert(index, at)
        self._amounts.insert(index, amount)
        del self._totals[index + 1 :]
        for value in self._amounts[index:]:
            self._totals.append(self._totals[-1] + value)

    def total_between(self, start: float, end: float) -> float:
        """The amounts stamped strictly after `start` and strictly before `end`."""
        first = bisect_right(self._times, start, lo=self._head)
        stop = bisect_left(self._times, end, lo=first)
        return self._totals[stop] - self._totals[first] if stop > first else 0.0

    def drop_through(self, horizon: float) -> None:
        """Forget every record stamped at or before `horizon`."""
        self._head = bisect_right(self._times, horizon, lo=self._head)
        if self._head >= COMPACT_AFTER and 2 * self._head >= len(self._times):
            kept = list(self)
            self._times, self._amounts, self._totals = array("d"), array("d"), array("d", [0.0])
            self._head = 0
            self._fill(kept)  # the same records, their totals rebased to 0

    def first_time(self) -> float:
        """The oldest time kept, inf when there is none."""
        return self._times[self._head] if len(self) else math.inf

    def __len__(self) -> int:
        return len(self._times) - self._head

    def __iter__(self) -> Iterator[tuple[float, float]]:
        """(time, amount) of every record kept, oldest first."""
        return zip(self._times[self._head :], self._amounts[self._head :], strict=True)
