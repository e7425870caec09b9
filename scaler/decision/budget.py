"""The prewarm ledger: what prewarming has cost over a rolling window. Pure: no clock, no I/O.

Each decision charges prewarm_replicas x step (replica-hours, or money when a cost per
replica-hour is set). The allowance for the next step is what the window has left, in whole
replicas for one step. The cap is strict whatever the clock does:
- a charge is only ever made within the allowance, and `charge` refuses one that is not;
- a charge at `now` is checked against every charge stamped in (now - window, now + window):
  every window that contains `now` must stay within the budget, including charges stamped
  "in the future" when the clock has jumped back;
- charges are kept for two windows past the newest time seen; a clock that jumps back further
  than one window behind that gets no allowance (it could not be checked), until it catches up;
- non-finite times, steps or budgets give an allowance of 0.

The budget is either a fixed amount per window, or (`share`) a share of the reactive
replica-hours the same target used in the window (`prewarmBudget: "10%"`), so that one setting
fits a 5-replica and a 500-replica service alike. Each step's reactive replicas are recorded
(`record_reactive`) after its charge, so a step never pays for itself. The share form is just as
strict: a charge at `now` is checked, with the same two-sided spend as above, against the share
of the reactive hours stamped in (newest - window, now], which lies inside every window ending
at or after the newest charge; so every window that ends at a charge spent at most `share` of the
reactive hours recorded in it, or `wake_hours` where it recorded none. At start an empty
window has no reactive hours, so no share (a restarted scaler rebuilds both records); a window
without any is given `wake_hours`, one full-size wake-up (`wake_floor`: maxPrewarmReplicas for
the look-ahead), so a new target, or a pool that sat at zero for a window, can still be
prewarmed before its load comes back.
With a cost per replica-hour both sides are priced alike: the share is unit-free, and
`limit`/`remaining` are in money.

A restarted scaler (or a second replica) does not start from an empty window: `spent_per_step`
turns the samples of the spend counter every replica exports into replica-hours per time, and
`seed` adds them to a ledger before it makes its own charges (the engine's wiring); the reactive
replica-hours counter is read back by `reactive_per_step` into `seed_reactive`.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from models.base import FloatArray
from scaler.decision.timesums import TimeSums

HOUR = 3600.0
EPSILON = 1e-9
"""Slack for float rounding in replica-hour sums; far below one replica-second."""
MAX_SHARE = 1.0
"""Largest share of the reactive replica-hours a budget may be (100 %: prewarm at most doubles
what reactive costs; maxPrewarmReplicas bounds each step anyway)."""

MAX_BUDGET = 1e9
"""Largest absolute budget per window (replica-hours or money): beyond it a typo, not a plan."""
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
"""The metadata's one number syntax (decision.literals): ASCII digits, an optional fraction."""
BUDGET_FORMS = (
    "replica-hours per window (money with costPerReplicaHour) such as '24', from 0 to "
    f"{MAX_BUDGET:.0f}, or a share of the window's reactive replica-hours such as '10%' (above "
    "0 % and at most 100 %)"
)

DEFAULT_BUDGET = "30%"
"""`prewarmBudget` when unset, as a user would write it. Every replica above the HPA's reactive
floor is charged (the hold past its 5-minute stabilisation too, policy.decide), so a share is
the bound on GPU-hours itself: 30 % keeps each window within 1.3x of what it ran reactively,
the issue's GPU-hours goal. Measured across the shared traces in docs/budget.md."""


def wake_floor(max_prewarm_replicas: int, lookahead: float) -> float:
    """Replica-hours of one wake-up at full size: `maxPrewarmReplicas` held for the look-ahead
    a decision buys for (lead time + horizon). A share budget's limit while its window holds no
    reactive hours, so a pool scaled to zero can still be prewarmed before its load comes back,
    once a window; 0 when either is not positive."""
    if max_prewarm_replicas <= 0 or not (math.isfinite(lookahead) and lookahead > 0):
        return 0.0
    return max_prewarm_replicas * lookahead / HOUR


Spans = deque[tuple[float, float, float]]
"""(first time, last time, amount in budget units) records, oldest first."""
SPANS_PER_WINDOW = 288
"""Reactive records within window / SPANS_PER_WINDOW of each other (5 minutes of a day) are kept
as one span, so a ledger holds a few hundred of them whatever the step (30 s: 2,880 a day)."""


