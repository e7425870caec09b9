"""`scaler backtest`: production's walk forward over a trace, graded on the forecast made
lead-time before each step, with no lookahead; bad traces refused with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.base import DAY, Series
from scaler import cli
from scaler.decision import budget, resolution
from scaler.errors import ConfigError
from scaler.offline import backtest, backtest_checks, backtest_run, replay, replay_config
from tests.contract.synthetic import load
from tests.unit.exits import exit_code

CONFIG = backtest.BacktestConfig(model="seasonal", compare=(), warmup=3 * DAY, limit=DAY / 2)


def write_trace(path: Path, series: Series, *, blank: tuple[int, ...] = ()) -> Path:
    times = pd.to_datetime(series.times(), unit="s").strftime("%Y-%m-%d %H:%M:%S")
    values = [("" if i in blank else f"{v:g}") for i, v in enumerate(series.values)]
    path.write_text(
        "timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in zip(times, values, strict=True))
    )
    return path


def test_writes_forecasts_csv_summary_json_and_a_png(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4), blank=(900, 901, 950))
    code = cli.main(
        [
            "backtest", str(trace), "--model", "seasonal", "--compare", "ets",
            "--warmup", "3d", "--threshold", "20", "--out", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    assert code == 0
    frame = pd.read_csv(tmp_path / "out" / "forecasts.csv")
    assert list(frame.columns) == ["timestamp", "actual", "forecast_p50", "forecast_p95"]
    assert len(frame) == 288 - 3  # one day scored, minus the three blank steps in it
    assert frame["actual"].notna().all() and frame["forecast_p95"].notna().all()
    assert (frame["forecast_p95"] >= frame["forecast_p50"]).all()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary["models"]) == {"seasonal", "ets", "naive"}
    for figures in summary["models"].values():
        assert {"coverage", "raw_coverage", "pinball", "wape", "mase"} <= set(figures)
    assert summary["threshold"] == 20.0
    assert (tmp_path / "out" / "backtest.png").stat().st_size > 10_000
    decisions = pd.read_csv(tmp_path / "out" / "decisions.csv")
    assert tuple(decisions.columns) == replay.COLUMNS
    assert len(decisions) == 4 * 288  # one row per step of the trace, warm-up included
    assert (decisions["desired"] >= decisions["reactive"]).all()
    for run in ("policy", "reactive", "reactive_20", "oracle"):
        figures = summary["decisions"][run]
        assert {"under_provisioned_pct", "gpu_hours", "frontier_ratio", "prewarm"} <= set(figures)
    share = budget.parse_budget(budget.DEFAULT_BUDGET)[1]
    assert share is not None
    assert summary["decisions"]["policy"]["prewarm"]["max_window_share"] <= share + 1e-9


@pytest.mark.parametrize(("quantile", "column"), [(0.8, "forecast_p80"), (0.975, "forecast_p97.5")])
def test_forecasts_csv_names_its_band_column_after_the_quantile_graded(
    tmp_path: Path, quantile: float, column: str
) -> None:
    """At --quantile 0.8 the band written is the P80, and about 80% of actuals fall under it:
    a column named forecast_p95 (as before, whatever the quantile) told a reader it was the
    P95 and showed them a band that missed a fifth of the load."""
    config = backtest.BacktestConfig(
        model="seasonal", compare=(), warmup=3 * DAY, limit=DAY, quantile=quantile
    )
    result = backtest.run(load(4, seed=3), config)
    backtest.write(result, tmp_path, model="seasonal", threshold=20.0, decisions=None)
    frame = pd.read_csv(tmp_path / "forecasts.csv")
    assert list(frame.columns) == ["timestamp", "actual", "forecast_p50", column]
    covered = float((frame["actual"] <= frame[column] + 1e-9).mean())
    assert covered == pytest.approx(result.summary["models"]["seasonal"]["coverage"])


def test_a_load_the_reference_forecasts_exactly_is_graded_with_no_ratio_to_it() -> None:
    """One day repeated (or a constant): the seasonal-naive reference's pinball loss is 0, and
    the ratio to it is NaN (null in summary.json), not a ZeroDivisionError."""
    day = 100 + 50 * np.sin(2 * np.pi * np.arange(288) / 288)
    result = backtest.run(Series(1_700_006_400.0, 300.0, np.tile(day, 4)), CONFIG)
    reference = result.summary["models"]["naive"]
    assert reference["pinball"] == 0
    assert np.isnan(reference["pinball_vs_reference"])
    assert np.isnan(result.summary["models"]["seasonal"]["pinball_vs_reference"])


def test_the_forecast_for_a_step_uses_exactly_what_was_known_lead_time_earlier() -> None:
    series = load(4, seed=1)
    k = 2  # 10 minutes on a 5-minute step: decided at the start of step s - k
    base = backtest.forecast_frame(series, CONFIG, "seasonal")
    s = len(base) // 2
    step = round(3 * DAY / series.step) + s
    for changed, should_change in ((step - k, False), (step - k - 1, True)):
        values = series.values.copy()
        values[changed] *= 5
        frame = backtest.forecast_frame(
            Series(series.start, series.step, values), CONFIG, "seasonal"
        )
        moved = frame["forecast_p50"][s] != base["forecast_p50"][s]
        assert moved == should_change, (
            f"value at {changed} {'should' if should_change else 'must not'} matter"
        )
        assert frame["forecast_p50"][:s].equals(base["forecast_p50"][:s])


def test_a_trace_cut_short_gives_the_same_forecasts_up_to_the_cut() -> None:
    series = load(4, seed=2)
    whole = backtest.forecast_frame(series, CONFIG, "naive")
    cut = backtest.forecast_frame(series.until(series.start + 3.25 * DAY), CONFIG, "naive")
    assert len(cut) < len(whole)
    pd.testing.assert_frame_equal(
        cut[["timestamp", "forecast_p50", "forecast_p95"]],
        whole[["timestamp", "forecast_p50", "forecast_p95"]].iloc[: len(cut)],
    )


def test_a_trace_it_cannot_read_exits_2_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("timestamp,value\n2024-01-01 00:00:00,1\n2024-01-01 00:05:00,lots\n")
    code = cli.main(["backtest", str(trace), "--out", str(tmp_path / "out")])
    assert code == 2
    assert f"{trace}:3: value 'lots' is not a number" in capsys.readouterr().err


@pytest.mark.parametrize("rows", [1, 2, 200])
def test_a_trace_under_a_day_exits_2_saying_a_model_needs_a_day(
    rows: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    series = load(1)
    trace = write_trace(
        tmp_path / "short.csv", Series(series.start, series.step, series.values[:rows])
    )
    code = cli.main(["backtest", str(trace), "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{trace}: holds" in err and "a model needs a day of history" in err
    assert not (tmp_path / "out").exists()


def test_a_trace_coarser_than_a_day_exits_2_asking_for_a_finer_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "weekly.csv"
    trace.write_text("timestamp,value\n2024-01-01,1\n2024-01-08,2\n2024-01-15,3\n")
    code = cli.main(["backtest", str(trace), "--out", str(tmp_path / "out")])
    assert code == 2
    assert f"{trace}: its rows are 7d apart" in capsys.readouterr().err


@pytest.mark.parametrize("hours", [2, 24])
def test_a_trace_coarser_than_an_hour_exits_2_naming_its_step_and_the_fix(
    hours: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, 60 daily rows (or 2-hourly ones) graded and replayed a day's mean against a
    # 10-minute cold start, and exited 0 with figures that meant nothing.
    step = hours * 3600.0
    rows = Series(1_704_067_200.0, step, 100 + np.arange(60 * 24 // hours) % 7.0)
    trace = write_trace(tmp_path / "coarse.csv", rows)
    assert exit_code(["backtest", str(trace), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    own = "1d" if hours == 24 else "2h"
    assert f"{trace}: its rows are {own} apart; the scaler forecasts minutes ahead" in err
    assert "export a step of 1h or finer" in err
    assert not (tmp_path / "out").exists()


def test_a_trace_coarser_than_the_model_step_that_does_not_divide_a_day_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, a 7-minute trace was modelled at 7m, its daily profile slipping against the clock.
    rows = Series(1_704_067_200.0, 420.0, 100 + np.arange(4 * 24 * 60 // 7) % 7.0)
    trace = write_trace(tmp_path / "seven.csv", rows)
    assert exit_code(["backtest", str(trace), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{trace}: its rows are 7m apart, coarser than --step 5m" in err
    assert "divides a day, or give --step 8m" in err


def test_forecasts_start_once_a_day_of_history_is_known_and_not_before(
    tmp_path: Path,
) -> None:
    trace = write_trace(tmp_path / "short.csv", load(1.5))
    code = cli.main(["backtest", str(trace), "--model", "seasonal", "--compare", "none",
                     "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 0
    frame = pd.read_csv(tmp_path / "out" / "forecasts.csv")
    times = pd.to_datetime(frame["timestamp"]).astype("int64") / 1e9
    known = times - 600 - 300  # decided lead time earlier, on the step before
    early = known < load(1.5).start + DAY - 300
    assert frame["forecast_p50"][early].isna().all()  # the scaler stays reactive
    assert frame["forecast_p50"][~early].notna().mean() > 0.9  # refits hourly until a model fits


def test_threshold_accepts_a_load_or_a_percentile_of_the_trace() -> None:
    series = Series(0.0, 300.0, np.arange(101, dtype=np.float64))
    assert replay_config.threshold_from("12.5", series) == 12.5
    assert replay_config.threshold_from("p50/5", series) == pytest.approx(10.0)
    with pytest.raises(ConfigError, match="load > 0"):
        replay_config.threshold_from("-1", series)


def test_help_names_every_flag_and_the_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["backtest", "--help"])
    text = capsys.readouterr().out
    for flag in ("--threshold", "--lead-time", "--horizon", "--quantile", "--model", "--warmup",
                 "--out", "forecasts.csv", "summary.json"):  # fmt: skip
        assert flag in text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--lead-time", "0s"), "'0s': must be from 1s to 2h (as the trigger's `leadTime`)"),
        (("--lead-time", "5h"), "'5h': must be from 1s to 2h (as the trigger's `leadTime`)"),
        (("--horizon", "30d"), "'30d': must be from 0s to 4h (as the trigger's `horizon`)"),
        (("--step", "1s"), "'1s': must be from 1m to 1h (the live engine's is 5m)"),
        (("--step", "1d"), "'1d': must be from 1m to 1h (the live engine's is 5m)"),
        # Before, accepted: the daily profile, 206 steps of 7m, slipped 2 minutes a day.
        (("--step", "7m"), "--step: '7m': a day is not a whole number of 7m steps (205.7)"),
        (("--step", "7m"), "use a step that divides a day, such as 6m or 8m"),
        (("--query-step", "7m"), "--query-step: '7m': a day is not a whole number of 7m steps"),
        # Before, these printed a table of nan and zeros and exited 0.
        # Before, these scored with no model for the first day and graded -167 % to -413 %.
        (("--warmup", "0s"), "'0s': must be from 2d to 3650d (the first fit needs over a day"),
        (("--warmup", "1d"), "'1d': must be from 2d to 3650d"),
        (("--warmup", "4d"), "--warmup 4d: {trace} covers 4d, so nothing is left to score"),
        (("--warmup", "9d"), "--warmup 9d: {trace} covers 4d, so nothing is left to score"),
        (("--limit", "1m"), "--limit 1m: shorter than one model step (5m), so nothing is scored"),
        (("--query-step", "0s"), "'0s': must be from 10s to 1h (a step finer than 10s"),
        (("--query-step", "1d"), "'1d': must be from 10s to 1h"),
        # Before, 0s made the replay purely reactive and printed nonsense shares, exit 0.
        (("--budget-window", "0s"), "'0s': must be from 1h to 7d (as the trigger's"),
        (("--budget-window", "8d"), "'8d': must be from 1h to 7d (as the trigger's"),
        # Before, holidays were silently ignored by every model graded.
        (
            ("--holidays", "US", "--model", "seasonal", "--compare", "ets"),
            "--holidays US: holidays are Prophet's, and neither --model (seasonal) nor --compare",
        ),
    ],
)
def test_a_flag_out_of_range_or_a_run_that_would_score_nothing_exits_2_with_the_fix(
    flags: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    assert exit_code(["backtest", str(trace), *flags, "--out", str(tmp_path / "out")]) == 2
    assert message.format(trace=trace) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--band-power", "--level-regression-alone"])
def test_the_removed_experiments_flags_are_unknown(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, each set a module global of models/ for the process (off by default; their
    # figures stay in docs/forecasting.md, `git checkout c21b1a4` reruns them).
    trace = tmp_path / "trace.csv"  # never read: argparse refuses the flag first
    assert exit_code(["backtest", str(trace), flag, "--out", str(tmp_path / "out")]) == 2
    assert f"unrecognized arguments: {flag}" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["file", "/proc/1/no-out-here"])
def test_an_out_folder_that_cannot_be_made_is_refused_before_the_walk(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    out = tmp_path / "out" if where == "file" else Path(where)
    if where == "file":
        out.write_text("a file where the folder goes")
    assert exit_code(["backtest", str(trace), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert f"--out {out}: cannot write the output folder" in captured.err
    assert "backtest at quantile" not in captured.out  # refused before the walk graded anything


def test_an_output_name_taken_by_a_folder_is_refused_before_the_walk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    (tmp_path / "out" / "backtest.png").mkdir(parents=True)
    assert exit_code(["backtest", str(trace), "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert "backtest.png there is a directory; move it" in captured.err
    assert "backtest at quantile" not in captured.out
    assert list((tmp_path / "out").iterdir()) == [tmp_path / "out" / "backtest.png"]


def test_a_run_without_decisions_removes_an_earlier_runs_decisions_from_its_folder(
    tmp_path: Path,
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    out = tmp_path / "out"
    out.mkdir()
    (out / "decisions.csv").write_text("timestamp,desired\n1995-07-04 00:00:00,3\n")
    flags = ["--compare", "none", "--model", "seasonal", "--no-decisions", "--out", str(out)]
    assert exit_code(["backtest", str(trace), *flags]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "backtest.png",
        "forecasts.csv",
        "summary.json",
    ]


def test_a_trace_whose_first_fit_comes_after_its_end_exits_2_rather_than_grade_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    series = load(2)  # a day and 5 minutes: past the one-day check, but the first forecast,
    short = Series(series.start, series.step, series.values[: 288 + 2])  # made at a day, is late
    trace = write_trace(tmp_path / "day.csv", short)
    code = cli.main(["backtest", str(trace), "--model", "seasonal", "--compare", "none",
                     "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert f"{trace}: no seasonal forecast could be graded" in err and "at least 3 days" in err
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_limit_inside_a_gap_names_the_window_and_the_warmup_that_grades_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 21 days with days 7-14 blank: the default warm-up, half of 21d, puts 3 days of --limit in
    # the gap. Before, it walked and then blamed the export ("21d observed ... export at least
    # 3 days") for a file holding 14 days.
    gap = tuple(range(7 * 288, 14 * 288))
    trace = write_trace(tmp_path / "gap.csv", load(21), blank=gap)
    flags = ["--model", "seasonal", "--compare", "none", "--limit", "3d"]
    assert exit_code(["backtest", str(trace), *flags, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{trace}: --limit 3d grades 2023-11-30 12:00:00 to 2023-12-03 12:00:00" in err
    assert "after the warm-up of 10d12h (14d, or half a trace shorter than 28d" in err
    assert "no value from 2023-11-27 00:00:00 to 2023-12-04 00:00:00" in err
    assert "give --warmup 14d to grade from where the load resumes, or a --limit over 3d12h" in err
    assert "export" not in err
    assert not (tmp_path / "out" / "summary.json").exists()


def test_the_nothing_graded_refusal_does_not_count_a_gap_as_observed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    series = load(2)  # a day and 10 minutes, a 2-hour gap in it: 22h10m observed in 1d10m
    short = Series(series.start, series.step, series.values[: 288 + 2])
    trace = write_trace(tmp_path / "day.csv", short, blank=tuple(range(100, 124)))
    code = cli.main(["backtest", str(trace), "--model", "seasonal", "--compare", "none",
                     "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    assert "(22h10m observed within 1d10m, the warm-up not scored)" in capsys.readouterr().err


def test_a_percentile_threshold_of_an_idle_trace_names_the_file_and_a_threshold_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = np.zeros(4 * 288)
    values[::200] = 5.0  # a request now and then: the 99th percentile is 0
    trace = write_trace(tmp_path / "idle.csv", Series(1_700_000_000.0, 300.0, values))
    code = cli.main(["backtest", str(trace), "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{trace}: --threshold 'p99/20': the trace's 99th percentile is 0" in err
    assert "--threshold 40" in err
    assert not (tmp_path / "out").exists()  # refused before the output folder is made


def test_a_value_a_thousand_times_the_trace_s_99th_percentile_is_named_before_the_walk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, one 1e9 in nasa's 5 days was read silently: the baselines' replicas were sized
    for it (2.6 M reactive GPU-hours), the policy's capped at --max-replicas, and the frontier
    read 0.22 where it is 0.48 without it."""
    series = load(4, seed=4)
    values = series.values.copy()
    values[3 * 288 + 144] = 1e9  # the scored day's noon
    trace = write_trace(tmp_path / "spike.csv", Series(series.start, series.step, values))
    argv = ["backtest", str(trace), "--model", "seasonal", "--compare", "none", "--warmup", "3d",
            "--threshold", "20", "--no-decisions", "--out", str(tmp_path / "out")]  # fmt: skip
    assert cli.main(argv) == 0  # read as given: it may be real
    noon = pd.Timestamp(series.start + (3 * 288 + 144) * series.step, unit="s")
    err = capsys.readouterr().err
    assert f"warning: {trace}: 1 value(s) over 1000 times its 99th percentile" in err
    assert f"the largest 1e+09 at {noon:%Y-%m-%d %H:%M:%S}; if that is a bad sample" in err
    assert "--max-replicas 100" in err
    bursts = values.copy()
    bursts[3 * 288 + 144] = 25 * np.nanpercentile(values, 99)  # twitter_aapl's news: 21x
    assert (
        backtest_checks.outlier_warning(
            Series(series.start, series.step, bursts), "t", max_replicas=100
        )
        is None
    )


