"""decision.promises: a decision keeps what the decisions of the last cold start bought for the
steps still ahead of it, so a fresher, lower band does not release replicas that cannot come
back in time (an experiment, `keep_promises`, off by default)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from scaler import cli
from scaler.decision import promises
from scaler.offline import backtest_cli, replay
from tests.unit.test_replay import trace

MINUTE, BUCKET = 60.0, 300.0


def test_minutes_read_the_forecast_point_of_the_bucket_they_fall_in() -> None:
    upper = [10.0, 20.0, 30.0]
    path = promises.step_path(
        upper, made_at=0.0, model_step=BUCKET, now=4 * MINUTE, step=MINUTE, steps=8
    )
    # minutes 4 and 5 are in the bucket (0, 300], 6 to 10 in (300, 600], 11 in (600, 900]
    assert path.tolist() == [10.0, 10.0, 20.0, 20.0, 20.0, 20.0, 20.0, 30.0]


def test_a_trace_at_the_model_step_reads_one_point_per_step_and_the_last_one_past_the_end() -> None:
    path = promises.step_path(
        [5.0, 6.0], made_at=0.0, model_step=BUCKET, now=BUCKET, step=BUCKET, steps=3
    )
    assert path.tolist() == [5.0, 6.0, 6.0]
    assert np.isnan(
        promises.step_path([], made_at=0.0, model_step=BUCKET, now=BUCKET, step=BUCKET, steps=2)
    ).all()


def test_a_lower_fresher_band_does_not_release_what_was_bought_for_the_cold_start() -> None:
    kept = promises.Promises(cold_start_steps=2)
    kept.promise(10, [50.0, 60.0, 70.0], granted=1000.0)
    # the decision at 11 still owes steps 11 and 12 what the one at 10 bought for them
    assert kept.owed(11) == 70.0
    kept.promise(11, [40.0, 40.0, 40.0], granted=1000.0)
    assert kept.owed(12) == 70.0
    # past step 12 the decision at 10 bought nothing: only what 11 bought for 13 is owed
    assert kept.owed(13) == 40.0
    assert kept.owed(14) is None


def test_only_what_the_budget_granted_is_promised() -> None:
    kept = promises.Promises(cold_start_steps=1)
    kept.promise(0, [100.0, 300.0], granted=200.0)
    assert kept.owed(1) == 200.0
    kept.promise(5, [math.nan, math.inf], granted=math.nan)
    assert kept.owed(5) is None


def test_a_promise_reaches_no_further_than_the_cold_start() -> None:
    kept = promises.Promises(cold_start_steps=1)
    kept.promise(0, [1.0, 2.0, 99.0, 99.0], granted=1000.0)
    assert kept.owed(2) is None


SHARE = 0.3


@pytest.fixture(scope="module")
def both() -> tuple[replay.Replay, replay.Replay]:
    config = replay.ReplayConfig(threshold=40.0, budget_share=SHARE, drift=False)
    series = trace()
    return (
        replay.replay(series, replace(config, keep_promises=True)),
        replay.replay(series, config),
    )


def scale_downs(result: replay.Replay) -> int:
    desired = result.decisions["desired"].to_numpy()
    return int((desired[1:] < desired[:-1]).sum())


def test_keeping_promises_releases_fewer_replicas_and_stays_within_the_share_budget(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    kept, ablation = both
    assert scale_downs(kept) < scale_downs(ablation)
    ours, theirs = kept.summary["policy"], ablation.summary["policy"]
    assert ours["prewarm"]["replica_hours"] > theirs["prewarm"]["replica_hours"]
    for result in both:
        assert 0 < result.summary["policy"]["prewarm"]["max_window_share"] <= SHARE + 1e-9


def test_the_backtest_flag_turns_promises_on_and_they_are_off_by_default() -> None:
    def config(*flags: str) -> replay.ReplayConfig:
        args = cli.build_parser().parse_args(["backtest", "t.csv", "--out", "o", *flags])
        return backtest_cli.replay_config(args, backtest_cli.config_from(args), 1.0)

    assert config("--keep-promises").keep_promises
    assert not config().keep_promises
    assert not replay.ReplayConfig(threshold=1.0).keep_promises