def parse_budget(text: str) -> tuple[float, float | None]:
    """`prewarmBudget` text as (absolute amount, share): '24' is (24.0, None), '10%' is
    (0.0, 0.1). Plain ASCII decimals only (no sign, exponent, inf or nan); ValueError names
    both forms otherwise."""
    body = text.strip(" \t\r\n")  # ASCII blanks only, as every other key
    is_share = body.endswith("%")
    number = body[:-1] if is_share else body
    if not _DECIMAL.fullmatch(number):
        raise ValueError(_why_not(number, is_share=is_share))
    value = float(number)
    if is_share:
        if not 0 < value <= MAX_SHARE * 100:
            raise ValueError(f"a share must be above 0 % and at most {MAX_SHARE * 100:g} %")
        return 0.0, value / 100
    if value > MAX_BUDGET:
        raise ValueError(f"must be {BUDGET_FORMS}")
    return value, None


def share_hint(name: str, amount: float, *, share: float | None, cost: float | None) -> str | None:
    """What a budget amount below one replica-hour most likely meant, for a warning: `0.3` as
    an amount is 0.3 replica-hours a window (one replica for 18 minutes a day, next to no
    prewarm), where '30%' was meant. None for a share, a priced amount (money: with
    costPerReplicaHour 0.3 may be a real sum), 0 (purely reactive) and 1 or more. `name` is
    the key or flag the amount came from."""
    if share is not None or cost is not None or not 0 < amount < 1:
        return None
    return (
        f"{name} '{amount:g}' is an amount: {amount:g} replica-hours per window, under one "
        f"replica-hour; did you mean '{amount * 100:g}%' of the window's reactive replica-hours?"
    )


def _why_not(number: str, *, is_share: bool) -> str:
    """What is wrong with a budget that is not a plain decimal: the two slips people make
    (`10 %`, `-5`) named, anything else answered with both forms."""
    bare = number.rstrip(" \t")
    if is_share and bare != number and _DECIMAL.fullmatch(bare):
        return f"no space before the '%': write '{bare}%'"
    if number.startswith("-") and _DECIMAL.fullmatch(number[1:]):
        if is_share:
            return "a share must be above 0 % and at most 100 %"
        return f"must be from 0 to {MAX_BUDGET:.0f}: an amount cannot be negative"
    return f"must be {BUDGET_FORMS}"


def describe(amount: float, share: float | None) -> str:
    """The budget as a user writes it: '24' or '10%'."""
    return f"{amount:g}" if share is None else f"{share * 100:g}%"


DEFAULT = parse_budget(DEFAULT_BUDGET)
"""DEFAULT_BUDGET as (absolute amount, share)."""


