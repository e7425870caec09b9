"""The reserve a rebuilt ledger books for spend not yet scraped, settled once the record can
show it. Before, it stood for the whole window: a new target with a share budget of a few
reactive hours (30 % of 0.83 replica-hours is 0.25) rebuilt a ledger reserving 0.26 for
spend nobody made, and its prewarm was 0 for hours after every restart."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from models.base import Series
from scaler.clock import ManualClock
from scaler.decision import budget, spec, unrecorded
from scaler.serving.engine import Engine
from scaler.serving.ledgerrebuild import LEDGER_STEP
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Sample

HOUR, DAY = 3600.0, 86400.0
STEP, SCRAPE = 30.0, 30.0
NOW = 1_700_000_000.0 - 1_700_000_000.0 % 300.0
SHARE = {"query": "load", "threshold": "100", "prewarmBudget": "30%", "maxPrewarmReplicas": "8"}


@dataclass
class Pod:
    """A scaler pod as the record shows it: scraped every SCRAPE seconds `phase` after `born`
    until `died` (a stale marker then, so no value after), its reactive counter growing by
    `reactive` replicas, its spend counter by `spend` (replica-hours at each time, charged
    just after it)."""

    born: float
    died: float = math.inf
    reactive: float = 1.0
    spend: list[tuple[float, float]] = field(default_factory=list)
    phase: float = 5.0

    def value(self, at: float, *, reactive: bool) -> float:
        scraped = (
            self.born + self.phase + math.floor((at - self.born - self.phase) / SCRAPE) * SCRAPE
        )
        if reactive:
            return self.reactive * max(0.0, scraped - self.born) / HOUR
        return sum(hours for t, hours in self.spend if t < scraped)


@dataclass
class Record:
    """The spend record (a SpendRecord, our seam) answering as Prometheus' grid does."""

    clock: ManualClock
    pods: list[Pod]
    reads: list[tuple[float, float]] = field(default_factory=list)

    def spent_samples(
        self, _spec: object, *, start: float, end: float, step: float, reactive: bool = False
    ) -> list[np.ndarray]:
        self.reads.append((start, end))
        end = min(end, self.clock.now())
        grid = start + step * np.arange(math.floor((end - start) / step + 1e-9) + 1)
        out = []
        for pod in self.pods:
            alive = [g for g in grid if pod.born + pod.phase <= g < pod.died]
            rows = [(g, pod.value(g, reactive=reactive)) for g in alive]
            if rows:
                out.append(np.array(rows))
        return out

    def spent_samples_of(self, _specs: object, **_: object) -> dict[str, list[np.ndarray]]:
        return {}  # each reads alone


@dataclass
class Steady:
    """The Source seam: a load of 100 (one replica at threshold 100), every step."""

    clock: ManualClock

    def history(self, _spec: object, *, start: float, end: float, step: float, **_: object):  # type: ignore[no-untyped-def]
        end = min(end, self.clock.now())
        return Series(start, step, np.full(np.arange(start, end + 1e-6, step).size, 100.0))

    def latest(self, _spec: object, *, at: float) -> Sample:
        return Sample(at=at, value=100.0)


def run(
    pods: list[Pod], minutes: float, meta: dict[str, str] = SHARE
) -> tuple[list[float], float, Engine]:
    """A fresh replica rebuilding the ledger of a target of `meta` (SHARE) at NOW from `pods`,
    then stepping for `minutes`: the budget remaining at each step, and the reserve it booked
    in replica-hours."""
    clock = ManualClock(NOW)
    settings = EngineSettings(
        step=STEP, model_step=300.0, fit_workers=0, ledger_scrape_interval=SCRAPE
    )
    source = Steady(clock)
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: source,  # type: ignore[arg-type,return-value]
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
        spend_record=Record(clock, pods),  # type: ignore[arg-type]
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # no model: no_model
    target = spec.parse("gpu", "small", meta)
    reserve = unrecorded.unrecorded_spend(
        max_prewarm_replicas=8, step=STEP, scrape_interval=SCRAPE, sample_step=LEDGER_STEP
    )
    left: list[float] = []

    async def steps() -> None:
        state = engine.ensure(target)
        for i in range(int(minutes * 60 / STEP) + 1):
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)
            left.append(state.ledger.remaining(clock.t))

    asyncio.run(steps())
    engine.close()
    return left, reserve, engine


