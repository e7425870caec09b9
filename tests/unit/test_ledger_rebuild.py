"""Rebuilding a prewarm ledger from the spend counter every scaler pod exports."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from scaler.decision import budget
from scaler.serving.telemetry import Telemetry
from scaler.sources.prometheus_ledger import REACTIVE_COUNTER, SPENT_COUNTER

DAY = 86400.0
STEP = 60.0


def test_a_counter_becomes_spend_per_sample_and_a_drop_is_a_restart_from_zero() -> None:
    pod = [(0.0, 5.0), (60.0, 6.0), (120.0, 0.5), (180.0, 1.5), (240.0, 1.5)]
    assert budget.spent_per_step([pod], start=0.0) == [(60.0, 1.0), (120.0, 0.5), (180.0, 1.0)]


def test_pods_charging_the_same_decisions_are_counted_once() -> None:
    a = [(0.0, 100.0), (60.0, 101.0), (120.0, 102.0), (180.0, 103.0)]
    b = [(0.0, 7.0), (60.0, 8.0), (120.0, 1.0), (180.0, 2.0)]  # restarted at 120
    spent = budget.spent_per_step([a, b], start=0.0)
    assert spent == [(60.0, 1.0), (120.0, 1.0), (180.0, 1.0)]
    # When the pod with the highest total restarts, the others' totals are not spent again.
    a_restarts = [(0.0, 100.0), (60.0, 101.0), (120.0, 1.0), (180.0, 2.0)]
    b_steady = [(0.0, 7.0), (60.0, 8.0), (120.0, 9.0), (180.0, 10.0)]
    assert sum(h for _, h in budget.spent_per_step([a_restarts, b_steady], start=0.0)) == 3.0


def test_a_pod_born_within_the_window_counts_its_first_value_and_gaps_are_skipped() -> None:
    born_later = [(120.0, 0.25), (180.0, math.nan), (240.0, 0.75)]
    assert budget.spent_per_step([born_later], start=0.0) == [(120.0, 0.25), (240.0, 0.5)]


def test_seeded_spend_is_priced_in_the_budget_currency() -> None:
    ledger = budget.Ledger(budget=24.0, window=DAY, cost_per_replica_hour=1.2)
    budget.seed(ledger, [(60.0, 10.0), (120.0, 5.0)])
    assert ledger.remaining(120.0) == pytest.approx(24.0 - 15.0 * 1.2)


def test_spend_the_ledger_charged_itself_is_not_counted_again_when_scraped() -> None:
    ledger = budget.Ledger(budget=24.0, window=DAY)
    ledger.charge(600.0, 12, 300.0)  # 1 replica-hour, scraped at 660 and exported by the others
    budget.seed(ledger, [(60.0, 2.0), (540.0, 3.0), (660.0, 1.0), (720.0, 1.0)])
    assert ledger.spent(720.0) == pytest.approx(2.0 + 3.0 + 1.0)


def test_a_ledger_fed_by_the_counter_record_keeps_what_the_window_spent() -> None:
    ledger = budget.Ledger(budget=1.0, window=DAY)  # 12 replica-steps of 5 minutes
    pods = [[(0.0, 3.0), (DAY / 2, 3.5)], [(0.0, 40.0), (DAY / 2, 40.5)]]
    budget.seed(ledger, budget.spent_per_step(pods, start=0.0))
    assert ledger.allowance(DAY / 2, 300.0) == 6
    assert ledger.allowance(DAY / 2 + DAY, 300.0) == 12  # it leaves the window like any charge


def test_the_spend_counter_the_scaler_exports_is_the_one_it_reads_back() -> None:
    telemetry = Telemetry(CollectorRegistry())
    telemetry.prewarm_spent.labels("gpu/llm#0a1b2c3d").inc(0.5)
    exported = generate_latest(telemetry.registry).decode()
    assert f'{SPENT_COUNTER}{{target="gpu/llm#0a1b2c3d"}} 0.5' in exported


def test_the_reactive_counter_the_scaler_exports_is_the_one_a_share_budget_reads_back() -> None:
    telemetry = Telemetry(CollectorRegistry())
    telemetry.reactive_spent.labels("gpu/llm#0a1b2c3d").inc(2.5)
    exported = generate_latest(telemetry.registry).decode()
    assert f'{REACTIVE_COUNTER}{{target="gpu/llm#0a1b2c3d"}} 2.5' in exported


def test_a_share_ledger_fed_by_both_records_allows_its_share_less_the_spend() -> None:
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    used = [[(0.0, 10.0), (DAY / 2, 40.0)]]  # 30 reactive replica-hours in the window
    spent = [[(0.0, 1.0), (DAY / 2, 2.0)]]  # 1 prewarmed
    budget.seed(ledger, budget.spent_per_step(spent, start=0.0))
    budget.seed_reactive(ledger, budget.reactive_per_step(used, start=0.0))
    assert ledger.remaining(DAY / 2) == pytest.approx(0.1 * 30.0 - 1.0)
    assert ledger.allowance(DAY / 2, 300.0) == 24


def test_a_reactive_history_shorter_than_the_window_never_grows_a_share_budget() -> None:
    # Prometheus kept 6 hours of a day's window: the pod's first sample holds 500 reactive
    # replica-hours of its whole life, of which only the 20 since that sample are in the window.
    used = [[(DAY - 6 * 3600.0, 500.0), (DAY - 3600.0, 510.0), (DAY, 520.0)]]
    ledger = budget.Ledger(budget=0.0, window=DAY, share=0.1)
    budget.seed_reactive(ledger, budget.reactive_per_step(used, start=0.0))
    assert ledger.limit(DAY) == pytest.approx(0.1 * 20.0)
    # the ablation, the spend counter's reading: the pod's whole life inside the window
    counted = sum(h for _, h in budget.spent_per_step(used, start=0.0))
    assert counted == pytest.approx(520.0)


# ---- strictness after a rebuild, over random histories --------------------------------------

increments = st.lists(st.floats(0.0, 0.5), min_size=1, max_size=40)
restarts = st.lists(st.booleans(), min_size=40, max_size=40)


@given(
    spend=increments,
    pod_restarts=st.lists(restarts, min_size=1, max_size=3),
    budget_hours=st.floats(0.5, 30.0),
    wanted=st.lists(st.integers(0, 20), min_size=1, max_size=60),
)
def test_after_a_rebuild_no_window_ever_spends_more_than_the_budget(
    spend: list[float], pod_restarts: list[list[bool]], budget_hours: float, wanted: list[int]
) -> None:
    # Several pods record the same spend (each with its own restarts) over the last day,
    # at most the budget in all; then the scaler prewarms as much as it may, every step.
    scale = min(1.0, budget_hours / max(sum(spend), 1e-9))
    times = [i * STEP for i in range(len(spend) + 1)]
    truth = [(t, s * scale) for t, s in zip(times[1:], spend, strict=True)]
    pods = [counter(truth, r) for r in pod_restarts]
    ledger = budget.Ledger(budget=budget_hours, window=DAY)
    budget.seed(ledger, budget.spent_per_step(pods, start=0.0))
    step, now, own = 300.0, times[-1], []
    for replicas in wanted:
        own.append((now, ledger.charge(now, min(replicas, ledger.allowance(now, step)), step)))
        now += step * 7  # spread the steps over more than a window
    spent = truth + own
    for at, _ in spent:
        assert sum(h for t, h in spent if at - DAY < t <= at) <= budget_hours + 1e-6


def counter(truth: list[tuple[float, float]], restarts: list[bool]) -> list[tuple[float, float]]:
    """Samples of one pod's counter recording `truth`, from a baseline at 0, with restarts. A
    restart shows only when the counter drops (as for Prometheus' rate()), so only those are
    made."""
    value, samples = 50.0, [(0.0, 50.0)]
    for (at, hours), restart in zip(truth, restarts, strict=False):
        value = hours if restart and hours < value else value + hours
        samples.append((at, value))
    return samples
