"""A replica checks that the shared spend record holds its own prewarm charges. The ledger is
rebuilt from that record on every restart; a Prometheus that never scrapes the scaler (wrong
ServiceMonitor labels, a NetworkPolicy, another Prometheus) made every rebuild find nothing
spent, so every restart handed out a fresh budget, and only one INFO line said anything."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models.base import Series
from scaler.clock import ManualClock
from scaler.decision import policy, spec, unrecorded
from scaler.serving.engine import Engine
from scaler.serving.ledgerrebuild import LEDGER_STEP
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Sample

STEP, SCRAPE = 30.0, 30.0
NOW = 1_700_000_000.0 - 1_700_000_000.0 % 300.0
DELAY = unrecorded.check_delay(step=STEP, scrape_interval=SCRAPE, sample_step=LEDGER_STEP)
SERIES = 'scaler_prewarm_replica_hours_total{target=~"gpu/llm\\\\#[0-9a-f]+"} at http://ledger'


def grid(start: float, end: float) -> np.ndarray:
    return start + LEDGER_STEP * np.arange(math.floor((end - start) / LEDGER_STEP + 1e-9) + 1)


# ---- the verdict, pure ------------------------------------------------------------------------


def test_a_charge_is_not_looked_for_before_several_scrape_intervals_have_passed() -> None:
    check = unrecorded.SpendCheck()
    assert not check.due(NOW, delay=DELAY)  # nothing charged, nothing to find
    check.charged(NOW)
    check.charged(NOW + STEP)
    assert check.since == NOW
    assert DELAY >= 4 * SCRAPE  # a missed scrape or two is no alarm
    assert not check.due(NOW + DELAY - 1.0, delay=DELAY)
    assert check.due(NOW + DELAY, delay=DELAY)


def test_a_record_without_a_rise_after_the_charge_is_missing_until_one_shows() -> None:
    check = unrecorded.SpendCheck()
    check.charged(NOW)
    at = grid(check.read_from, NOW + 300.0)  # from a minute before it (unrecorded.SKEW)
    flat = np.column_stack([at, np.full(at.size, 2.0)])  # another trigger's old spend, flat
    assert check.judge([flat], now=NOW + 300.0)  # changed: missing
    assert check.missing and not check.due(NOW + 301.0, delay=DELAY)  # read again later
    assert check.due(NOW + 300.0 + unrecorded.RECHECK_MISSING, delay=DELAY)
    risen = np.column_stack([at, 2.0 + (at > NOW + 100.0) * 0.25])
    assert check.judge([flat, risen], now=NOW + 600.0)  # changed: found
    assert not check.missing and not check.due(NOW + 900.0, delay=DELAY)
    check.charged(NOW + 900.0)  # the next wait starts at the next charge, an hour on at most
    assert check.due(NOW + 600.0 + unrecorded.RECHECK_FOUND, delay=DELAY)


def test_a_pod_first_scraped_after_the_charge_counts_whole() -> None:
    # A Prometheus that starts scraping late: the counter's first sample holds the charge.
    check = unrecorded.SpendCheck()
    check.charged(NOW)
    at = grid(NOW + 240.0, NOW + 300.0)
    late = np.column_stack([at, np.full(at.size, 0.25)])
    assert not check.judge([late], now=NOW + 300.0)  # unchanged: not missing
    assert not check.missing


# ---- the engine, with the record and the source at our seams ----------------------------------


@dataclass
class Record:
    """The spend record (a SpendRecord): `scraped` samples of the spend counter as a
    Prometheus answers them on a grid; none at all when it never scrapes the scaler."""

    clock: ManualClock
    scraped: list[tuple[float, float]] = field(default_factory=list)

    def spent_samples(
        self, _spec: object, *, start: float, end: float, step: float, reactive: bool = False
    ) -> list[np.ndarray]:
        if reactive or not self.scraped:
            return []
        rows = []
        for g in start + step * np.arange(math.floor((end - start) / step + 1e-9) + 1):
            seen = [value for at, value in self.scraped if at <= min(g, self.clock.now())]
            if seen:
                rows.append((g, seen[-1]))
        return [np.array(rows)] if rows else []

    def spent_samples_of(self, _specs: object, **_: object) -> dict[str, list[np.ndarray]]:
        return {}  # each reads alone

    def spent_series(self, _spec: object) -> str:
        return SERIES


@dataclass
class Spiky:
    """The Source seam: a load of 200 every 40 steps, 100 between (the hold then holds 10
    replicas above reactive for the lead time, as paid prewarm)."""

    clock: ManualClock

    def history(self, _spec: object, *, start: float, end: float, step: float, **_: object):  # type: ignore[no-untyped-def]
        end = min(end, self.clock.now())
        return Series(start, step, np.full(np.arange(start, end + 1e-6, step).size, 100.0))

    def latest(self, _spec: object, *, at: float) -> Sample:
        return Sample(at=at, value=200.0 if round((at - NOW) / STEP) % 40 == 0 else 100.0)


def serve(
    *, scraped: bool, steps: int, ahead: float = 0.0, meta: dict[str, str] | None = None
) -> tuple[Engine, TargetState, list[policy.Decision]]:
    """An engine deciding one target (`meta` added to its metadata) for `steps` steps, its
    spend counter scraped 5 s after each step into the record (`scraped`) or never; the
    scaler's clock `ahead` seconds of the Prometheus that stamps the samples."""
    clock = ManualClock(NOW)
    settings = EngineSettings(
        step=STEP, model_step=300.0, fit_workers=0, ledger_scrape_interval=SCRAPE
    )
    source, record = Spiky(clock), Record(clock)
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: source,  # type: ignore[arg-type,return-value]
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
        spend_record=record,  # type: ignore[arg-type]
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # no model
    target = spec.parse(
        "gpu", "llm", {"query": "load", "threshold": "10", "prewarmBudget": "24", **(meta or {})}
    )
    decisions = []

    async def run() -> TargetState:
        state = engine.ensure(target)
        for i in range(steps):
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)
            assert state.predictive is not None
            decisions.append(state.predictive)
            if scraped:
                value = engine.telemetry.registry.get_sample_value(
                    "scaler_prewarm_replica_hours_total", {"target": target.key}
                )
                record.scraped.append((clock.t + 5.0 - ahead, value or 0.0))
        return state

    state = asyncio.run(run())
    engine.close()
    return engine, state, decisions