@pytest.mark.parametrize("price", [None, 2.0])
def test_a_new_share_targets_ledger_starts_exhausted_by_the_reserve_until_the_record_shows_it(
    price: float | None,
) -> None:
    # Another replica has decided the target for 50 minutes, one reactive replica, no prewarm:
    # 0.83 reactive hours, a 30 % budget of 0.25, and a reserve of 0.27 booked against it
    # (in money with a price: both sides priced alike).
    meta = SHARE if price is None else {**SHARE, "costPerReplicaHour": f"{price}"}
    other = Pod(born=NOW - 50 * 60.0)
    left, reserve, _ = run([other], minutes=12, meta=meta)
    assert reserve == pytest.approx(8 * 120 / HOUR)
    assert left[0] == 0.0  # strict while the span is not scraped yet
    # Once the record shows that pod scraped throughout the span and after it, with no spend,
    # the reserve goes: the share less nothing spent, where about 0.04 was left.
    reactive_hours = 50 / 60 + (len(left) - 1) * STEP / HOUR
    assert left[-1] == pytest.approx((price or 1.0) * 0.3 * reactive_hours, abs=0.01)
    assert left[-1] > 0.2


def test_a_reserve_whose_span_no_pod_was_scraped_throughout_stays_for_the_window() -> None:
    # A lone replica killed just before the rebuild: what it charged after its last scrape is
    # in no record, ever; the reserve stays.
    dead = Pod(born=NOW - 50 * 60.0, died=NOW - 10.0)
    left, reserve, _ = run([dead], minutes=12)
    reactive_hours = 50 / 60 + (len(left) - 1) * STEP / HOUR
    assert left[-1] == pytest.approx(max(0.0, 0.3 * reactive_hours - reserve), abs=0.01)


def test_a_reserve_keeps_what_the_record_shows_was_charged_in_its_span() -> None:
    # The other pod prewarmed 0.1 replica-hours 20 s before the rebuild; its last scrape was
    # 25 s before it, the next 5 s after.
    other = Pod(born=NOW - 50 * 60.0, reactive=2.0, spend=[(NOW - 20.0, 0.1)])
    left, _, _ = run([other], minutes=12)
    reactive_hours = 100 / 60 + (len(left) - 1) * STEP / HOUR
    assert left[-1] == pytest.approx(0.3 * reactive_hours - 0.1, abs=0.01)


# ---- strictness: the settled ledger never holds less than what was charged -----------------


def _grid(first: float, step: float, end: float) -> list[float]:
    return [first + k * step for k in range(math.floor((end - first) / step + 1e-9) + 1)]


