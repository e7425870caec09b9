"""The invariants of the decision and the prewarm ledger (issue 4), over random inputs."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.decision import budget, policy

HOUR = 3600.0
loads = st.one_of(
    st.floats(min_value=-10, max_value=1e6),
    st.sampled_from([0.0, math.nan, math.inf, -math.inf]),
)
peaks = st.one_of(st.none(), loads, st.floats(allow_nan=True, allow_infinity=True))
reasons = st.sampled_from([None, policy.Reason.DRIFT_FALLBACK, policy.Reason.NO_MODEL])
helds = st.one_of(st.none(), loads)
"""The lead time's highest load, held past the HPA's stabilisation as paid prewarm."""


@st.composite
def limit_sets(draw: st.DrawFn) -> policy.Limits:
    low = draw(st.integers(0, 20))
    return policy.Limits(
        threshold=draw(st.floats(min_value=0.01, max_value=1e4)),
        min_replicas=low,
        max_replicas=draw(st.integers(low, 200)),
        max_prewarm_replicas=draw(st.integers(0, 30)),
    )


@settings(max_examples=400, deadline=None)
@given(
    load=loads,
    peak=peaks,
    limits=limit_sets(),
    allowance=st.integers(-5, 1000),
    fb=reasons,
    held=helds,
    level=helds,
)
def test_never_below_reactive_nor_above_max_replicas_nor_prewarm_cap(
    load: float,
    peak: float | None,
    limits: policy.Limits,
    allowance: int,
    fb: policy.Reason | None,
    held: float | None,
    level: float | None,
) -> None:
    d = policy.decide(
        load=load,
        forecast_peak=peak,
        limits=limits,
        allowance=allowance,
        fallback=fb,
        held_load=held,
        level_load=level,
    )
    assert d.desired >= min(d.reactive, limits.max_replicas)
    assert d.desired <= limits.max_replicas
    assert d.desired <= max(d.reactive + limits.max_prewarm_replicas, limits.min_replicas)
    assert 0 <= d.prewarm <= min(limits.max_prewarm_replicas, max(allowance, 0))
    assert isinstance(d.reason, policy.Reason)


@settings(max_examples=300, deadline=None)
@given(load=loads, peak=peaks, limits=limit_sets(), fb=reasons, held=helds, level=helds)
def test_a_budget_of_zero_gives_exactly_the_reactive_decision_and_holds_nothing(
    load: float,
    peak: float | None,
    limits: policy.Limits,
    fb: policy.Reason | None,
    held: float | None,
    level: float | None,
) -> None:
    ours = policy.decide(
        load=load,
        forecast_peak=peak,
        limits=limits,
        allowance=0,
        fallback=fb,
        held_load=held,
        level_load=level,
    )
    reactive = policy.decide(load=load, forecast_peak=None, limits=limits, allowance=0)
    assert ours.desired == reactive.desired
    assert ours.prewarm == 0


@settings(max_examples=300, deadline=None)
@given(
    load=loads,
    peak=peaks,
    limits=limit_sets(),
    a=st.integers(0, 50),
    extra=st.integers(0, 50),
    fb=reasons,
    held=helds,
    level=helds,
)
def test_more_budget_never_yields_fewer_replicas(
    load: float,
    peak: float | None,
    limits: policy.Limits,
    a: int,
    extra: int,
    fb: policy.Reason | None,
    held: float | None,
    level: float | None,
) -> None:
    common = {
        "load": load,
        "forecast_peak": peak,
        "limits": limits,
        "fallback": fb,
        "held_load": held,
        "level_load": level,
    }
    less = policy.decide(**common, allowance=a)  # type: ignore[arg-type]
    more = policy.decide(**common, allowance=a + extra)  # type: ignore[arg-type]
    assert more.desired >= less.desired


@settings(max_examples=200, deadline=None)
@given(
    budget_hours=st.floats(min_value=0, max_value=50),
    extra=st.floats(min_value=0, max_value=50),
    charges=st.lists(st.tuples(st.floats(0, 3 * 86400), st.integers(0, 5)), max_size=30),
    now=st.floats(0, 4 * 86400),
    reserve=st.floats(0, 1),
)
def test_a_larger_budget_never_allows_less_after_the_same_charges(
    budget_hours: float,
    extra: float,
    charges: list[tuple[float, int]],
    now: float,
    reserve: float,
) -> None:
    small = budget.Ledger(budget=budget_hours, window=86400.0)
    large = budget.Ledger(budget=budget_hours + extra, window=86400.0)
    for at, replicas in charges:
        fits = min(replicas, small.allowance(at, 300.0))
        small.charge(at, fits, 300.0)
        large.charge(at, fits, 300.0)
    assert large.allowance(now, 300.0, reserve=reserve) >= small.allowance(
        now, 300.0, reserve=reserve
    )


# ---- the ledger over a simulated sequence of steps --------------------------------------------

clock_moves = st.one_of(
    st.sampled_from([300.0, 300.0, 300.0, 30.0]),  # mostly regular steps
    st.floats(min_value=-3 * 86400, max_value=3 * 86400),  # jumps back and forth
    st.sampled_from([-1800.0, -43200.0]),  # back by half a window (of 1 h, of 1 day)
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0]),  # broken clocks
)
ratios = st.floats(min_value=1.0, max_value=policy.MAX_LEVEL_RATIO)
"""policy.level_ratio: how far the calibrated band reaches above its median."""
steps = st.tuples(clock_moves, loads, peaks, st.sampled_from([30.0, 300.0, 600.0, math.nan]))
Step = tuple[float, float, float | None, float]
"""(clock move, load, forecast peak, step) of one simulated decision."""


def walked(sequence: list[Step]) -> Iterator[tuple[float, float, float | None, float, list[float]]]:
    """Each step of `sequence` as (stamp, load, peak, step, the last three loads): the clock
    starts at 1,000,000 and moves by each finite move; a broken move is the step's stamp itself
    and leaves the clock where it was."""
    now = 1_000_000.0
    recent: list[float] = []
    for move, load, peak, step in sequence:
        stamp = now + move if math.isfinite(move) else move
        if math.isfinite(stamp):
            now = stamp
        recent = [*recent[-2:], load]  # the hold: the highest of the last three samples
        yield stamp, load, peak, step, recent


def in_window(records: list[tuple[float, float]], end: float, window: float) -> float:
    """What `records` (time, amount) hold in the window (end - window, end]."""
    return sum(x for t, x in records if end - window < t <= end)


@settings(max_examples=150, deadline=None)
@given(
    sequence=st.lists(steps, min_size=1, max_size=120),
    budget_amount=st.floats(min_value=0, max_value=30),
    window=st.sampled_from([3600.0, 86400.0]),
    price=st.one_of(st.none(), st.floats(min_value=0.01, max_value=10)),
    limits=limit_sets(),
    ratio=ratios,
)
def test_prewarm_spent_in_any_window_never_exceeds_the_budget(
    sequence: list[Step],
    budget_amount: float,
    window: float,
    price: float | None,
    limits: policy.Limits,
    ratio: float,
) -> None:
    ledger = budget.Ledger(budget=budget_amount, window=window, cost_per_replica_hour=price)
    spent: list[tuple[float, float]] = []
    for stamp, load, peak, step, recent in walked(sequence):
        d = policy.decide(
            load=load,
            forecast_peak=peak,
            limits=limits,
            allowance=ledger.allowance(stamp, step),
            held_load=policy.floor_load(recent),
            level_load=policy.floor_load(recent) * ratio,
        )
        hours = ledger.charge(stamp, d.prewarm, step)
        if hours > 0:
            assert math.isfinite(stamp)
            spent.append((stamp, hours * (price or 1.0)))
    for end, _ in spent:  # every window that ends at a charge: the worst ones
        assert in_window(spent, end, window) <= budget_amount + 1e-6


@settings(max_examples=100, deadline=None)
@given(sequence=st.lists(steps, min_size=1, max_size=60), limits=limit_sets())
def test_with_a_budget_of_zero_every_decision_of_a_sequence_is_reactive(
    sequence: list[tuple[float, float, float | None, float]], limits: policy.Limits
) -> None:
    ledger = budget.Ledger(budget=0.0, window=86400.0)
    now = 0.0
    for move, load, peak, step in sequence:
        now = now + move if math.isfinite(move) else now
        d = policy.decide(
            load=load, forecast_peak=peak, limits=limits, allowance=ledger.allowance(now, step)
        )
        ledger.charge(now, d.prewarm, step)
        assert (
            d.desired
            == policy.decide(load=load, forecast_peak=None, limits=limits, allowance=0).desired
        )


def test_shadow_mode_answers_reactive_while_the_predictive_decision_prewarms() -> None:
    limits = policy.Limits(threshold=10.0, max_prewarm_replicas=5)
    predictive = policy.decide(load=40.0, forecast_peak=75.0, limits=limits, allowance=10)
    served = policy.decide(
        load=40.0, forecast_peak=None, limits=limits, allowance=0, fallback=policy.Reason.REACTIVE
    )
    assert (predictive.desired, predictive.reason) == (8, policy.Reason.FORECAST)
    assert (served.desired, served.prewarm) == (4, 0)


def test_the_hold_past_the_hpa_window_is_paid_prewarm_with_its_own_reason() -> None:
    limits = policy.Limits(threshold=10.0, max_prewarm_replicas=5)
    held = policy.decide(load=40.0, forecast_peak=None, limits=limits, allowance=10, held_load=70.0)
    assert (held.reactive, held.prewarm, held.desired, held.reason) == (
        4,
        3,
        7,
        policy.Reason.HOLD,
    )
    capped = policy.decide(load=40.0, forecast_peak=None, limits=limits, allowance=1, held_load=70)
    assert (capped.desired, capped.reason) == (5, policy.Reason.BUDGET_CAPPED)
    higher = policy.decide(load=40.0, forecast_peak=85.0, limits=limits, allowance=10, held_load=70)
    assert (higher.desired, higher.reason) == (9, policy.Reason.FORECAST)
    lower = policy.decide(load=40.0, forecast_peak=55.0, limits=limits, allowance=10, held_load=70)
    assert (lower.desired, lower.reason) == (7, policy.Reason.HOLD)
    drifted = policy.decide(
        load=40.0,
        forecast_peak=85.0,
        limits=limits,
        allowance=10,
        fallback=policy.Reason.DRIFT_FALLBACK,
        held_load=70.0,
    )
    assert (drifted.desired, drifted.reason) == (7, policy.Reason.DRIFT_FALLBACK)


@pytest.mark.parametrize(
    "fallback", [policy.Reason.DRIFT_FALLBACK, policy.Reason.NO_MODEL, policy.Reason.BUDGET_UNKNOWN]
)
def test_a_fallback_stays_the_reason_when_a_cap_cuts_its_hold(fallback: policy.Reason) -> None:
    limits = policy.Limits(threshold=10.0, max_prewarm_replicas=2)
    for allowance in (0, 1, 10):  # the budget (0: budget_unknown's), then maxPrewarmReplicas
        d = policy.decide(
            load=40.0,
            forecast_peak=None,
            limits=limits,
            allowance=allowance,
            fallback=fallback,
            held_load=70.0,
        )
        assert (d.prewarm, d.reason) == (min(allowance, 2), fallback)
    # maxReplicas still names itself: it is a limit the user set, not the fallback's doing
    top = policy.Limits(threshold=10.0, max_replicas=5)
    cut = policy.decide(
        load=40.0, forecast_peak=None, limits=top, allowance=10, fallback=fallback, held_load=70
    )
    assert (cut.desired, cut.reason) == (5, policy.Reason.MAX_REPLICAS)


def test_the_free_floor_is_the_hpa_window_never_longer_than_the_lead_time() -> None:
    assert policy.free_samples(600.0, 300.0) == 1  # the yardstick's reactive: L[t-1] alone
    assert policy.free_samples(600.0, 30.0) == 10
    assert policy.free_samples(120.0, 30.0) == policy.floor_samples(120.0, 30.0) == 5
    assert policy.free_samples(600.0, 1800.0) == 1
    assert policy.stabilisation_samples(math.nan) == 1


def test_an_absurd_load_asks_for_max_replicas_instead_of_crashing() -> None:
    # 1e308 / 0.001 overflows to inf; found by hypothesis, kept as a fixed example.
    limits = policy.Limits(threshold=0.001, max_replicas=40)
    decision = policy.decide(load=1e308, forecast_peak=1e308, limits=limits, allowance=0)
    assert decision.reactive == policy.REPLICA_CAP
    assert decision.desired == 40
    assert decision.reason == policy.Reason.MAX_REPLICAS


@settings(max_examples=150, deadline=None)
@given(
    sequence=st.lists(steps, min_size=1, max_size=120),
    share=st.floats(min_value=0.001, max_value=budget.MAX_SHARE),
    window=st.sampled_from([3600.0, 86400.0]),
    price=st.one_of(st.none(), st.floats(min_value=0.01, max_value=10)),
    limits=limit_sets(),
    ratio=ratios,
    wake=st.sampled_from([0.0, 0.25, 4.0]),
)
def test_prewarm_in_a_window_never_exceeds_its_share_of_the_reactive_hours_in_it(
    sequence: list[Step],
    share: float,
    window: float,
    price: float | None,
    limits: policy.Limits,
    ratio: float,
    wake: float,
) -> None:
    """...or the wake-up floor (budget.wake_floor) when that is more."""
    ledger = budget.Ledger(
        budget=0.0, window=window, cost_per_replica_hour=price, share=share, wake_hours=wake
    )
    spent: list[tuple[float, float]] = []
    used: list[tuple[float, float]] = []
    for stamp, load, peak, step, recent in walked(sequence):
        d = policy.decide(
            load=load,
            forecast_peak=peak,
            limits=limits,
            allowance=ledger.allowance(stamp, step),
            held_load=policy.floor_load(recent),
            level_load=policy.floor_load(recent) * ratio,
        )
        hours = ledger.charge(stamp, d.prewarm, step)
        if hours > 0:
            spent.append((stamp, hours))
        used.append((stamp, ledger.record_reactive(stamp, d.reactive, step)))
    for end, _ in spent:  # every window that ends at a charge
        allowed = max(share * in_window(used, end, window), wake)
        assert in_window(spent, end, window) <= allowed + 1e-6


def test_the_level_insured_at_the_band_is_paid_prewarm_with_its_own_reason() -> None:
    limits = policy.Limits(threshold=10.0, max_prewarm_replicas=5)

    def decide(
        peak: float | None, level: float, *, allowance: int = 10, fb: policy.Reason | None = None
    ) -> tuple[int, policy.Reason]:
        d = policy.decide(
            load=40.0,
            forecast_peak=peak,
            limits=limits,
            allowance=allowance,
            fallback=fb,
            held_load=50.0,
            level_load=level,
        )
        return d.desired, d.reason

    assert decide(45.0, 65.0) == (7, policy.Reason.LEVEL)
    assert decide(75.0, 65.0) == (8, policy.Reason.FORECAST)
    assert decide(45.0, 48.0) == (5, policy.Reason.HOLD)
    assert decide(45.0, 65.0, allowance=1) == (5, policy.Reason.BUDGET_CAPPED)
    for fallback in (policy.Reason.DRIFT_FALLBACK, policy.Reason.NO_MODEL):
        assert decide(45.0, 65.0, fb=fallback) == (5, fallback)  # no forecast, no band
    assert decide(None, 65.0) == (5, policy.Reason.HOLD)


def test_the_level_ratio_is_the_bands_reach_above_its_median_bounded() -> None:
    assert policy.level_ratio([12.0, 30.0], [10.0, 10.0]) == 1.2  # the first point only
    assert policy.level_ratio([12.0, 30.0], [10.0, 10.0], points=2) == 3.0
    assert policy.level_ratio([8.0], [10.0]) == 1.0  # never below the level
    assert policy.level_ratio([1e9], [1.0]) == policy.MAX_LEVEL_RATIO
    for upper, median in (([5.0], [0.0]), ([math.nan], [1.0]), ([1.0], [math.inf]), ([], [])):
        assert policy.level_ratio(upper, median) == 1.0


def test_the_quantile_slides_to_the_median_once_half_the_budget_is_spent() -> None:
    for left in [i / 20 for i in range(21)]:
        read = policy.affordable_quantile(0.95, remaining=left * 10, budget=10.0)
        assert policy.MEDIAN <= read <= 0.95
        if left >= policy.FULL_INSURANCE_LEFT:
            assert read == pytest.approx(0.95)
        else:
            assert read == pytest.approx(policy.MEDIAN + 0.45 * left / policy.FULL_INSURANCE_LEFT)
    assert policy.affordable_quantile(0.95, remaining=0.0, budget=10.0) == policy.MEDIAN


def test_an_unknown_or_absent_budget_reads_the_median() -> None:
    for remaining, limit in ((math.nan, 10.0), (1.0, 0.0), (math.inf, math.inf), (5.0, -1.0)):
        assert policy.affordable_quantile(0.95, remaining=remaining, budget=limit) == policy.MEDIAN