def test_a_trace_of_zeros_exits_2_before_the_walk_whatever_the_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, with --threshold 40 it ran and printed every run at frontier 0.00 (below 1
    beats headroom), coverage 100% and nan% against the reference, exit 0."""
    values = np.zeros(4 * 288)
    values[[7, 500]] = np.nan  # missing values are not load either
    trace = write_trace(tmp_path / "zeros.csv", Series(1_700_000_000.0, 300.0, values))
    code = cli.main(["backtest", str(trace), "--threshold", "40", "--out", str(tmp_path / "o")])
    assert code == 2
    assert f"{trace}: every value is 0, so there is no load to forecast" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("step", "ahead"), [(300.0, "15m"), (600.0, "20m"), (1800.0, "1h")])
def test_the_printed_grading_distance_is_the_cold_start_in_whole_steps_plus_one(
    step: float, ahead: str
) -> None:
    from scaler.offline import backtest_run

    k = replay.yardstick.cold_start_steps(600.0, step)
    summary = {
        "config": {"quantile": 0.95, "lead_time": "10m", "graded_step_ahead": k + 1},
        "trace": {"step_seconds": step},
        "models": {},
    }
    assert backtest.graded_ahead(summary) == ahead
    assert f"graded {ahead} after the last load seen (10m cold start)" in backtest_run.table(
        summary
    )


def test_the_coverage_bars_show_a_coverage_far_below_half() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaler.offline import backtest_plot

    figures = {"coverage": 0.95, "raw_coverage": 0.337, "pinball": 1.0}
    result = backtest.Result(
        frames={}, summary={"config": {"quantile": 0.95}, "models": {"seasonal": figures}}
    )
    fig, (loss, cov) = plt.subplots(1, 2)
    backtest_plot.draw_comparison(loss, cov, result)
    assert cov.get_ylim()[0] <= 33.7
    plt.close(fig)


def test_the_forecast_plot_s_title_says_how_much_it_shows() -> None:
    """Before, "last 7 days of the backtest" over a backtest that graded half a day."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaler.offline import backtest_plot

    result = backtest.run(load(4, seed=5), CONFIG)  # half a day graded
    fig, (whole, tail) = plt.subplots(1, 2)
    backtest_plot.draw_forecast(whole, result, model="seasonal", days=7.0)
    backtest_plot.draw_forecast(tail, result, model="seasonal", days=0.25)
    assert whole.get_title() == "seasonal: forecast vs actual (all 12h graded)"
    assert tail.get_title() == "seasonal: forecast vs actual (the last 6h graded)"
    plt.close(fig)


