"""Forecasts at many origins in one pass (models/origins.py, models/manyorigin.py) give the very
numbers the one-origin-at-a-time path gives, bit for bit, and leave the model's adaptive state
where that path leaves it: what lets a replica rebuild its drift state fast and still agree
with one that has served since the fit (scaler/serving/driftstate.py)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
import pytest

from models import artefact, manyorigin, origins
from models.base import DAY, FloatArray, Series
from models.calibrate import CalibratedModel
from models.seasonal import SeasonalBaseline
from scaler.decision import drift, drift_tracker
from scaler.decision import spec as specs
from scaler.serving import driftstate
from scaler.serving.state import forecast_steps
from tests.contract import synthetic

STEP = 300.0
WINDOW = 28 * DAY
SPEC = specs.parse(
    "gpu", "llm", {"query": "load", "threshold": "20", "leadTime": "10m", "horizon": "15m"}
)
FIT_AT = synthetic.START + 28 * DAY


def gappy_load(days: float, *, seed: int) -> Series:
    """Daily and weekly load with 1 % of the samples missing and, three days after FIT_AT,
    two and a half times as much of it (the band must widen: the adaptive state moves)."""
    base = synthetic.load(days, seed=seed)
    values = base.values.copy()
    values[np.random.default_rng(seed).random(values.size) < 0.01] = np.nan
    values[base.times() > FIT_AT + 3 * DAY] *= 2.5
    return Series(base.start, base.step, values)


class OneAtATime:
    """The seasonal baseline without predict_at: what every other model gets."""

    kind: ClassVar[str] = "seasonal"
    cost: ClassVar[int] = 1

    def __init__(self, inner: SeasonalBaseline) -> None:
        self.inner = inner

    def fit(self, history: Series) -> None:
        self.inner.fit(history)

    def predict(self, recent: Series, steps: int) -> FloatArray:
        return self.inner.predict(recent, steps)

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        return self.inner.interval(p50, quantile)

    def to_dict(self) -> dict[str, Any]:
        return self.inner.to_dict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(SeasonalBaseline.from_dict(data))


def fitted(data: Series) -> CalibratedModel:
    known = data.until(FIT_AT).since(FIT_AT - WINDOW + STEP)
    return artefact.load(artefact.fit("seasonal", known, forecast_steps(SPEC, STEP)))


def test_the_seasonal_forecast_from_every_origin_at_once_is_predict_at_each_origin() -> None:
    data = gappy_load(33, seed=5)
    model = SeasonalBaseline()
    model.fit(data.until(FIT_AT))
    ends = np.arange(0, len(data) - 1)  # from the very first point, gaps included
    at_once = origins.predict_at(model, data, ends, 7)
    looped = origins.predict_at(OneAtATime(model), data, ends, 7)
    one_by_one = np.array([model.predict(data.until(data.start + i * STEP), 7) for i in ends])
    assert np.array_equal(at_once, one_by_one)
    assert np.array_equal(looped, one_by_one)


def test_a_rolling_backtest_gives_the_same_actuals_and_forecasts_with_and_without_predict_at() -> (
    None
):
    data = gappy_load(30, seed=7)
    model = SeasonalBaseline()
    model.fit(data.until(FIT_AT))
    fast = origins.rolling(model, data, first=10, steps=5, stride=3)
    slow = origins.rolling(OneAtATime(model), data, first=10, steps=5, stride=3)
    assert np.array_equal(fast[0], slow[0], equal_nan=True)
    assert np.array_equal(fast[1], slow[1])
    assert np.isnan(fast[0][-1, 1:]).all()  # past the series' end


def test_calibrated_forecasts_at_every_origin_since_the_fit_are_the_forecasts_one_by_one() -> None:
    data = gappy_load(34, seed=3)
    end = FIT_AT + 5 * DAY + 7 * 3600.0  # five day boundaries: five re-measured tables
    history = data.until(end).since(FIT_AT - WINDOW + STEP)
    fast_model, slow_model = fitted(data), fitted(data)
    steps, keep = forecast_steps(SPEC, STEP), int(WINDOW // STEP)
    first = round((FIT_AT - history.start) / STEP)
    fast = manyorigin.forecasts(
        fast_model, history, first=first, steps=steps, quantile=0.95, keep=keep
    )
    assert fast is not None
    slow = [
        slow_model.forecast(history.until(history.start + i * STEP), steps=steps, quantile=0.95)
        for i in range(first, len(history))
    ]
    assert [f.origin for f in fast] == [f.origin for f in slow]
    for a, b in zip(fast, slow, strict=True):
        assert np.array_equal(a.p50, b.p50)
        assert np.array_equal(a.upper, b.upper)
        assert np.array_equal(a.measured_upper, b.measured_upper)  # type: ignore[arg-type]
    assert np.array_equal(fast[-1].raw_upper, slow[-1].raw_upper)  # type: ignore[arg-type]
    a_aci, b_aci = fast_model.aci_tracker(steps), slow_model.aci_tracker(steps)
    assert b_aci.widen > 0.1  # the load grew: the band widened, not a trivial state
    assert (a_aci.widen, a_aci.start) == (b_aci.widen, b_aci.start)
    assert np.array_equal(a_aci.seen, b_aci.seen, equal_nan=True)
    assert [t for t, _ in a_aci.rows] == [t for t, _ in b_aci.rows]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a_aci.rows, b_aci.rows, strict=True))
    later = data.until(end + 4 * STEP).since(end + 4 * STEP - WINDOW + STEP)
    next_fast = fast_model.forecast(later, steps=steps, quantile=0.95)
    next_slow = slow_model.forecast(later, steps=steps, quantile=0.95)
    assert np.array_equal(next_fast.upper, next_slow.upper)  # and they go on alike


def test_a_model_without_predict_at_is_not_replayed_in_one_pass() -> None:
    data = gappy_load(30, seed=3)
    model = fitted(data)
    model.model = OneAtATime(model.model)  # type: ignore[arg-type]
    history = data.until(FIT_AT + DAY).since(FIT_AT - WINDOW + STEP)
    first = round((FIT_AT - history.start) / STEP)
    got = manyorigin.forecasts(model, history, first=first, steps=4, quantile=0.95, keep=8064)
    assert got is None


def replayed_origin_by_origin(
    model: CalibratedModel, history: Series
) -> drift_tracker.DriftTracker:
    """The replay as the live engine lives it: at each origin, score the actuals now known,
    then record the forecast from the newest window (the reference the shortcut must meet)."""
    tracker = drift_tracker.DriftTracker(
        lead_time=SPEC.lead_time, monitor=drift.DriftMonitor(quantile=SPEC.quantile, step=STEP)
    )
    tracker.use(model, tracker.null_of(model, history))
    steps, keep = forecast_steps(SPEC, STEP), int(WINDOW // STEP)
    asked = False
    t = model.trained_until
    while t <= history.end + 1e-6:
        known = history.until(t)
        known = known.since(known.end - (keep - 1) * STEP) if len(known) > keep else known
        forecast = model.forecast(known, steps=steps, quantile=SPEC.quantile)
        tracker.score(known)
        tracker.record(forecast)
        asked = tracker.monitor.take_retrain()
        t += STEP
    tracker.monitor.retrain_requested = asked
    return tracker


@pytest.mark.parametrize("age_days", [0.5, 4.0])
@pytest.mark.parametrize("shortcut", [True, False])
def test_the_drift_state_rebuilt_in_one_pass_equals_the_one_rebuilt_origin_by_origin(
    age_days: float, shortcut: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = gappy_load(34, seed=11)
    history = data.until(FIT_AT + age_days * DAY).since(FIT_AT - WINDOW + STEP)
    if not shortcut:  # the ablation: a model without the many-origin forecast
        monkeypatch.setattr(manyorigin, "forecasts", lambda *_a, **_k: None)
    fast = driftstate.rebuild(SPEC, fitted(data), history, window=WINDOW)
    slow = replayed_origin_by_origin(fitted(data), history)
    assert fast.monitor.observations > 100
    assert_same_tracker(fast, slow, arrays=("upper", "raw_upper"))


def test_the_one_pass_replay_makes_no_per_origin_predict_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = synthetic.load(33, seed=2)  # no gaps: every origin goes through predict_at
    model = fitted(data)
    history = data.until(FIT_AT + 2 * DAY).since(FIT_AT - WINDOW + STEP)
    calls: list[int] = []
    real = SeasonalBaseline.predict

    def counted(self: SeasonalBaseline, recent: Series, steps: int) -> FloatArray:
        calls.append(steps)
        return real(self, recent, steps)

    monkeypatch.setattr(SeasonalBaseline, "predict", counted)
    driftstate.rebuild(SPEC, model, history, window=WINDOW)
    assert calls == []
    monkeypatch.setattr(manyorigin, "forecasts", lambda *_a, **_k: None)
    driftstate.rebuild(SPEC, fitted(data), history, window=WINDOW)
    assert len(calls) > 2 * 2 * 288  # two a forecast (its band too), two days of origins


def assert_same_tracker(
    a: drift_tracker.DriftTracker,
    b: drift_tracker.DriftTracker,
    *,
    arrays: tuple[str, ...] = ("upper",),
    null: bool = False,
) -> None:
    """Two drift trackers hold the same state: the monitor's windows and counters, what is
    scored, and each pending forecast's `arrays`, bit for bit (and the null, with `null`)."""
    x, y = a.monitor, b.monitor
    assert (x.state, x.observations) == (y.state, y.observations)
    if null:
        assert x.null == y.null
    assert (list(x.short), list(x.long), list(x.recent)) == (
        list(y.short),
        list(y.long),
        list(y.recent),
    )
    assert (a.scored_until, x.retrain_requested) == (b.scored_until, y.retrain_requested)
    assert sorted(a.pending) == sorted(b.pending)
    for origin, forecast in a.pending.items():
        for name in arrays:
            assert np.array_equal(getattr(forecast, name), getattr(b.pending[origin], name))
