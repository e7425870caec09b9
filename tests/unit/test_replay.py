"""The policy replay: decisions.csv columns, determinism, no lookahead, the budget, baselines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.base import DAY, Series
from scaler.errors import ConfigError
from scaler.offline import replay, replay_config, replay_summary

STEP = 600.0


def trace(days: float = 9, seed: int = 5) -> Series:
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / STEP)) * STEP
    mean = 300 + 250 * np.sin(2 * np.pi * (t / DAY - 0.3)) * (1 + 0.3 * (t // DAY % 7 < 5))
    values = rng.poisson(np.maximum(mean, 5)).astype(float)
    values[400:410] = np.nan  # a gap in the data
    return Series(1_700_006_400.0, STEP, values)


@pytest.fixture(scope="module")
def result() -> replay.Replay:
    return replay.replay(trace(), replay_config.ReplayConfig(threshold=40.0, budget=6.0))


def test_decisions_have_one_row_per_step_with_the_documented_columns(
    result: replay.Replay,
) -> None:
    assert tuple(result.decisions.columns) == replay.COLUMNS
    assert len(result.decisions) == len(trace())


def test_the_same_inputs_write_the_same_files(result: replay.Replay, tmp_path: Path) -> None:
    again = replay.replay(trace(), replay_config.ReplayConfig(threshold=40.0, budget=6.0))
    replay.write_decisions(result, tmp_path / "a")
    replay.write_decisions(again, tmp_path / "b")
    name = "decisions.csv"
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert json.dumps(result.summary, sort_keys=True) == json.dumps(again.summary, sort_keys=True)


def test_rows_up_to_any_time_do_not_depend_on_what_comes_after(result: replay.Replay) -> None:
    full = trace()
    cut = 6 * int(DAY / STEP) + 17
    short = replay.replay(
        Series(full.start, full.step, full.values[:cut]),
        replay_config.ReplayConfig(threshold=40.0, budget=6.0),
    )
    assert short.decisions.equals(result.decisions.iloc[:cut].reset_index(drop=True))


def test_prewarm_never_spends_more_than_the_budget_in_any_window(result: replay.Replay) -> None:
    spend = result.summary["policy"]["prewarm"]
    assert 0 < spend["max_window_spend"] <= 6.0 + 1e-9
    hours = result.decisions["prewarm_replica_hours"].to_numpy()
    day = int(DAY / STEP)
    assert max(hours[max(0, i - day + 1) : i + 1].sum() for i in range(hours.size)) <= 6.0 + 1e-9


def test_prewarm_and_reactive_totals_cover_the_scored_steps_as_every_other_figure(
    result: replay.Replay,
) -> None:
    frame, spend = result.decisions, result.summary["policy"]["prewarm"]
    scored = frame.iloc[replay_summary.warmup_steps(trace()) :]
    assert scored.index[0] > 0  # the warm-up had prewarm the totals must leave out
    assert frame["prewarm_replica_hours"].iloc[: scored.index[0]].sum() > 0
    reactive = scored["reactive"].clip(0, 100).sum() * STEP / 3600.0
    assert spend["replica_hours"] == pytest.approx(scored["prewarm_replica_hours"].sum())
    assert spend["reactive_replica_hours"] == pytest.approx(reactive)
    assert spend["share_of_reactive"] == pytest.approx(spend["replica_hours"] / reactive)


def test_missing_load_holds_the_last_request_and_is_not_scored(result: replay.Replay) -> None:
    rows = result.decisions.iloc[401:411]
    assert set(rows["reason"]) == {"no_data"}
    assert rows["desired"].nunique() == 1


def test_desired_never_falls_below_the_reactive_floor(result: replay.Replay) -> None:
    d = result.decisions
    assert (d["desired"] >= d["reactive"]).all()


def test_with_no_budget_the_policy_only_ever_asks_for_the_reactive_floor() -> None:
    frame, _ = replay.simulate(trace(4), replay_config.ReplayConfig(threshold=40.0, budget=0.0))
    decided = frame[frame["reason"] != "no_data"]
    assert len(decided) > 0.9 * len(frame)
    assert (decided["desired"] == decided["reactive"]).all()
    assert frame["prewarm_replica_hours"].sum() == 0


def test_the_summary_scores_the_policy_and_every_baseline(result: replay.Replay) -> None:
    summary = json.loads(json.dumps(result.summary, allow_nan=False))
    for name in ("policy", "reactive", "reactive_10", "reactive_20", "reactive_50", "oracle"):
        for key in ("under_provisioned_pct", "shortfall_replica_steps", "unserved_load_pct"):
            assert key in summary[name]
        assert summary[name]["gpu_hours"] > 0
    assert summary["oracle"]["under_provisioned_pct"] == 0
    assert summary["oracle"]["frontier_ratio"] == 0
    assert summary["trace"]["warmup_steps"] == int(4.5 * DAY / STEP)


def test_a_threshold_can_be_a_percentile_of_the_trace() -> None:
    series = trace()
    assert replay_config.threshold_from("p99/20", series) == pytest.approx(
        np.nanpercentile(series.values, 99) / 20
    )
    with pytest.raises(ConfigError, match="pNN/D"):
        replay_config.threshold_from("lots", series)
