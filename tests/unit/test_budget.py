"""The prewarm ledger: strict rolling-window cap, clock jumps, money budgets."""

from __future__ import annotations

import math

import pytest

from scaler.decision import budget

DAY = 86400.0
STEP = 300.0


def test_the_allowance_is_the_whole_replicas_left_in_the_window() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY)  # one replica-hour: 12 replica-steps
    assert ledger.allowance(0.0, STEP) == 12
    ledger.charge(0.0, 5, STEP)
    assert ledger.allowance(STEP, STEP) == 7
    assert ledger.allowance(DAY, STEP) == 12  # the charge at 0 left the window (DAY - DAY, DAY]


def test_a_charge_past_the_allowance_is_refused_not_billed() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY)
    with pytest.raises(ValueError, match="allowance"):
        ledger.charge(0.0, 13, STEP)
    assert ledger.spent(0.0) == 0.0


def test_a_clock_jumping_back_after_a_window_cannot_spend_the_budget_twice() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY)
    ledger.charge(1000.0, 12, STEP)
    assert ledger.allowance(1000.0 + DAY, STEP) == 12  # a day later: refilled
    assert ledger.allowance(1500.0, STEP) == 0  # back within a day of the charge: still spent


def test_a_clock_jumping_back_more_than_a_window_gets_no_allowance_until_it_catches_up() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY)
    assert ledger.allowance(10 * DAY, STEP) == 12
    assert ledger.allowance(5 * DAY, STEP) == 0
    assert ledger.allowance(9.5 * DAY, STEP) == 12


def test_non_finite_times_steps_and_budgets_allow_nothing() -> None:
    assert budget.Ledger(budget=1.0, window=DAY).allowance(math.nan, STEP) == 0
    assert budget.Ledger(budget=1.0, window=DAY).allowance(0.0, math.inf) == 0
    assert budget.Ledger(budget=math.inf, window=DAY).allowance(0.0, STEP) == 0
    assert budget.Ledger(budget=0.0, window=DAY).allowance(0.0, STEP) == 0


def test_a_money_budget_is_charged_at_the_price_of_a_replica_hour() -> None:
    ledger = budget.Ledger(budget=10.0, window=DAY, cost_per_replica_hour=4.0)  # 2.5 replica-h
    assert ledger.allowance(0.0, 3600.0) == 2
    hours = ledger.charge(0.0, 2, 3600.0)
    assert hours == 2.0 and ledger.spent(0.0) == 8.0
    assert ledger.allowance(1.0, 1800.0) == 1  # 2 left buys half an hour of one replica


def test_a_reserve_keeps_part_of_the_budget_back() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY)
    assert ledger.allowance(0.0, STEP, reserve=0.5) == 6


# ---- a share of the window's reactive replica-hours --------------------------------------------


def reactive_for(ledger: budget.Ledger, *, start: float, replicas: int, steps: int) -> float:
    """Record `replicas` reactive replicas for `steps` steps from `start`; returns the end."""
    for i in range(steps):
        ledger.record_reactive(start + i * STEP, replicas, STEP)
    return start + steps * STEP


def test_a_share_budget_is_that_share_of_the_reactive_hours_in_the_window() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    end = reactive_for(ledger, start=0.0, replicas=10, steps=12)  # 10 replica-hours
    assert ledger.limit(end) == pytest.approx(1.0)
    assert ledger.allowance(end, STEP) == 12  # 1 replica-hour: 12 replica-steps
    ledger.charge(end, 12, STEP)
    assert ledger.allowance(end + STEP, STEP) == 0


def test_a_share_budget_starts_at_nothing_and_builds_up_with_the_reactive_use() -> None:
    ledger = budget.Ledger(budget=24.0, window=DAY, share=0.1)  # `budget` is not used
    assert ledger.allowance(0.0, STEP) == 0  # an empty window has no reactive hours yet
    ledger.record_reactive(0.0, 10, STEP)  # 10 x 5 min at 10 %: one replica for 5 minutes
    assert ledger.allowance(STEP, STEP) == 1


def test_a_share_budget_after_a_window_at_zero_buys_one_full_size_wake_up() -> None:
    wake = budget.wake_floor(10, 600.0 + 900.0)  # maxPrewarmReplicas for lead time + horizon
    assert wake == pytest.approx(10 * 1500 / 3600)
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.3, wake_hours=wake)
    friday = reactive_for(ledger, start=0.0, replicas=10, steps=120)  # 10 h at 10 replicas
    assert ledger.limit(friday) == pytest.approx(30.0) and not ledger.at_floor(friday)
    monday = friday + 2.5 * DAY  # a weekend at zero: no reactive hours in the window
    assert ledger.limit(monday) == pytest.approx(wake)
    assert ledger.allowance(monday, STEP) == 50  # 4.17 replica-hours: 10 replicas for 25 min
    assert ledger.at_floor(monday)
    ledger.charge(monday, 10, STEP)
    assert ledger.allowance(monday + STEP, STEP) == 40  # strict: the floor is spent, not renewed
    # the first reactive hours end the floor: the share of them, less what the floor bought
    woke = reactive_for(ledger, start=monday + STEP, replicas=10, steps=12)  # 10 replica-hours
    assert not ledger.at_floor(woke) and ledger.limit(woke) == pytest.approx(3.0)
    assert ledger.allowance(woke, STEP) == 26  # 3.0 less the 0.83 the floor bought
    without = budget.Ledger(budget=0.0, window=DAY, share=0.3)
    reactive_for(without, start=0.0, replicas=10, steps=120)
    assert without.allowance(monday, STEP) == 0  # the share alone: no prewarm to wake on


