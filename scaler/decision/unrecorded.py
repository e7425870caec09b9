"""The prewarm spend a restarted scaler cannot see in the shared record, bounded, and what is
left of that bound once the record can show it. Pure.

The ledger is rebuilt from the spend counter Prometheus scrapes from every scaler pod. Spend
charged after a pod's last scrape is lost when that pod dies (SIGKILL, OOM, node loss; a
SIGTERM too, as no scrape follows it), and the rebuild reads the counter on a grid of
`sample_step`, so a scrape newer than the last grid point is missed as well. Every lost charge
is therefore stamped within `scrape_interval + sample_step` before the rebuild, and a decision
charges at most `max_prewarm_replicas` for one step. The engine books that much against the
window when it rebuilds a ledger (a `Reserve`): the scaler reserves it, so the cap stays strict.

The bound stood for a whole window, whatever the record later showed: against a share budget
of a few reactive hours (30 % of 0.83 replica-hours is 0.25) a reserve of 0.27 took all of it,
no prewarm until new reactive hours made up the difference and that much less all day. So
once the record can show the reserve's span (`settles_at`), it is read again (`settled`): when
one pod was scraped throughout the window and the span and after it (`covered`, at the
rebuild and then), every decision any pod made in them is in its counter (replicas decide
alike), and the reserve shrinks to what the record shows beyond the ledger's own charges.
Without such a pod (a lone replica restarted, in place too: a series whose counter falls is
two processes, `covered`; a pod killed just before the rebuild, pods replaced within the
window) a charge may be in no record at all, and the whole reserve stays. "Throughout" starts
at the ScaledObject's first record when that is in the window: what is left out is a pod that
charged before any pod was ever scraped for it and died unscraped, at most once in a
ScaledObject's life.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from scaler.decision import budget

HOUR = 3600.0
LOOKBACK = 300.0
"""Prometheus' default lookback (`--query.lookback-delta`): a series whose pod died without a
stale marker still has a value at a grid point up to this long after its last sample, so only
a value later than this past the rebuild proves a sample taken after it."""
SLACK = 1e-3
"""Seconds within which a sample's time counts as a grid point (Prometheus keeps ms)."""


def unrecorded_span(*, step: float, scrape_interval: float, sample_step: float) -> float:
    """Seconds before a rebuild in which a charge may be in no record it reads: the last
    `scrape_interval + sample_step`, and one more step for the partial step at either end."""
    return max(scrape_interval, 0.0) + max(sample_step, 0.0) + max(step, 0.0)


def unrecorded_spend(
    *, max_prewarm_replicas: int, step: float, scrape_interval: float, sample_step: float
) -> float:
    """Replica-hours of prewarm that may have been charged but never reached the record:
    decisions within `scrape_interval + sample_step` (one more for the partial step at either
    end), each at most `max_prewarm_replicas` for `step` seconds."""
    span = unrecorded_span(step=step, scrape_interval=scrape_interval, sample_step=sample_step)
    return max(max_prewarm_replicas, 0) * span / HOUR


@dataclass(frozen=True)
class Reserve:
    """The unrecorded bound a rebuild at `at` booked as spent, and the grid its record is read
    on: `since` (the span's start), `seen_until` (the rebuild's newest grid point: what the
    record showed up to it was seeded) and `settles_at` (the first grid point at which one
    pod's value proves a sample taken after the rebuild), all on one `sample_step` grid."""

    at: float
    amount: float
    """In the ledger's units (money with a price)."""
    since: float
    seen_until: float
    settles_at: float
    sample_step: float

    @classmethod
    def booked(
        cls,
        amount: float,
        *,
        at: float,
        start: float,
        step: float,
        scrape_interval: float,
        sample_step: float,
    ) -> Reserve:
        """The reserve of a rebuild at `at` whose record was read on the grid from `start`."""
        seen_until = start + math.floor((at - start) / sample_step + 1e-9) * sample_step
        span = unrecorded_span(step=step, scrape_interval=scrape_interval, sample_step=sample_step)
        since = seen_until - math.ceil(span / sample_step - 1e-9) * sample_step
        proof = at + LOOKBACK + max(step, 0.0)
        settles_at = since + math.ceil((proof - since) / sample_step + 1e-9) * sample_step
        return cls(at, amount, since, seen_until, settles_at, sample_step)

    @property
    def own_until(self) -> float:
        """The ledger's own charges after `at` up to this time are in the record's value at
        `settles_at` when the pod scraped throughout charged them too (`settled`)."""
        return self.settles_at - LOOKBACK


