"""policy.insured_peak: insurance (the P95) only for the lead time, the median past it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scaler.decision import policy
from scaler.offline import replay
from tests.contract import synthetic


def test_a_rise_past_the_lead_time_is_bought_at_its_median_not_its_insured_bound() -> None:
    insured = [10.0, 11.0, 40.0, 42.0]
    expected = [8.0, 9.0, 30.0, 31.0]
    assert policy.insured_peak(insured, expected, insured_points=2) == 31.0


def test_a_rise_within_the_lead_time_is_bought_at_its_insured_bound() -> None:
    insured = [10.0, 50.0, 20.0, 21.0]
    expected = [8.0, 30.0, 18.0, 19.0]
    assert policy.insured_peak(insured, expected, insured_points=2) == 50.0


def test_insuring_every_point_is_the_plain_peak_of_the_insured_path() -> None:
    insured = np.array([3.0, 7.0, 5.0])
    assert policy.insured_peak(insured, insured / 2, insured_points=3) == 7.0
    assert policy.insured_peak(insured, insured / 2, insured_points=99) == 7.0


def test_no_finite_point_is_no_usable_forecast() -> None:
    nan = [math.nan, math.inf, math.nan]
    assert policy.insured_peak(nan, nan, insured_points=1) is None
    assert policy.insured_peak([math.nan, 4.0], [math.nan, 2.0], insured_points=-3) == 2.0


def test_insuring_only_the_lead_time_spends_less_of_the_budget_than_insuring_the_horizon() -> None:
    series = synthetic.ramps()
    config = replay.ReplayConfig(threshold=60.0, budget=0.0, budget_share=1.0, drift=False)
    whole = replay.replay(series, config).summary["policy"]
    lead_only = replay.replay(series, replace(config, insure_lead_time_only=True)).summary["policy"]
    assert lead_only["prewarm"]["replica_hours"] < whole["prewarm"]["replica_hours"]
    assert lead_only["gpu_hours"] < whole["gpu_hours"]
