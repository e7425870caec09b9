"""The replay with a share budget: what it spends, window by window, against the reactive
replica-hours of the same window, and how it scales with the fleet where a fixed amount does
not."""

from __future__ import annotations

import numpy as np
import pytest

from models.base import DAY, Series
from scaler.offline import baselines, replay, replay_config, replay_summary, replay_table
from tests.unit.test_replay import STEP, trace


def scaled(factor: float) -> Series:
    series = trace()
    return Series(series.start, series.step, series.values * factor)


@pytest.fixture(scope="module")
def shared() -> replay.Replay:
    return replay.replay(trace(), replay_config.ReplayConfig(threshold=40.0, budget_share=0.05))


def test_a_share_budget_spends_at_most_its_share_of_each_windows_reactive_hours(
    shared: replay.Replay,
) -> None:
    frame = shared.decisions
    spend = shared.summary["policy"]["prewarm"]
    assert 0 < spend["max_window_share"] <= 0.05 + 1e-9
    assert spend["windows_without_reactive"] == 0
    hours = frame["prewarm_replica_hours"].to_numpy()
    used = frame["reactive"].to_numpy() * STEP / 3600.0
    day = int(DAY / STEP)
    for i in np.flatnonzero(hours > 0):
        window = slice(max(0, i - day + 1), i + 1)
        assert hours[window].sum() <= 0.05 * used[window].sum() + 1e-9


def test_a_share_budget_grows_with_the_fleet_where_a_fixed_amount_binds() -> None:
    # The same load shape at 1x and 4x, with the replica size fixed: a fixed amount buys the
    # large fleet a quarter of the relative prewarm; a share buys both the same share.
    def spend(factor: float, **budget: float) -> float:
        config = replay_config.ReplayConfig(threshold=40.0, max_prewarm_replicas=40, **budget)
        prewarm = replay.replay(scaled(factor), config).summary["policy"]["prewarm"]
        return float(prewarm["share_of_reactive"])

    fixed_small, fixed_large = spend(1.0, budget=2.0), spend(4.0, budget=2.0)
    share_small, share_large = spend(1.0, budget_share=0.05), spend(4.0, budget_share=0.05)
    assert fixed_large < 0.5 * fixed_small
    assert share_large > 0.7 * share_small


def test_the_table_shows_the_share_spent_against_the_share_allowed(
    shared: replay.Replay,
) -> None:
    rows = replay_table.table(shared.summary).splitlines()[1:]
    assert rows[0].startswith("policy") and rows[0].endswith("/ 5%")
    assert not any("/" in row for row in rows[1:])  # the baselines answer to no budget


def test_a_burst_past_max_replicas_lends_a_share_budget_only_what_max_replicas_runs() -> None:
    series = trace()
    values = series.values.copy()
    values[700:760] = 1e6  # ten hours far beyond what 100 replicas of 40 serve
    config = replay_config.ReplayConfig(threshold=40.0, budget_share=0.05)
    result = replay.replay(Series(series.start, series.step, values), config)
    used = result.summary["policy"]["prewarm"]["reactive_replica_hours"]
    hours = series.span / 3600.0
    assert used <= config.max_replicas * hours
    assert (result.decisions["reactive"] > config.max_replicas).any()  # the burst was there


def test_every_replica_above_the_reactive_baseline_is_charged_unless_the_hold_is_free(
    shared: replay.Replay,
) -> None:
    # The yardstick's reactive baseline holds for the HPA's 5 minutes; the policy's floor holds
    # for the lead time. The replicas between the two are paid prewarm (reason hold), so the
    # ledger sees every replica above the baseline; the ablation holds them for free.
    def unpaid(result: replay.Replay) -> tuple[int, int]:
        frame = result.decisions
        load = frame["load"].to_numpy()
        base = baselines.reactive(load, threshold=40.0, step=STEP)
        ok = np.isfinite(load) & (frame["reason"] != "no_data").to_numpy()
        above = (frame["desired"].to_numpy() - base)[ok]
        paid = np.rint(frame["prewarm_replica_hours"].to_numpy() * 3600 / STEP)[ok]
        held = int((frame["reason"][ok] == "hold").sum())
        return int((above - paid).sum()), held

    free = replay.replay(
        trace(), replay_config.ReplayConfig(threshold=40.0, budget_share=0.05, charge_hold=False)
    )
    gap, holds = unpaid(shared)
    assert gap == 0 and holds > 0
    free_gap, free_holds = unpaid(free)
    assert free_gap > 0 and free_holds == 0


def test_a_gap_in_the_trace_holds_the_last_decision_charged_and_within_the_share() -> None:
    # Before, a step with no load held the last request, prewarm and all, and charged nothing:
    # a day's gap while prewarming ran a strict 5 % budget past its share and summary.json's
    # `max_window_share` never saw it. The live engine books a held step (booking.py `hold`):
    # the last decision, its prewarm cut to what the budget allows now, charged.
    share, day = 0.05, int(DAY / STEP)
    config = replay_config.ReplayConfig(threshold=40.0, budget_share=share)
    whole = replay.replay(trace(), config).decisions
    a = next(t for t in range(5 * day, 7 * day) if whole["prewarm_replica_hours"].iloc[t] > 0)
    series = trace()
    values = series.values.copy()
    values[a : a + day] = np.nan  # no load for a day from step a: steps a+1..a+day hold a's
    result = replay.replay(Series(series.start, STEP, values), config)
    frame = result.decisions
    held = np.arange(a + 1, a + day + 1)
    assert set(frame["reason"].iloc[held]) == {"no_data"}
    assert frame["desired"].iloc[a] == whole["desired"].iloc[a]  # decided before the gap
    assert frame["desired"].iloc[a] > frame["reactive"].iloc[a]  # with prewarm
    # What ran: the decision held (its reactive replicas, the prewarm above them), every step.
    reactive = frame["reactive"].to_numpy().copy()
    reactive[held] = frame["reactive"].iloc[a]
    ran = np.maximum(frame["desired"].to_numpy() - reactive, 0) * STEP / 3600.0
    hours = frame["prewarm_replica_hours"].to_numpy()
    np.testing.assert_allclose(hours[held], ran[held])  # the ledger charged what ran
    used = np.clip(reactive, 0, config.max_replicas) * STEP / 3600.0
    worst = max(
        ran[max(0, i - day + 1) : i + 1].sum() / used[max(0, i - day + 1) : i + 1].sum()
        for i in np.flatnonzero(ran > 0)
    )
    assert worst <= share + 1e-9
    spend = result.summary["policy"]["prewarm"]
    assert spend["max_window_share"] == pytest.approx(worst)
    # The scored totals read the steps with load, as gpu_hours does: the step after the gap
    # (scored, held), not step a (decided from load, but its own load is missing).
    scored = np.isfinite(values) & (np.arange(len(values)) >= replay_summary.warmup_steps(series))
    assert spend["replica_hours"] == pytest.approx(hours[scored].sum())
    assert not scored[a] and scored[a + day]
