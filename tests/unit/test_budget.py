"""The prewarm ledger: strict rolling-window cap, clock jumps, money budgets."""

from __future__ import annotations

import math

import pytest

from scaler import budget

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