def covered(series: Iterable[budget.Samples], *, since: float, until: float, step: float) -> bool:
    """True when one series has a value at every grid point of `step` from `since`, or from
    the first value of any series when that is later, through `until`: one pod scraped
    throughout (a failed scrape or a pod gone leaves a stale marker, and Prometheus then
    answers no value) since anything was recorded, so every decision any pod made in between
    is in its counter (replicas decide alike). A series whose counter falls in that span is
    not one: its container restarted in place (OOMKilled, a failed liveness probe), so the same
    pod name and IP carry a new process' counter on, with no gap when no scrape fell in the
    restart, and what the old one charged after its last scrape is in no record. False
    without any series."""
    times, values = [], []
    for samples in series:
        at, value = budget.finite_rows(samples)
        times.append(at)
        values.append(value)
    firsts = [at[0] for at in times if len(at)]
    if not firsts:
        return False
    since = max(since, min(firsts) - SLACK)
    wanted = math.floor((until - since) / step + 1e-9) + 1
    for at, value in zip(times, values, strict=True):
        span = (at >= since - SLACK) & (at <= until + SLACK)
        if np.count_nonzero(span) >= wanted and not np.any(np.diff(value[span]) < 0):
            return True
    return False


def settled(
    series: Iterable[budget.Samples], *, reserve: Reserve, own: float, price: float = 1.0
) -> float:
    """What is left of `reserve` given the spend record read on its grid from `reserve.since`
    through `reserve.settles_at` or later (`series`, one per pod) and the ledger's `own`
    charges after the rebuild up to `reserve.own_until`: all of it unless one pod was scraped
    from the span's start through `settles_at` (`covered`); else what the record shows after
    `seen_until` through `settles_at` (the span's charges, scraped since, and the ones after
    the rebuild, the max over pods per time), priced at `price` per record unit, beyond `own`,
    at most the reserve. The value at `settles_at` is of a sample less than LOOKBACK old, so
    it holds the charges of every decision up to `own_until`: those are not counted twice."""
    series = list(series)
    step, proof = reserve.sample_step, reserve.settles_at
    if not covered(series, since=reserve.since, until=proof, step=step):
        return reserve.amount
    spent = budget.spent_per_step(series, start=reserve.since)
    after = reserve.seen_until + SLACK
    seen = price * sum(amount for at, amount in spent if after < at <= proof + SLACK)
    return min(reserve.amount, max(0.0, seen - own))


CHECK_SCRAPES = 4
"""Scrape intervals a charge may take to show in the record before it is missing there: a
missed scrape or two, or a Prometheus a minute behind, is no alarm (`SpendCheck`)."""
RECHECK_MISSING = 300.0
"""Seconds between reads of a record found missing a target's charges, until it holds them."""
SKEW = 60.0
"""Seconds before its first unproven charge the record is read from: Prometheus stamps a
sample with its own clock, so with the scaler's clock ahead of it a charge's first sample can
be stamped before the charge. Read from the charge itself, the value there would already hold
it, no rise would follow when it was the only one (a one-step hold), and with prewarm then held
at 0 none ever would: the target would be held reactive for good. A rise in the SKEW before the
charge may be of an earlier one; at worst a record that stopped scraping is found a check
later (RECHECK_FOUND)."""
RECHECK_FOUND = 3600.0
"""Seconds from a read that found a target's charges to the next: a record that later stops
scraping the scaler is noticed within this, not at every charge."""


def check_delay(*, step: float, scrape_interval: float, sample_step: float) -> float:
    """Seconds after a charge by which the record must show it: CHECK_SCRAPES scrape intervals,
    the ledger's sample step (a grid point after the scrape) and a step."""
    return CHECK_SCRAPES * max(scrape_interval, 0.0) + max(sample_step, 0.0) + max(step, 0.0)


@dataclass
class SpendCheck:
    """Whether the shared record holds this replica's own prewarm charges of one target: what a
    restart (or another replica's rebuild) would read back. Without them (a Prometheus that
    does not scrape the scaler: wrong ServiceMonitor labels, a NetworkPolicy, another
    Prometheus) every rebuild finds nothing spent and hands out a fresh budget."""

    since: float = math.inf
    """The first own charge not yet seen in the record; inf: none waiting."""
    missing: bool = False
    """The record did not show charges older than the check's delay when last read."""
    next_at: float = -math.inf
    """No read before this."""

    def charged(self, at: float) -> None:
        """This replica charged prewarm at `at`."""
        if math.isfinite(at):
            self.since = min(self.since, at)

    @property
    def read_from(self) -> float:
        """Where the record is read from to judge it: SKEW before `since`."""
        return self.since - SKEW

    def due(self, now: float, *, delay: float) -> bool:
        """A charge is older than `delay` and the last read is far enough back."""
        return math.isfinite(self.since) and now >= max(self.since + delay, self.next_at)

    def judge(self, series: Iterable[budget.Samples], *, now: float) -> bool:
        """Judge the record read from `read_from` through `now` (one series per pod): it holds
        the charges when any pod's counter rose after `read_from` (every pod charges the same
        decisions, so another pod's record serves a restart as well as this one's). Returns
        whether `missing` changed."""
        start = self.read_from
        spent = budget.spent_per_step(series, start=start)
        found = any(at > start + SLACK and amount > 0 for at, amount in spent)
        changed = self.missing == found
        self.missing = not found
        if found:  # the next charge starts the next wait, an hour on at the soonest
            self.since, self.next_at = math.inf, now + RECHECK_FOUND
        else:  # the same charges, read again until they show
            self.next_at = now + RECHECK_MISSING
        return changed