@dataclass
class Ledger:
    """Rolling-window prewarm spend of one target."""

    budget: float
    """Allowed per window: replica-hours, or money when `cost_per_replica_hour` is set."""
    window: float
    """Window length in seconds."""
    cost_per_replica_hour: float | None = None
    """Price of one replica-hour in the budget's currency; None means the budget is in hours."""
    share: float | None = None
    """When set, the budget per window is this share (0 < share <= MAX_SHARE) of the reactive
    replica-hours recorded in the window, and `budget` is not used."""
    wake_hours: float = 0.0
    """A share budget's limit, in replica-hours, while its window holds no reactive hours
    (`wake_floor`): a pool that sat at zero for a window has nothing to take a share of, and
    would wake with no prewarm at all. Spent, it stays in the window, so the share takes over
    from the first reactive hours on. Not used by an absolute budget."""
    charges: TimeSums = field(default_factory=TimeSums)
    """(time, amount in budget units) of each charge, in time order: spend seeded from the
    shared record and this process's own charges."""
    reactive: Spans = field(default_factory=deque)
    """(first, last time, amount in budget units) of the reactive replicas of the steps in each
    span, seeded first. A span counts only where it lies wholly in the window asked about."""
    newest: float = -math.inf
    """Latest time the ledger has been asked about; charges expire relative to it."""

    def spent(self, now: float) -> float:
        """Budget units charged within one window either side of `now`."""
        self._advance(now)
        return self.charges.total_between(now - self.window, now + self.window)

    def limit(self, now: float) -> float:
        """The budget at `now` in budget units: `budget`, or `share` of the reactive hours
        stamped in (newest - window, now], `wake_hours` when there are none; 0 when it cannot
        be checked."""
        if self.share is None:
            return self.budget if math.isfinite(self.budget) and self.budget > 0 else 0.0
        if not (math.isfinite(now) and 0 < self.share <= MAX_SHARE):
            return 0.0
        return self._wake() if self.at_floor(now) else self._share(now)

    def at_floor(self, now: float) -> bool:
        """True when a share budget's limit at `now` is the wake-up floor: there is a floor and
        no reactive record reaches into the window at all. Not merely none wholly inside it,
        which `_share` counts: a span straddling the window's start, or records stamped past
        `now` by a clock stepped back, are reactive hours the floor must not stand in for."""
        if self.share is None or not (math.isfinite(now) and 0 < self.share <= MAX_SHARE):
            return False
        if self._wake() <= 0:
            return False
        self._advance(now)
        since = self.newest - self.window
        return not any(last > since and x > 0 for _, last, x in self.reactive)

    def _share(self, now: float) -> float:
        """`share` of the reactive hours stamped in (newest - window, now]."""
        assert self.share is not None
        self._advance(now)
        since = self.newest - self.window
        return self.share * sum(
            x for first, last, x in self.reactive if since < first and last <= now
        )

    def _wake(self) -> float:
        """`wake_hours` in budget units, 0 when not finite and positive."""
        wake = self.price(self.wake_hours)
        return wake if math.isfinite(wake) and wake > 0 else 0.0

    def remaining(self, now: float) -> float:
        """What is left to spend at `now` (0 when `now` cannot be checked)."""
        limit = self._checked_limit(now)
        return max(0.0, limit - self.spent(now)) if limit > 0 else 0.0

    def allowance(self, now: float, step: float, *, reserve: float = 0.0) -> int:
        """Whole prewarm replicas that fit in what is left of the window for one step, keeping
        back `reserve` (a fraction of the budget) for later."""
        per_replica = self._amount(1, step)
        limit = self._checked_limit(now)
        if not (math.isfinite(per_replica) and per_replica > 0) or limit <= 0:
            return 0
        kept = limit * min(max(reserve, 0.0), 1.0) if math.isfinite(reserve) else limit
        left = max(0.0, limit - self.spent(now))
        return max(0, math.floor((left - kept) / per_replica + EPSILON))

    def charge(self, now: float, replicas: int, step: float) -> float:
        """Record `replicas` prewarmed for `step` seconds from `now`; returns replica-hours.

        Raises ValueError if the charge would exceed the budget: the caller must stay within
        `allowance`, and a bug that does not is stopped here rather than billed.
        """
        if replicas <= 0:
            return 0.0
        amount = self._amount(replicas, step)
        if not math.isfinite(amount) or amount > self.remaining(now) + EPSILON:
            raise ValueError(
                f"prewarm of {replicas} replicas for {step}s at {now} exceeds the remaining "
                f"budget of {self.remaining(now):.6g}; ask for at most allowance() replicas"
            )
        self.charges.add(now, amount)
        return replicas * step / HOUR

    def release(self, at: float, amount: float) -> None:
        """Take back `amount` of a reserve booked at `at` (decision.unrecorded `settled`): the
        record has since shown the spend it stood for. Stamped with it, so no window holds one
        without the other."""
        if math.isfinite(at) and math.isfinite(amount) and amount > 0:
            self.charges.add(at, -amount)

    def record_reactive(self, now: float, replicas: int, step: float) -> float:
        """Record the step's `replicas` reactive replicas for `step` seconds from `now` (after
        its charge); returns replica-hours, 0 for anything not finite and positive."""
        amount = self._amount(replicas, step)
        if replicas <= 0 or not (math.isfinite(now) and math.isfinite(amount) and amount > 0):
            return 0.0
        self._advance(now)
        first, last, total = self.reactive[-1] if self.reactive else (math.nan, math.nan, 0.0)
        if last <= now < first + self.window / SPANS_PER_WINDOW:
            self.reactive[-1] = (first, now, total + amount)
        else:
            self.reactive.append((now, now, amount))
        return replicas * step / HOUR

    def _amount(self, replicas: int, step: float) -> float:
        hours = replicas * step / HOUR if math.isfinite(step) and step > 0 else math.nan
        return self.price(hours)

    def price(self, hours: float) -> float:
        """`hours` replica-hours in budget units."""
        return hours if self.cost_per_replica_hour is None else hours * self.cost_per_replica_hour

    def _checked_limit(self, now: float) -> float:
        """limit(now), or 0 when `now` cannot be checked (not finite, or more than a window
        behind the newest time seen)."""
        if not math.isfinite(now):
            return 0.0
        self._advance(now)
        return self.limit(now) if now > self.newest - self.window else 0.0

    def _advance(self, now: float) -> None:
        if not math.isfinite(now):
            return
        self.newest = max(self.newest, now)
        horizon = self.newest - 2 * self.window
        self.charges.drop_through(horizon)
        if self.reactive and self.reactive[0][0] <= horizon:
            self.reactive = deque(r for r in self.reactive if r[0] > horizon)


START_SLACK = 1e-3
"""Seconds within which a sample counts as stamped at the window's start (Prometheus keeps ms)."""

Samples = Sequence[tuple[float, float]] | FloatArray
"""(time, value) samples of one counter series, in time order: pairs, or an (n, 2) array of
rows (sources/prometheus.py `spent_samples`)."""