@pytest.mark.parametrize("flags", [["--query-step", "1m"], ["--since", "3d"], ["--query", "up"]])
def test_a_prometheus_read_s_flags_beside_a_trace_file_are_refused_not_ignored(
    flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    code = cli.main(["backtest", str(trace), *flags, "--out", str(tmp_path / "out")])
    assert code == 2
    assert f"{flags[0]} with TRACE.csv: they shape a --prometheus-url read" in (
        capsys.readouterr().err
    )


def test_without_out_it_writes_to_backtest_and_the_trace_s_name_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, --out was required: a first run printed a 30-line usage block and then
    # "the following arguments are required: --out", exit 2.
    (tmp_path / "traces").mkdir()
    trace = write_trace(tmp_path / "traces" / "my-load.csv", load(4))
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    flags = ["--compare", "none", "--model", "seasonal", "--warmup", "3d", "--limit", "12h"]
    assert exit_code(["backtest", str(trace), *flags]) == 0
    out = here / "backtest-my-load"
    assert sorted(p.name for p in out.iterdir()) == [
        "backtest.png",
        "decisions.csv",
        "decisions.jsonl",
        "forecasts.csv",
        "summary.json",
    ]
    printed = capsys.readouterr().out
    assert "to backtest-my-load (no --out given: the default, backtest-NAME here)" in printed
    # A second run replaces the first's files, as a run with --out DIR does.
    (out / "summary.json").write_text("{}")
    assert exit_code(["backtest", str(trace), *flags]) == 0
    assert json.loads((out / "summary.json").read_text())["config"]["model"] == "seasonal"
    assert backtest_run.default_out(Path("x/nasa.csv.gz")) == Path("backtest-nasa")
    assert backtest_run.default_out(None) == Path("backtest-prometheus")


def test_gradable_refuses_what_scaler_backtest_refuses_and_gives_the_model_step_peaks() -> None:
    """notebooks/backtest.ipynb grades a user's file through `gradable`, as the command does:
    before, calling `run` directly, a 20-hour export drew a table of nan and empty figures
    where `scaler backtest` says to export more than a day."""
    config = backtest.BacktestConfig(model="seasonal", compare=())
    minutes = Series(1_700_000_000.0, 60.0, np.arange(4 * 1440, dtype=np.float64) % 50)
    series = backtest_checks.gradable(minutes, "export.csv", config)
    assert series.step == 300.0  # each 5 minutes' peak: the load a replica must serve
    assert np.array_equal(series.values, resolution.model_series(minutes, 300.0).values)
    assert np.nanmax(series.values) == 49.0 and len(series) in (4 * 288, 4 * 288 + 1)
    short = Series(1_700_000_000.0, 600.0, np.full(120, 12.5))
    with pytest.raises(ConfigError, match=r"export.csv: holds 20.0 h of observed load.*export"):
        backtest_checks.gradable(short, "export.csv", config)
    limited = backtest.BacktestConfig(model="seasonal", compare=(), limit=60.0)
    with pytest.raises(ConfigError, match="--limit 1m: shorter than one model step"):
        backtest_checks.gradable(minutes, "export.csv", limited)