def missing_gauge(engine: Engine, state: TargetState) -> float | None:
    return engine.telemetry.registry.get_sample_value(
        "scaler_spend_record_missing", {"target": state.spec.key}
    )


def test_a_record_that_never_holds_the_scalers_spend_is_said_once_and_holds_prewarm_at_0(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="scaler.serving.ledgeraudit")
    engine, state, decisions = serve(scraped=False, steps=80)
    charged = [i for i, d in enumerate(decisions) if d.prewarm > 0]
    assert charged, "the hold should have prewarmed after the first spike"
    first = charged[0]
    flagged = next(i for i, d in enumerate(decisions) if d.reason is policy.Reason.SPEND_UNRECORDED)
    assert (flagged - first) * STEP >= DELAY  # not before the record had its time
    assert (flagged - first - 1) * STEP <= DELAY + STEP
    # From then on no prewarm, though the next spike's hold wants it.
    later = decisions[flagged:]
    assert all(d.prewarm == 0 and d.reason is policy.Reason.SPEND_UNRECORDED for d in later)
    assert any(d.reactive == 20 for d in decisions[40:45])  # the second spike came
    assert missing_gauge(engine, state) == 1.0
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # one per target, though it is read again every 5 minutes
    message = errors[0].getMessage()
    for named in (state.spec.key, SERIES, "servicemonitor.yaml", "--ledger-prometheus-url"):
        assert named in message


def test_a_record_that_holds_the_scalers_spend_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="scaler.serving.ledgeraudit")
    engine, state, decisions = serve(scraped=True, steps=80)
    assert not any(d.reason is policy.Reason.SPEND_UNRECORDED for d in decisions)
    assert sum(d.prewarm > 0 for d in decisions[40:]) >= 10  # the second spike's hold too
    assert missing_gauge(engine, state) == 0.0
    assert not caplog.records


@pytest.mark.parametrize("ahead", [10.0, 40.0])
def test_a_one_step_hold_with_the_scalers_clock_ahead_of_prometheus_is_found(
    ahead: float, caplog: pytest.LogCaptureFixture
) -> None:
    # A lead time a step past the stabilisation window: each spike's hold prewarms one step.
    # Prometheus stamps the scrape that holds it with its own clock, `ahead` seconds behind
    # the scaler's: before the step it was charged for. Read from that step, the record
    # already held it and never rose: the target was held reactive for good (the second
    # spike's hold too), the ERROR said the record did not hold spend it held.
    caplog.set_level(logging.ERROR, logger="scaler.serving.ledgeraudit")
    engine, state, decisions = serve(scraped=True, steps=80, ahead=ahead, meta={"leadTime": "330s"})
    assert [i for i, d in enumerate(decisions) if d.prewarm > 0] == [10, 50]
    assert not any(d.reason is policy.Reason.SPEND_UNRECORDED for d in decisions)
    assert missing_gauge(engine, state) == 0.0
    assert not caplog.records