def spent_per_step(series: Iterable[Samples], *, start: float) -> list[tuple[float, float]]:
    """Replica-hours spent per sample time, from the spend counter of every scaler pod.

    Each series (one per pod) is turned into increments on its own: a drop is a counter reset
    (the pod restarted from 0, so the new value is the increment); a first sample at `start` is
    the baseline of a series that existed before the window, and a later first sample is the
    whole spend of a pod born within it, which errs safe: spend can only be overstated.

    Every pod charges the same decisions, so the spend at a time is the max over pods, never
    their sum. Taking the max of the raw counters instead
    (`max by (target)`) would mix baselines: when the leading pod restarts, the max falls to
    another pod's total, and reading that drop as a reset would charge its whole life again.
    An increment is stamped at the sample that shows it, at or after the charge it counts, so
    it stays in the window at least as long as the charge would have.
    """
    return _increments(series, start=start, born_within=True)


def reactive_per_step(series: Iterable[Samples], *, start: float) -> list[tuple[float, float]]:
    """Reactive replica-hours per sample time, from the reactive counter of every scaler pod
    (the denominator of a share budget, for `seed_reactive`): as `spent_per_step`, except that
    every series' first sample is a baseline. Read as a pod born within the window, a first
    sample would count that pod's whole life inside it whenever Prometheus keeps less history
    than the window (every series then starts after `start`), and a share could spend past its
    share; read as a baseline, a short history can only make the share smaller."""
    return _increments(series, start=start, born_within=False)


def finite_rows(samples: Samples) -> tuple[FloatArray, FloatArray]:
    """The (times, values) of one series' `samples`, rows with a value that is not finite (a
    gap) skipped."""
    pairs = np.asarray(samples, dtype=np.float64).reshape(-1, 2)
    at, value = pairs[np.isfinite(pairs).all(axis=1)].T
    return at, value


def _increments(
    series: Iterable[Samples], *, start: float, born_within: bool
) -> list[tuple[float, float]]:
    """Increments per sample time, the max over series (spent_per_step); `born_within`: a first
    sample after `start` counts whole, else every first sample is a baseline. As arrays: a
    fresh replica rebuilds 1,000 ledgers of a day's samples at start (docs/benchmark.md)."""
    times, steps = [], []
    for samples in series:
        at, value = finite_rows(samples)
        if len(at) == 0:
            continue
        step_spend = np.empty_like(value)
        step_spend[0] = value[0] if born_within and at[0] > start + START_SLACK else 0.0
        previous, later = value[:-1], value[1:]
        with np.errstate(over="ignore"):  # two finite values far apart: inf, as in Python
            step_spend[1:] = np.where(later >= previous, later - previous, later)  # a drop: reset
        times.append(at)
        steps.append(step_spend)
    if not times:
        return []
    at, step_spend = np.concatenate(times), np.concatenate(steps)
    order = np.argsort(at, kind="stable")  # a time's first stamp (say -0.0 of +-0.0) leads
    at, step_spend = at[order], step_spend[order]
    first = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    at, spent = at[first], np.maximum.reduceat(step_spend, first)  # the max over pods
    kept = spent > 0
    return list(zip(at[kept].tolist(), spent[kept].tolist(), strict=True))


def seed(ledger: Ledger, spent: Iterable[tuple[float, float]], *, money: bool = False) -> None:
    """Add replica-hours spent elsewhere (`spent_per_step`) to `ledger`, priced in its units;
    with `money` they are already in the ledger's units (TargetSpec.spend_in_money), and kept
    as given.

    The spend counter also shows this process's own charges once they are scraped, so only
    spend stamped before the ledger's first own charge is taken: from there on the ledger's
    own charges are the record, and nothing is counted twice. Call it once per ledger (the
    engine calls it before the first charge, so all of the counter's history is taken).
    """
    first_own = ledger.charges.first_time()
    amounts = spent if money else _priced(ledger, spent)
    earlier = [(at, amount) for at, amount in amounts if at < first_own]
    ledger.charges = TimeSums([*earlier, *ledger.charges])


def seed_reactive(ledger: Ledger, used: Iterable[tuple[float, float]]) -> None:
    """Add reactive replica-hours recorded elsewhere (`reactive_per_step` of the reactive counter)
    to `ledger`, priced in its units; as `seed`, only what precedes its own first record."""
    first_own = min((first for first, _, _ in ledger.reactive), default=math.inf)
    earlier = [(at, at, hours) for at, hours in _priced(ledger, used) if at < first_own]
    ledger.reactive = deque([*sorted(earlier), *ledger.reactive])


def _priced(
    ledger: Ledger, records: Iterable[tuple[float, float]]
) -> Iterable[tuple[float, float]]:
    """(time, replica-hours) records as (time, `ledger.price(hours)`), without a call per
    record: a day of a ledger's samples is a few thousand."""
    cost = ledger.cost_per_replica_hour
    return records if cost is None else ((at, hours * cost) for at, hours in records)