@settings(max_examples=80, deadline=None)
@example(wanted=[8] * 120, pods=[(-1200.0, 1200.0, 5.0)], delay=0.0)  # a tail, all scraped
@example(wanted=[8] * 120, pods=[(-1200.0, -15.0, 5.0)], delay=0.0)  # a tail lost with its pod
@given(
    wanted=st.lists(st.integers(0, 8), min_size=120, max_size=120),
    pods=st.lists(
        st.tuples(st.floats(-1200.0, 200.0), st.floats(-600.0, 1200.0), st.floats(0.0, 29.0)),
        min_size=0,
        max_size=3,
    ),
    delay=st.floats(0.0, 600.0),
)
def test_a_settled_ledger_holds_at_least_every_charge_any_pod_made(
    wanted: list[int], pods: list[tuple[float, float, float]], delay: float
) -> None:
    """Pods (born, died relative to the rebuild, scrape phase) charge the same decisions while
    they live, scraped every SCRAPE seconds, a stale marker at the first scrape missed; a fresh
    replica rebuilds at t0 and charges those decisions too; at its reserve's settling (or later)
    its ledger holds at least what any pod charged in the window. Every pod is scraped before
    it dies (born 30 s or more before its death): one that is not, before any pod was ever
    scraped for the ScaledObject, is what `covered` leaves out."""
    t0 = NOW
    step = 10.0  # three decisions a scrape: a pod's last ones before the rebuild are unscraped
    first = t0 - 120 * step
    decisions = {first + i * step: r * step / HOUR for i, r in enumerate(wanted * 2)}
    lives = [(t0 + born, max(t0 + born + SCRAPE, t0 + died), phase) for born, died, phase in pods]

    def charged(t: float, born: float, died: float) -> float:
        return decisions.get(t, 0.0) if born <= t < died else 0.0

    def samples(start: float, end: float) -> list[np.ndarray]:
        out = []
        for born, died, phase in lives:
            scrapes = [s for s in _grid(born + phase, SCRAPE, end) if s < died]
            stale = (
                died + (SCRAPE - (died - born - phase) % SCRAPE) if died < math.inf else math.inf
            )
            rows = []
            for g in _grid(start, LEDGER_STEP, end):
                seen = [s for s in scrapes if s <= g]
                if seen and g < stale:
                    rows.append(
                        (g, sum(charged(t, born, died) for t in decisions if t <= seen[-1]))
                    )
            if rows:
                out.append(np.array(rows))
        return out

    window = 3600.0
    ledger = budget.Ledger(budget=1e6, window=window)
    start = t0 - window
    seen = samples(start, t0)
    amount = unrecorded.unrecorded_spend(
        max_prewarm_replicas=8, step=step, scrape_interval=SCRAPE, sample_step=LEDGER_STEP
    )
    budget.seed(ledger, [*budget.spent_per_step(seen, start=start), (t0, amount)])
    reserve = unrecorded.Reserve.booked(
        amount, at=t0, start=start, step=step, scrape_interval=SCRAPE, sample_step=LEDGER_STEP
    )
    t1 = reserve.settles_at + delay
    for t in decisions:  # the fresh replica charges the same decisions from t0 on
        if t0 <= t <= t1 and decisions[t] > 0:
            ledger.charges.add(t, decisions[t])
    own = ledger.charges.total_between(t0, reserve.own_until + unrecorded.SLACK)
    kept = amount  # settled only when a pod was scraped throughout the window (ledgerrebuild)
    if not seen or unrecorded.covered(seen, since=start, until=t0, step=LEDGER_STEP):
        kept = unrecorded.settled(samples(reserve.since, t1), reserve=reserve, own=own)
    assert 0.0 <= kept <= amount
    ledger.release(t0, amount - kept)
    truth = sum(
        hours
        for t, hours in decisions.items()
        if t <= t1 and (t >= t0 or any(b <= t < d for b, d, _ in lives))
    )
    assert ledger.spent(t1) >= truth - 1e-9


@dataclass
class RestartedInPlace(Pod):
    """A pod whose scaler container restarted at `restarted` (OOMKilled, a failed liveness
    probe): the same pod name and IP, so the same series, its counter from 0 again. What the
    old process charged after its last scrape is in no record."""

    restarted: float = math.inf

    def value(self, at: float, *, reactive: bool) -> float:
        scraped = (
            self.born + self.phase + math.floor((at - self.born - self.phase) / SCRAPE) * SCRAPE
        )
        if reactive or scraped < self.restarted:
            return super().value(at, reactive=reactive)
        return 0.0  # the new process charged nothing yet


def test_a_series_whose_counter_reset_is_not_a_pod_scraped_throughout() -> None:
    # The scaler's container restarted in place 10 s before the rebuild: it charged 0.05
    # replica-hours 40 minutes before (scraped), and 0.1 20 s before it, after its last scrape
    # (25 s before). Its series goes on under the same labels, from 0, with no gap: that is two
    # processes, not one pod scraped throughout, and the 0.1 is in no record: the reserve
    # stays, where it was settled to nothing and the 0.1 spent again.
    spend = [(NOW - 40 * 60.0, 0.05), (NOW - 20.0, 0.1)]
    pod = RestartedInPlace(born=NOW - 50 * 60.0, spend=spend, restarted=NOW - 10.0)
    left, reserve, _ = run([pod], minutes=12)
    share = 0.3 * (50 / 60 + (len(left) - 1) * STEP / HOUR)
    assert left[-1] == pytest.approx(max(0.0, share - 0.05 - reserve), abs=0.01)
    assert left[-1] <= share - 0.05 - 0.1
