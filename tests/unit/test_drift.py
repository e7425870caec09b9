"""Forecast drift: the false-alarm rate on autocorrelated errors, the state machine, the
tracker's alignment, and fallback on a regime change (x3, x0.3, an outage) in a replay."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from models.base import DAY, HOUR, WEEK, Forecast, Series
from models.seasonal import SeasonalBaseline
from scaler.decision import drift, drift_measure, drift_null, drift_tracker
from scaler.offline import replay, replay_config, replay_summary
from scaler.offline.traces import read_trace

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
STEP = 300.0
START = 1_700_006_400.0  # a midnight UTC
FALLBACK = ("drift_fallback", "drift_margin")
"""The reasons of a decision made in drift fallback (plain reactive, or with the margin)."""
Z95 = 1.6448536269514722


def daily_cycle(
    days: float, *, change: tuple[float, float] | None = None, factor: float = 3.0, seed: int = 0
) -> Series:
    """Poisson load around a daily sine (50..350 per step), x `factor` between change[0] and
    change[1] (in days from the start)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / STEP)) * STEP
    mean = 200 + 150 * np.sin(2 * np.pi * (t / DAY - 0.3))
    if change is not None:
        mean = np.where((t >= change[0] * DAY) & (t < change[1] * DAY), factor * mean, mean)
    return Series(START, STEP, rng.poisson(mean).astype(float))