@pytest.mark.parametrize("replicas, lookahead", [(0, 1500.0), (10, 0.0), (10, math.nan)])
def test_no_wake_floor_without_prewarm_replicas_or_a_look_ahead(
    replicas: int, lookahead: float
) -> None:
    assert budget.wake_floor(replicas, lookahead) == 0.0


def test_an_absolute_budget_ignores_the_wake_floor() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY, wake_hours=4.0)
    assert ledger.limit(0.0) == 1.0


def test_reactive_hours_that_leave_the_window_take_their_share_with_them() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.5)
    reactive_for(ledger, start=0.0, replicas=4, steps=3)  # 1 replica-hour
    assert ledger.limit(DAY - 1.0) == pytest.approx(0.5)
    assert ledger.limit(DAY + 2 * STEP) == 0.0
    assert ledger.allowance(DAY + 2 * STEP, STEP) == 0


def test_reactive_hours_stamped_after_a_clock_jump_back_buy_nothing_earlier() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    reactive_for(ledger, start=10_000.0, replicas=10, steps=12)
    assert ledger.allowance(5_000.0, STEP) == 0  # the clock went back before any reactive use


def test_a_share_budget_with_a_price_is_in_money_and_buys_the_same_replicas() -> None:
    hours = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    money = budget.Ledger(budget=0.0, window=DAY, share=0.1, cost_per_replica_hour=2.5)
    for ledger in (hours, money):
        reactive_for(ledger, start=0.0, replicas=10, steps=12)
    assert money.limit(DAY / 2) == pytest.approx(2.5 * hours.limit(DAY / 2))
    assert money.allowance(DAY / 2, STEP) == hours.allowance(DAY / 2, STEP) == 12


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5, math.nan, math.inf])
def test_a_share_outside_zero_to_one_hundred_percent_allows_nothing(share: float) -> None:
    ledger = budget.Ledger(budget=24.0, window=DAY, share=share)
    reactive_for(ledger, start=0.0, replicas=10, steps=12)
    assert ledger.allowance(DAY / 2, STEP) == 0


def test_non_finite_reactive_records_are_ignored() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    assert ledger.record_reactive(math.nan, 10, STEP) == 0.0
    assert ledger.record_reactive(0.0, 10, math.inf) == 0.0
    assert ledger.record_reactive(0.0, -3, STEP) == 0.0
    assert ledger.limit(1.0) == 0.0


def test_seeded_reactive_hours_count_only_before_the_ledgers_own_records() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    ledger.record_reactive(600.0, 12, STEP)  # 1 replica-hour, later scraped and read back
    budget.seed_reactive(ledger, [(60.0, 5.0), (540.0, 4.0), (660.0, 1.0)])
    assert ledger.limit(720.0) == pytest.approx(0.1 * (5.0 + 4.0 + 1.0))


def test_after_a_jump_back_reactive_hours_older_than_the_newest_window_buy_nothing() -> None:
    # 10 replica-hours at 0, then 1 at the end of the first day buys a charge just after it;
    # the clock then jumps back half a day. Spending the share of the hours at 0 there would
    # overspend the window that ends at the later charge, which holds only the 1 replica-hour.
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.5)
    ledger.record_reactive(0.0, 10, 3600.0)
    ledger.record_reactive(DAY - 200.0, 12, STEP)  # 1 replica-hour
    late = DAY + 100.0
    assert ledger.allowance(late, STEP) == 6
    ledger.charge(late, 6, STEP)
    assert ledger.allowance(DAY / 2, STEP) == 0


def test_reactive_steps_are_kept_as_a_few_hundred_spans_a_window_whatever_the_step() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    for i in range(3 * 2880):  # three days of 30 s steps
        ledger.record_reactive(i * 30.0, 10, 30.0)
    assert len(ledger.reactive) <= 2 * budget.SPANS_PER_WINDOW + 2
    assert ledger.limit(3 * DAY) == pytest.approx(0.1 * 10 * 24, rel=0.01)


def test_a_span_counts_only_once_the_clock_is_past_its_last_step() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.5)
    for at in (0.0, 60.0, 120.0):  # one span, 0 to 120
        ledger.record_reactive(at, 12, STEP)
    assert ledger.limit(90.0) == 0.0  # back before its last step: none of it is certain
    assert ledger.limit(120.0) == pytest.approx(0.5 * 3.0)


def test_the_wake_up_floor_never_stands_in_for_reactive_hours_the_share_does_not_count() -> None:
    # `limit` counts only spans wholly in the window; the floor read that as "no reactive hours".
    wake = budget.wake_floor(10, 1800.0)
    straddling = budget.Ledger(budget=0.0, window=DAY, share=0.3, wake_hours=wake)
    for i in range(9):  # 4.5 minutes of 10 replicas: one span
        straddling.record_reactive(10 * DAY + i * 30.0, 10, 30.0)
    later = 11 * DAY + 120.0  # the window starts inside the span: part of it is still in
    assert not straddling.at_floor(later) and straddling.allowance(later, 30.0) == 0
    stepped_back = budget.Ledger(budget=0.0, window=DAY, share=0.3, wake_hours=wake)
    for i in range(20):  # reactive recorded up to 10 minutes after T
        stepped_back.record_reactive(10 * DAY + i * 30.0, 10, 30.0)
    back = 10 * DAY + 600.0 - 900.0  # NTP steps the clock back 15 minutes
    assert not stepped_back.at_floor(back) and stepped_back.limit(back) < wake