def fallback_spans(frame: object, origin: int) -> list[tuple[float, float]]:
    """(start, end) in hours from step `origin` of each run of drift fallback decisions."""
    reasons = np.isin(np.asarray(getattr(frame, "reason")), FALLBACK)  # noqa: B009
    edges = np.diff(np.concatenate([[0], reasons.astype(int), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    hours = STEP / 3600
    return [((a - origin) * hours, (b - origin) * hours) for a, b in zip(starts, ends, strict=True)]


def ar1(n: int, phi: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance AR(1) noise."""
    shocks = rng.normal(0.0, math.sqrt(1 - phi**2), n)
    out = np.empty(n)
    out[0] = rng.normal()
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


def alarms(
    errors: np.ndarray, null: drift_null.Null | None, *, sigma: float = 10.0, run_test: bool = False
) -> int:
    """Fallback episodes of a monitor fed forecasts off by `errors` (in sigmas), with a band
    calibrated for them (P95 = 1.645 sigmas)."""
    monitor = drift.DriftMonitor(step=STEP, null=null, run_test=run_test)
    episodes = 0
    for e in errors:
        was = monitor.in_fallback
        monitor.observe(0.0, 100.0 + sigma * float(e), 100.0, 100.0 + Z95 * sigma)
        episodes += int(not was and monitor.in_fallback)
    return episodes


def measured_null(errors: np.ndarray) -> drift_null.Null:
    """The null a week of calibration errors (in sigmas) gives."""
    u = drift_null.band_units(
        100.0 + 10.0 * errors,
        np.full(errors.size, 100.0),
        np.full(errors.size, 100.0 + Z95 * 10.0),
        level=0.0,
    )
    return drift_measure.null_from(u, step=STEP)


@pytest.mark.parametrize("run_test", [False, True])
def test_ar1_errors_with_phi_0_9_raise_at_most_one_alarm_per_14_simulated_days(
    run_test: bool,
) -> None:
    weeks_per_run, runs = 13, 4
    episodes = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        null = measured_null(ar1(int(WEEK / STEP), 0.9, rng))  # the calibration week
        errors = ar1(int(weeks_per_run * WEEK / STEP), 0.9, rng)
        episodes += alarms(errors, null, run_test=run_test)
    weeks = weeks_per_run * runs
    assert episodes <= weeks / 2, f"{episodes} alarms in {weeks} weeks"


def test_ignoring_the_autocorrelation_of_the_same_errors_raises_alarms_every_few_days() -> None:
    # The ablation: a null whose spreads are sd / sqrt(window), as for independent errors.
    rng = np.random.default_rng(0)
    measured = measured_null(ar1(int(WEEK / STEP), 0.9, rng))
    sd = 1.0  # one error's sd in band-sigmas
    naive = drift_null.Null(
        windows=measured.windows,
        means=measured.means,
        spreads=(sd / math.sqrt(measured.windows[0]), sd / math.sqrt(measured.windows[1])),
        z=measured.z,
        limits=(
            measured.z * sd / math.sqrt(measured.windows[0]),
            measured.z * sd / math.sqrt(measured.windows[1]),
        ),
        samples=measured.samples,
    )
    errors = ar1(int(4 * WEEK / STEP), 0.9, rng)
    assert alarms(errors, naive) >= 8 > alarms(errors, measured)


def test_the_null_of_autocorrelated_errors_is_wider_than_that_of_independent_ones() -> None:
    rng = np.random.default_rng(3)
    n = int(WEEK / STEP)
    correlated, independent = measured_null(ar1(n, 0.9, rng)), measured_null(rng.normal(size=n))
    assert correlated.spreads[0] > 1.5 * independent.spreads[0]
    assert correlated.spreads[1] > 2.0 * independent.spreads[1]


def test_too_short_a_backtest_gives_the_conservative_null() -> None:
    null = drift_measure.null_from(np.zeros(10), step=STEP)
    assert null == drift_null.Null.conservative(STEP)
    assert null.samples == 0


def test_the_null_of_a_fitted_model_is_measured_on_its_calibration_week() -> None:
    series = daily_cycle(21)
    from models.calibrate import fit_calibrated

    model = fit_calibrated(SeasonalBaseline, series, steps=6)
    null = drift_measure.null_for(model, series, lead_time=600.0, quantile=0.95)
    assert null.samples >= int(WEEK / STEP) - 2
    assert null.windows == drift_null.windows(STEP)
    # Poisson noise around a seasonal forecast: centred, and narrower than the conservative null
    assert abs(null.means[0]) < 0.5
    assert null.spreads[1] < drift_null.Null.conservative(STEP).spreads[1]


def feed(monitor: drift.DriftMonitor, actuals: list[float], p50: float = 100.0) -> None:
    for i, actual in enumerate(actuals):
        monitor.observe(i * STEP, actual, p50, p50 * 1.2)


def test_load_three_times_the_forecast_trips_even_the_conservative_null_within_30_minutes() -> None:
    monitor = drift.DriftMonitor(step=STEP)
    feed(monitor, [100.0] * 20 + [300.0] * 5)
    assert not monitor.in_fallback
    feed(monitor, [300.0])
    assert monitor.in_fallback
    assert monitor.take_retrain() is True
    assert monitor.take_retrain() is False


def test_one_outlier_alone_never_trips_fallback() -> None:
    monitor = drift.DriftMonitor(step=STEP)
    feed(monitor, [100.0] * 20 + [10_000.0] + [100.0] * 20 + [0.0] + [100.0] * 20)
    assert not monitor.in_fallback


def test_fallback_is_left_only_after_a_long_window_of_accuracy_and_a_run_of_settled_points() -> (
    None
):
    monitor = drift.DriftMonitor(step=STEP)
    feed(monitor, [100.0] * 10 + [300.0] * 6)
    assert monitor.in_fallback
    short, long = drift_null.windows(STEP)
    feed(monitor, [100.0] * (long - 1))
    assert monitor.in_fallback  # the long window, restarted on entering, is not full yet
    feed(monitor, [300.0] * 3 + [100.0] * 3)
    assert monitor.in_fallback  # the misses pushed the short window out again
    feed(monitor, [100.0] * (short + drift.RELEASE_AFTER))
    assert not monitor.in_fallback


def test_missing_actuals_are_not_scored_and_a_nan_forecast_is_a_miss() -> None:
    monitor = drift.DriftMonitor(step=STEP)
    monitor.observe(0.0, math.nan, 100.0, 120.0)
    assert monitor.observations == 0
    for _ in range(drift_null.windows(STEP)[0] + drift.CONFIRM - 1):
        monitor.observe(0.0, 100.0, math.nan, math.nan)
    assert monitor.in_fallback


def test_the_tracker_scores_each_actual_against_the_forecast_made_lead_time_before() -> None:
    tracker = drift_tracker.DriftTracker(lead_time=600.0)
    for origin in (1000.0, 1300.0, 1600.0):  # forecasts after observing origin - STEP
        path = np.array([origin, origin + 1, origin + 2])  # p50 = the origin, to identify it
        tracker.record(Forecast(origin, STEP, path, path + 1e9, 0.95))
    seen: list[tuple[float, float]] = []
    tracker.monitor.observe = lambda at, actual, p50, upper: seen.append((at, p50))  # type: ignore[method-assign]
    tracker.score(Series(1000.0, STEP, np.array([5.0, 5.0, 5.0, 5.0])))
    # 600 s ahead is 2 steps: the actual at 1300 was forecast by the origin 1000 (its point 1).
    assert seen == [(1300.0, 1001.0), (1600.0, 1301.0), (1900.0, 1601.0)]


def engaged_after(
    series: Series, change_day: float, threshold: float = 40.0, *, ablation: bool = False
) -> list[tuple[float, float]]:
    """Fallback spans in hours from `change_day`; `ablation`: no run test and the margin after
    a drop kept (ReplayConfig.drift_run_test, drop_margin: the defaults before session 17)."""
    config = replay_config.ReplayConfig(
        threshold=threshold, drift_run_test=not ablation, drop_margin=ablation
    )
    frame, extra = replay.simulate(series, config, make=SeasonalBaseline)
    assert extra["retrains"] >= 1
    return fallback_spans(frame, int(change_day * DAY / STEP))


@pytest.mark.parametrize("ablation", [False, True], ids=["default", "no run test"])
@pytest.mark.parametrize("factor", [3.0, 0.3, 0.0], ids=["x3", "x0.3", "outage to zero"])
def test_fallback_engages_within_30_minutes_of_a_step_change_in_load(
    factor: float, ablation: bool
) -> None:
    spans = engaged_after(daily_cycle(12, change=(10, 99), factor=factor), 10, ablation=ablation)
    after = [(a, b) for a, b in spans if a >= 0]
    assert after and after[0][0] <= 0.5, after
    before = [(a, b) for a, b in spans if -8 * 24 <= a < 0]  # after the first week's fit
    assert len(before) <= 1, f"more than one false alarm in the 8 days before the change: {before}"


def test_fallback_releases_after_the_load_returns_to_normal() -> None:
    series = daily_cycle(14, change=(10, 11))
    frame, _ = replay.simulate(
        series, replay_config.ReplayConfig(threshold=40.0), make=SeasonalBaseline
    )
    back = int(11 * DAY / STEP)
    spans = fallback_spans(frame, back)
    assert any(a <= 0.5 and b >= 0 for a, b in spans if a > -24), spans  # engaged on the change
    # The return is a drop against a model fitted on the x3 day: fallback holds until a model
    # trained on a day of the normal load is in use (the relearn hold), then lets go.
    settle = drift.RETRAIN_AGAIN / 3600 + 8.0
    late = [(a, b) for a, b in spans if b > settle]
    assert sum(b - max(a, settle) for a, b in late) <= 2.0, f"still falling back: {late}"


@pytest.mark.skipif(not (TRACES / "nasa_http_5min.csv").exists(), reason="needs ../shared")
def test_fallback_engages_within_30_minutes_of_the_nasa_recovery_and_releases_within_a_day() -> (
    None
):
    trace = read_trace(TRACES / "nasa_http_5min.csv")
    series = trace.since(trace.start + 20 * DAY).until(trace.start + 36 * DAY)
    frame, _ = replay.simulate(
        series, replay_config.ReplayConfig(threshold=10.0), make=SeasonalBaseline
    )
    back = int(np.flatnonzero(frame["timestamp"] == "1995-08-03 04:40:00")[0])  # server is up
    spans = [(a, b) for a, b in fallback_spans(frame, back) if -1 <= a <= 24]
    assert spans and spans[0][0] <= 0.5, spans
    assert spans[0][1] <= 24.0, spans


def shifted(monitor: drift.DriftMonitor, shift: float, count: int, start: int) -> int:
    """Feed `count` observations `shift` band-sigmas off (a band 1 wide: nearly linear units)."""
    for i in range(count):
        monitor.observe((start + i) * STEP, 100.0 + shift, 100.0, 100.0 + Z95)
    return start + count


def test_a_moderate_shift_must_hold_a_whole_short_window_and_a_gross_one_engages_within_it() -> (
    None
):
    null = measured_null(np.random.default_rng(5).normal(size=int(WEEK / STEP)))
    short = null.windows[0]
    moderate = (max(null.sides()[0][0], null.sides()[1][0]) + null.z) / 2  # past its limit only
    monitor = drift.DriftMonitor(step=STEP, null=null)
    t = shifted(monitor, 0.0, short, 0)
    t = shifted(monitor, moderate, short - 2, t)  # a burst shorter than the short window
    assert not monitor.in_fallback
    t = shifted(monitor, 0.0, short, t)
    t = shifted(monitor, moderate, 2 * short, t)  # the same shift, held
    assert monitor.in_fallback
    gross = drift.DriftMonitor(step=STEP, null=null)
    shifted(gross, 6.0, short, shifted(gross, 0.0, short, 0))  # x3 for half an hour
    assert gross.in_fallback


def test_after_a_drop_fallback_holds_until_a_model_trained_a_day_later_is_in_use() -> None:
    null = measured_null(np.random.default_rng(6).normal(size=int(WEEK / STEP)))
    monitor = drift.DriftMonitor(step=STEP, null=null, fitted_until=0.0)
    t = shifted(monitor, -6.0, 10, shifted(monitor, 0.0, 20, 0))  # a drop: phantom prewarm
    assert monitor.in_fallback and monitor.take_retrain()
    entered = monitor.entered_at
    day = int(drift.RETRAIN_AGAIN / STEP)
    t = shifted(monitor, 0.0, day - 10, t)  # accurate again, but no model has seen the new regime
    assert monitor.in_fallback
    t = shifted(monitor, 0.0, 20, t)  # a day in: another refit is asked for
    assert monitor.take_retrain()
    monitor.fitted_until = entered + drift.RETRAIN_AGAIN  # the owner adopted that refit
    shifted(monitor, 0.0, drift.RELEASE_AFTER + 1, t)
    assert not monitor.in_fallback


def test_after_a_rise_fallback_needs_no_new_model_to_end() -> None:
    null = measured_null(np.random.default_rng(6).normal(size=int(WEEK / STEP)))
    monitor = drift.DriftMonitor(step=STEP, null=null, fitted_until=0.0)
    t = shifted(monitor, 6.0, 10, shifted(monitor, 0.0, 20, 0))  # a forecast too low buys nothing
    assert monitor.in_fallback
    shifted(monitor, 0.0, null.windows[1] + drift.RELEASE_AFTER, t)
    assert not monitor.in_fallback


def steady(monitor: drift.DriftMonitor, u: np.ndarray, start: int) -> int:
    """Feed errors `u` (band-sigmas, a band 1 wide) from step `start` on; returns the next step."""
    for i, e in enumerate(u):
        monitor.observe((start + i) * STEP, 100.0 + float(e), 100.0, 100.0 + Z95)
    return start + len(u)


def test_a_window_of_misses_inside_a_wide_band_trips_the_miss_test_and_not_the_means() -> None:
    # A drop on a wide (autocorrelated) band: every point a little past the band's lower edge,
    # the windowed mean still within its limit (NASA's midnight drop). The ablation has no
    # miss test and never engages.
    rng = np.random.default_rng(7)
    null = measured_null(ar1(int(WEEK / STEP), 0.8, rng))
    assert null.misses is not None
    long = null.windows[1]
    lower = null.sides()[1][1]
    assert null.misses[1] < long
    shift = null.means[1] - 0.8 * lower  # past the band's edge, inside the long mean's limit
    assert shift < -Z95
    drop = shift + 0.05 * rng.normal(size=2 * long)
    alone = dataclasses.replace(null, run=None)  # the run test would engage first (below)
    for test, engaged in ((alone, True), (dataclasses.replace(alone, misses=None), False)):
        monitor = drift.DriftMonitor(step=STEP, null=test)
        steady(monitor, drop, steady(monitor, np.zeros(long), 0))
        assert monitor.in_fallback is engaged


def test_the_miss_test_allows_more_misses_to_autocorrelated_errors_than_to_independent_ones() -> (
    None
):
    rng = np.random.default_rng(8)
    n = int(WEEK / STEP)
    correlated, independent = measured_null(ar1(n, 0.9, rng)), measured_null(rng.normal(size=n))
    assert correlated.misses is not None and independent.misses is not None
    long = correlated.windows[1]
    # independent errors: a binomial(long, 5%) passes 20% of the window with a chance of 1e-5
    assert independent.misses[0] < 0.35 * long
    assert correlated.misses[0] > 1.5 * independent.misses[0]
    assert drift_measure.effective_size(ar1(n, 0.9, rng), long) < 0.2 * long
    assert drift_measure.effective_size(rng.normal(size=n), long) > 0.7 * long


def test_load_back_after_a_gap_longer_than_the_long_window_restarts_in_fallback() -> None:
    null = measured_null(np.random.default_rng(9).normal(size=int(WEEK / STEP)))
    long_steps = int(drift.STALE_AFTER / STEP)
    for gap, engaged in ((long_steps + 1, True), (long_steps - 1, False)):
        monitor = drift.DriftMonitor(step=STEP, null=null)
        t = steady(monitor, np.zeros(20), 0)
        steady(monitor, np.zeros(1), t + gap)  # accurate, but after `gap` steps without data
        assert monitor.in_fallback is engaged
        assert monitor.take_retrain() is engaged


def test_a_gap_the_calibration_week_holds_routinely_does_not_restart_trust() -> None:
    # A call centre closed 10 hours every night: the calibration errors have those gaps, so a
    # nightly gap is how this load looks when healthy; a gap longer than any it held restarts.
    rng = np.random.default_rng(11)
    day, night = int(DAY / STEP), int(10 * HOUR / STEP)
    errors = rng.normal(size=7 * day)
    for d in range(7):
        errors[d * day : d * day + night] = np.nan
    null = measured_null(errors)
    assert null.routine_gap == (night + 1) * STEP
    once = rng.normal(size=7 * day)
    once[day : day + 2 * night] = np.nan  # one outage in the calibration week: not routine
    assert measured_null(once).routine_gap == STEP
    nightly_restarts = 0
    for gap, engaged in ((night + 1, False), (2 * night, True)):
        monitor = drift.DriftMonitor(step=STEP, null=null)
        t = steady(monitor, np.zeros(20), 0)
        steady(monitor, np.zeros(1), t + gap - 1)
        assert monitor.in_fallback is engaged
        nightly_restarts += monitor.in_fallback
    assert nightly_restarts == 1
    ablation = dataclasses.replace(null, routine_gap=0.0)  # the rule without the routine gap
    monitor = drift.DriftMonitor(step=STEP, null=ablation)
    steady(monitor, np.zeros(1), steady(monitor, np.zeros(20), 0) + night)
    assert monitor.in_fallback


def business_hours(days: float, *, seed: int = 0) -> Series:
    """`daily_cycle` seen only 07:00-21:00 on weekdays (a call centre): NaN at night and at
    weekends, as a trace with those rows missing reads."""
    series = daily_cycle(days, seed=seed)
    times = series.times()
    hour = (times % DAY) / HOUR
    weekday = ((times // DAY).astype(int) + 3) % 7  # 1970-01-01 was a Thursday; Monday is 0
    values = np.where((hour >= 7) & (hour < 21) & (weekday < 5), series.values, np.nan)
    return Series(series.start, series.step, values)


def test_a_week_of_business_hours_errors_gives_a_measured_null_not_the_conservative_one() -> None:
    # Five 14-hour days: fewer overlapping 6-hour windows than 8 x 72 (the old count refused
    # it), but ten independent ones; the nightly gap is the routine one.
    rng = np.random.default_rng(5)
    day, open_ = int(DAY / STEP), int(14 * HOUR / STEP)
    errors = np.full(7 * day, np.nan)
    for d in range(5):
        errors[d * day : d * day + open_] = ar1(open_, 0.5, rng)
    null = measured_null(errors)
    assert null.samples == 5 * open_
    assert null.routine_gap == (day - open_ + 1) * STEP
    assert (
        int((drift_measure.gapless_runs(errors) // null.windows[1]).sum())
        >= drift_measure.MIN_NULL_WINDOWS
    )
    short = errors.copy()
    short[3 * day :] = np.nan  # three days: too few independent windows, conservative
    assert measured_null(short).samples == 0


def test_business_hours_load_raises_under_one_episode_a_week_not_one_each_morning_or_monday(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    series = business_hours(28)
    config = replay_config.ReplayConfig(threshold=40.0)
    weeks = (series.span - replay_summary.WARMUP) / WEEK  # the yardstick's scored span

    def episodes() -> int:
        summary = replay.replay(series, config, make=SeasonalBaseline).summary
        return int(summary["drift"]["scored_episodes"])

    assert episodes() < weeks
    # The ablations: gaps read on the calibration week alone (the weekend is seen once, so each
    # Monday restarts), and no routine gap at all (every morning restarts).
    monkeypatch.setattr(drift_measure, "ROUTINE_SPAN", drift_measure.NULL_SPAN)
    assert episodes() >= math.floor(weeks)
    monkeypatch.setattr(drift_measure, "routine_gap", lambda errors, step: 0.0)
    assert episodes() > 2 * weeks


def test_fallback_steps_count_the_scored_steps_with_load_not_the_nights_and_weekends_between() -> (
    None
):
    # A fallback that spans a weekend decided nothing in it: its share of the scored steps
    # must count the steps `scored_steps` counts (with load), or a business-hours trace reads
    # a 4 % fallback as 15 % (bank_calls: 695 of 978 scored fallback steps had no load).
    series = business_hours(21)
    config = replay_config.ReplayConfig(threshold=40.0, drift=False)
    frame, extra = replay.simulate(series, config, make=SeasonalBaseline)
    extra[replay_summary.FALLBACK_AT] = np.ones(len(series), dtype=bool)  # fallback throughout
    summary = replay_summary.summarise(series, frame, extra, config)
    scored = summary["trace"]["scored_steps"]
    assert summary["drift"]["scored_fallback_steps"] == scored
    # The ablation: every step of the scored span, nights and weekends included.
    span = len(series) - replay_summary.warmup_steps(series)
    assert span > 1.5 * scored


def test_the_run_test_allows_autocorrelated_errors_longer_runs_below_the_band_than_independent_ones() -> (  # noqa: E501
    None
):
    rng = np.random.default_rng(10)
    n = int(WEEK / STEP)
    correlated, independent = measured_null(ar1(n, 0.9, rng)), measured_null(rng.normal(size=n))
    assert correlated.run is not None and independent.run is not None
    # independent misses at 5%: a run of n comes with chance 0.05^n per observation, and the
    # design rate allows about 2e-5 of them
    assert independent.run <= 1 + math.ceil(math.log(drift_null.side_chance(STEP)) / math.log(0.05))
    assert correlated.run > 2 * independent.run


def test_a_drop_just_below_the_band_engages_on_the_run_test_long_before_the_miss_test() -> None:
    # NASA's drop to 30% at night: every point a little past the band's lower edge on a wide
    # (autocorrelated) band. The run test engages once the run reaches its limit; without it
    # the monitor waits for the miss test's count (or the means).
    rng = np.random.default_rng(7)
    null = measured_null(ar1(int(WEEK / STEP), 0.8, rng))
    assert null.run is not None and null.misses is not None
    long = null.windows[1]
    lower = null.sides()[1][1]
    drop = null.means[1] - 0.8 * lower + 0.05 * rng.normal(size=2 * long)
    assert (drop < -Z95).all()
    engaged_at = {}
    for test in (null, dataclasses.replace(null, run=None)):
        monitor = drift.DriftMonitor(step=STEP, null=test, fitted_until=0.0, run_test=True)
        t = steady(monitor, np.zeros(long), 0)
        for i, e in enumerate(drop):
            steady(monitor, np.array([e]), t + i)
            if monitor.in_fallback:
                engaged_at[test.run] = i + 1
                break
    assert engaged_at[null.run] == null.run < long / 3
    assert engaged_at[None] > 2 * null.run


def test_a_fallback_entered_on_a_run_below_the_band_holds_as_after_a_drop() -> None:
    null = measured_null(np.random.default_rng(11).normal(size=int(WEEK / STEP)))
    assert null.run is not None
    monitor = drift.DriftMonitor(step=STEP, null=null, fitted_until=0.0, run_test=True)
    steady(monitor, np.full(null.run, -2.0), steady(monitor, np.zeros(null.windows[1]), 0))
    assert monitor.in_fallback and monitor.after_drop


def test_a_gap_in_the_scored_actuals_ends_a_run_below_the_band_as_in_the_calibration() -> None:
    # A business day's evening below the band and the next morning's are two runs, as the
    # calibration's run lengths count them (run_limit: a gap ends a run); a gap shorter than the
    # stale limit keeps every other window. The ablation, the same run with no gap, engages.
    null = measured_null(np.random.default_rng(11).normal(size=int(WEEK / STEP)))
    assert null.run is not None and null.run >= 2
    engaged = []
    for gap in (3, 0):
        monitor = drift.DriftMonitor(step=STEP, null=null, fitted_until=0.0, run_test=True)
        t = steady(
            monitor, np.full(null.run - 1, -2.0), steady(monitor, np.zeros(null.windows[1]), 0)
        )
        steady(monitor, np.array([-2.0]), t + gap)
        engaged.append(monitor.in_fallback)
    assert engaged == [False, True]


def test_a_run_the_calibration_backtest_itself_reached_is_no_evidence_of_drift() -> None:
    # Scattered misses at the nominal rate give a short chain limit; one routine run of 30 (a
    # business day's late start) lifts the limit past it, whatever the chain's geometric tail.
    rng = np.random.default_rng(5)
    missed = rng.random(4000) < 0.05
    finite = np.ones_like(missed)
    alpha = drift_null.side_chance(STEP)
    scattered = drift_measure.run_limit(missed, finite, width=288, alpha=alpha, rate=0.05)
    assert scattered is not None and scattered < 30
    missed[1000:1030] = True
    assert drift_measure.run_limit(missed, finite, width=288, alpha=alpha, rate=0.05) == 31


def test_the_run_limit_is_read_off_calibration_errors_scaled_to_the_band() -> None:
    # The calibration backtest forecasts with the final model, which has seen that week: its
    # errors are narrower than the band (in sample; NASA's and bank_calls' models 0.5-0.9 of it)
    # while a live forecast's are as wide as the band (out of sample). Runs below a fixed
    # -1.645 are then shorter in the calibration than live, and a limit read off them trips on
    # healthy load (bank_calls' evenings). Scaled to the band (the errors over their own robust
    # spread, as the means' deviations), the calibration's runs are the live ones'.
    n, weeks, seeds = int(WEEK / STEP), 8, 5
    trips = {True: 0, False: 0}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        calibration, live = 0.75 * ar1(n, 0.8, rng), ar1(weeks * n, 0.8, rng)
        for scaled in trips:
            limit = drift_measure.null_from(calibration, step=STEP, scaled_runs=scaled).run
            run = 0
            for e in live:
                run = run + 1 if e < -Z95 else 0
                if limit is not None and run >= limit:
                    trips[scaled], run = trips[scaled] + 1, 0
    # The run test's share of the design rate (one side of SIDES), with the factor of 4 the
    # design rate keeps for tails heavier than the null assumes, over the simulated weeks.
    allowed = 4 * drift_null.ALARMS_PER_WEEK / drift_null.SIDES * weeks * seeds
    assert trips[True] <= allowed < trips[False]


def test_a_calibration_wider_than_the_band_is_not_scaled_down_to_shorter_runs() -> None:
    # Errors 1.5x the band (a band too narrow for its model): scaled to it, their runs below
    # -1.645 would be rarer and the limit shorter than the raw runs give; they are read as is.
    rng = np.random.default_rng(3)
    wide = 1.5 * ar1(int(WEEK / STEP), 0.8, rng)
    scaled, raw = (
        drift_measure.null_from(wide, step=STEP, scaled_runs=s).run for s in (True, False)
    )
    assert scaled is not None and raw is not None
    assert scaled >= raw
